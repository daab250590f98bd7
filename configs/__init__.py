"""Training presets: one module per preset, each defining `config() -> TrainConfig`."""

from __future__ import annotations

import difflib
import importlib
import pkgutil

from accelrl.config import ConfigError, TrainConfig


def preset_names() -> list[str]:
    """Every preset module in this package."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load_preset(name: str) -> TrainConfig:
    """The config of preset `name`; an unknown name is a ConfigError listing the known ones."""
    names = preset_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown preset {name!r}.{hint} Presets: {', '.join(names)}")
    return importlib.import_module(f"{__name__}.{name}").config()
