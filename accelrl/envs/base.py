"""The functional environment API.

An environment is a pair of pure functions, `reset(key)` and `step(state, action)`, that
jit and vmap. Stochastic environments carry their own PRNG key inside their state. Episodes
end by `terminated` (a true terminal state: no bootstrapping) or `truncated` (cut by a time
limit: learners bootstrap from the final observation).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, Generic, TypeVar

import jax
import jax.numpy as jnp
from flax import struct

from accelrl.envs.spaces import Box, Space

State = TypeVar("State")


@struct.dataclass
class TimeStep:
    """What an environment emits after `reset` or `step`.

    `info` has a fixed set of keys for a given env stack (wrappers add theirs), e.g.
    `final_observation` (AutoReset) and `episode_return`/`episode_length` (EpisodeStatistics).
    """

    observation: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    info: dict[str, jax.Array] = struct.field(default_factory=dict)

    @property
    def done(self) -> jax.Array:
        return jnp.logical_or(self.terminated, self.truncated)


def first_timestep(observation: jax.Array, info: dict[str, Any] | None = None) -> TimeStep:
    """The TimeStep returned by `reset`: zero reward, not done."""
    return TimeStep(
        observation=observation,
        reward=jnp.zeros((), jnp.float32),
        terminated=jnp.zeros((), bool),
        truncated=jnp.zeros((), bool),
        info=info or {},
    )


class Environment(abc.ABC, Generic[State]):
    """A functional, single-instance environment (batch it with `Vectorize`)."""

    steps_physics: ClassVar[bool] = False
    """Whether `step` runs accelrl's `physics` engine. The training loop compiles an env's
    programs with XLA:CPU's settings for physics (physics/xla_cpu.py) when it does, and with
    `NETWORK_COMPILE` (a network's) when it does not."""

    @abc.abstractmethod
    def reset(self, key: jax.Array) -> tuple[State, TimeStep]:
        """Start an episode."""

    @abc.abstractmethod
    def step(self, state: State, action: jax.Array) -> tuple[State, TimeStep]:
        """Advance one step. Must not branch in Python on traced values."""

    @property
    @abc.abstractmethod
    def observation_space(self) -> Box:
        """Spec of one observation."""

    @property
    @abc.abstractmethod
    def action_space(self) -> Space:
        """Spec of one action."""

    @property
    def default_max_steps(self) -> int | None:
        """Episode step limit of the reference definition (None: no limit)."""
        return None

    @property
    def unwrapped(self) -> Environment:
        return self

    def unwrapped_state(self, state: Any) -> Any:
        """The part of `state` that belongs to `unwrapped` (batched under a Vectorize)."""
        return state
