"""Training presets: one module per preset, each defining `config() -> TrainConfig`."""

from __future__ import annotations

import difflib
import importlib.util
import pkgutil
from pathlib import Path

from accelrl.config import ConfigError, TrainConfig


def preset_names() -> list[str]:
    """Every preset module in this package."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load_preset(name: str) -> TrainConfig:
    """The config of preset `name`, or of a preset file of the user's (`name` ending in .py,
    defining `config() -> TrainConfig` like the modules here); an unknown name is a
    ConfigError listing the known ones."""
    if name.endswith(".py"):
        return _load_preset_file(Path(name))
    names = preset_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown preset {name!r}.{hint} Presets: {', '.join(names)}")
    return importlib.import_module(f"{__name__}.{name}").config()


def _load_preset_file(path: Path) -> TrainConfig:
    if not path.is_file():
        raise ConfigError(f"preset file {str(path)!r} does not exist")
    spec = importlib.util.spec_from_file_location(f"accelrl_user_preset_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = getattr(module, "config", None)
    if not callable(config):
        raise ConfigError(f"preset file {str(path)!r} defines no config() function")
    result = config()
    if not isinstance(result, TrainConfig):
        raise ConfigError(
            f"config() of {str(path)!r} returned {type(result).__name__}, not a TrainConfig"
        )
    return result
