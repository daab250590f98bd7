"""Environments by name, and the standard training stack around them."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from accelrl.entry_points import load_entry_point
from accelrl.envs.base import Environment
from accelrl.envs.brax_env import PREFIX as BRAX_PREFIX
from accelrl.envs.brax_env import BraxEnv
from accelrl.envs.cartpole import CartPole
from accelrl.envs.catch import Catch
from accelrl.envs.gymnax_env import PREFIX as GYMNAX_PREFIX
from accelrl.envs.gymnax_env import GymnaxEnv
from accelrl.envs.locomotion import ENVS as LOCOMOTION_ENVS
from accelrl.envs.memory import MemoryCue
from accelrl.envs.pendulum import Pendulum
from accelrl.envs.wrappers import (
    ActionRepeat,
    AutoReset,
    EpisodeStatistics,
    NormalizeObservation,
    TimeLimit,
    Vectorize,
)

_REGISTRY: dict[str, Callable[..., Environment]] = {}
_LIBRARIES: dict[str, Callable[..., Environment]] = {GYMNAX_PREFIX: GymnaxEnv, BRAX_PREFIX: BraxEnv}
"""Name prefixes of other JAX env libraries, and their adapters (made with the rest)."""


def register(name: str, factory: Callable[..., Environment]) -> None:
    """Makes `factory(**kwargs)` available as `make(name, **kwargs)`; names are unique."""
    if name in _REGISTRY:
        raise ValueError(f"environment {name!r} is already registered")
    _REGISTRY[name] = factory


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


def make(name: str, **kwargs: Any) -> Environment:
    """The bare (unwrapped, single-instance) environment registered as `name`.

    `gymnax:ENV_ID` is gymnax's env ENV_ID and `brax:NAME` Brax's env NAME (see
    `accelrl.envs.gymnax_env` and `accelrl.envs.brax_env`). Any other name
    `module:attribute` that is not registered is an entry point, as in gymnasium's registry:
    `attribute` of the imported `module` (a class or factory) is called with `kwargs`, so
    `env.name=my_envs:GridWorld` trains an env of the user's own module.
    """
    if name in _REGISTRY:
        return _REGISTRY[name](**kwargs)
    for prefix, library_env in _LIBRARIES.items():
        if name.startswith(prefix):
            return library_env(name.removeprefix(prefix), **kwargs)
    if ":" in name:
        return _entry_point(name)(**kwargs)
    close = difflib.get_close_matches(name, _REGISTRY, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"unknown environment {name!r}.{hint} Known: {', '.join(registered_names())}, "
        "gymnax:ENV_ID, brax:NAME, or module:attribute of your own"
    )


def _entry_point(name: str) -> Callable[..., Environment]:
    factory = load_entry_point(name, "environment")
    if not callable(factory):
        raise ValueError(f"environment {name!r} is a {type(factory).__name__}, not callable")
    return factory


def make_training_env(
    name: str,
    num_envs: int,
    *,
    max_steps: int | None = None,
    action_repeat: int = 1,
    normalize_observation: bool = False,
    env_kwargs: dict[str, Any] | None = None,
) -> Environment:
    """The batched, auto-resetting env a training loop steps.

    ActionRepeat (if > 1) -> TimeLimit -> EpisodeStatistics -> AutoReset -> Vectorize ->
    NormalizeObservation (if asked). `max_steps` counts agent steps (after action repeat);
    it defaults to the env's own limit (scaled by the repeat) and TimeLimit is skipped when
    neither exists.
    """
    env = make(name, **(env_kwargs or {}))
    if action_repeat > 1:
        env = ActionRepeat(env, action_repeat)
    limit = max_steps if max_steps is not None else env.default_max_steps
    if limit is not None:
        env = TimeLimit(env, limit)
    env = Vectorize(AutoReset(EpisodeStatistics(env)), num_envs)
    if normalize_observation:
        env = NormalizeObservation(env)
    return env


register("cartpole", CartPole)
register("pendulum", Pendulum)
register("catch", Catch)
register("memory_cue", MemoryCue)
for _name, _factory in LOCOMOTION_ENVS.items():
    register(_name, _factory)
