"""A memory task: the first observation shows a cue, the last step pays for recalling it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from accelrl.envs.base import Environment, TimeStep, first_timestep
from accelrl.envs.spaces import Box, Discrete


@struct.dataclass
class MemoryCueState:
    t: jax.Array  # steps taken in this episode
    cue: jax.Array


class MemoryCue(Environment[MemoryCueState]):
    """Episodes of `length` steps with `num_cues` cues and as many actions.

    The observation has `num_cues + 1` entries: the first one shows the cue (one-hot), the
    middle ones are all zero, and the last one (t = length - 1) has only the final "query"
    entry set. The action taken at the query ends the episode (terminated) with reward +1 if
    it equals the cue, else -1; all other rewards are 0. Without memory the best expected
    return is (2 / num_cues) - 1 (0 for two cues); with it, 1.
    """

    def __init__(self, length: int = 10, num_cues: int = 2) -> None:
        if length < 2 or num_cues < 2:
            raise ValueError(f"need length >= 2 and num_cues >= 2, got {length}, {num_cues}")
        self.length = length
        self.num_cues = num_cues

    def _observation(self, t: jax.Array, cue: jax.Array) -> jax.Array:
        cue_part = jax.nn.one_hot(cue, self.num_cues, dtype=jnp.float32) * (t == 0)
        query = (t == self.length - 1).astype(jnp.float32)[None]
        return jnp.concatenate([cue_part, query]).astype(jnp.float32)

    def reset(self, key: jax.Array) -> tuple[MemoryCueState, TimeStep]:
        cue = jax.random.randint(key, (), 0, self.num_cues, jnp.int32)
        state = MemoryCueState(t=jnp.zeros((), jnp.int32), cue=cue)
        return state, first_timestep(self._observation(state.t, cue))

    def step(self, state: MemoryCueState, action: jax.Array) -> tuple[MemoryCueState, TimeStep]:
        at_query = state.t == self.length - 1
        reward = jnp.where(at_query, jnp.where(action == state.cue, 1.0, -1.0), 0.0)
        t = state.t + 1
        return MemoryCueState(t=t, cue=state.cue), TimeStep(
            observation=self._observation(t, state.cue),
            reward=reward.astype(jnp.float32),
            terminated=at_query,
            truncated=jnp.zeros((), bool),
            info={},
        )

    @property
    def observation_space(self) -> Box:
        return Box(shape=(self.num_cues + 1,), low=0.0, high=1.0)

    @property
    def action_space(self) -> Discrete:
        return Discrete(self.num_cues)
