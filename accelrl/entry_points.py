"""`module:attribute` entry points: the user's own environments and torsos, named in a config.

As in gymnasium's registry, `module:attribute` names `attribute` of the imported `module`, so
`env.name=my_envs:GridWorld` or `agent.torso=my_nets:ResNet` use code of the user's own.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


def load_entry_point(name: str, what: str) -> Any:
    """The object `name` ("module:attribute") points to; ValueError naming `what` if none."""
    module_name, _, attribute = name.partition(":")
    try:
        module = _import_from_path_or_cwd(module_name)
    except ImportError as error:
        raise ValueError(f"{what} {name!r}: cannot import {module_name!r} ({error})") from None
    if not hasattr(module, attribute):
        raise ValueError(f"{what} {name!r}: {module_name} has no attribute {attribute!r}")
    return getattr(module, attribute)


def _import_from_path_or_cwd(module_name: str) -> Any:
    """`module_name` from the Python path or, failing that, from the working directory (as
    `python -m` would find it; the `accelrl` script does not have it on its path). The
    directory is appended, and only now: a user's `configs/` or `physics.py` there cannot
    shadow accelrl's packages, which are imported by then."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        cwd = os.getcwd()
        if error.name != module_name.partition(".")[0] or cwd in sys.path or "" in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(module_name)
