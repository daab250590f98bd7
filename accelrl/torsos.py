"""Torsos named in a config: a built-in's name, or a flax Module of the user's named as a
`module:attribute` entry point (`agent.torso=my_nets:ResNet`), as envs are named."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TypeVar

import flax.linen as nn
import jax

from accelrl.config import ConfigError
from accelrl.entry_points import load_entry_point
from agents.torsos import TORSOS, Torso

Agent = TypeVar("Agent")


def with_torso(make_agent: Callable[[Torso], Agent], name: str, key: str) -> Agent:
    """`make_agent(torso)` with the torso the config's `key` names.

    A user's torso is initialised abstractly once with the agent, so that one that fails on
    the env's observations is a ConfigError naming `key`, raised before a run starts.
    """
    agent = make_agent(resolve_torso(name, key))
    if ":" in name:
        try:
            jax.eval_shape(agent.init, jax.random.PRNGKey(0))
        except Exception as error:  # the user's code may raise anything
            raise ConfigError(f"{key}={name!r}: {type(error).__name__}: {error}") from None
    return agent


def resolve_torso(name: str, key: str) -> Torso:
    """The torso a config's `key` names: a built-in's name as it is, or the user's module.

    `module:attribute` may be a flax.linen Module class (made with its defaults), a Module
    instance, or a function of no arguments that returns one. Anything else is a ConfigError
    that names `key`.
    """
    if ":" not in name:
        if name not in TORSOS:
            close = difflib.get_close_matches(name, TORSOS, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"{key}={name!r} is not a torso.{hint} Known: {', '.join(TORSOS)}, "
                "or module:attribute naming a flax Module of your own"
            )
        return name
    try:
        torso = load_entry_point(name, key)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if not isinstance(torso, nn.Module) and callable(torso):
        try:
            torso = torso()
        except TypeError as error:
            raise ConfigError(
                f"{key}={name!r}: cannot make it without arguments ({error}); give its "
                "fields defaults or point to a function that returns the module"
            ) from None
    if not isinstance(torso, nn.Module):
        raise ConfigError(
            f"{key}={name!r} is of type {type(torso).__name__}, not a flax.linen Module "
            "(observations [B, ...] -> features [B, F])"
        )
    return torso
