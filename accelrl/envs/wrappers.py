"""Functional wrappers: small, explicit, jit/vmap-able, branchless on traced values.

Each wrapper that needs memory keeps it in its own `flax.struct` state around the inner
state. The training stack (see `registry.make_training_env`) is
ActionRepeat -> TimeLimit -> EpisodeStatistics -> AutoReset -> Vectorize -> NormalizeObservation.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from accelrl.envs.base import Environment, TimeStep
from accelrl.envs.spaces import Box, Space


def _select(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Leafwise `where(pred, on_true, on_false)` over two pytrees of the same structure."""
    return jax.tree.map(lambda t, f: jnp.where(pred, t, f), on_true, on_false)


class Wrapper(Environment):
    """Base wrapper: delegates everything it does not override to `env`."""

    def __init__(self, env: Environment) -> None:
        self.env = env

    def reset(self, key: jax.Array) -> tuple[Any, TimeStep]:
        return self.env.reset(key)

    def step(self, state: Any, action: jax.Array) -> tuple[Any, TimeStep]:
        return self.env.step(state, action)

    @property
    def observation_space(self) -> Box:
        return self.env.observation_space

    @property
    def action_space(self) -> Space:
        return self.env.action_space

    @property
    def default_max_steps(self) -> int | None:
        return self.env.default_max_steps

    @property
    def unwrapped(self) -> Environment:
        return self.env.unwrapped

    def unwrapped_state(self, state: Any) -> Any:
        return self.env.unwrapped_state(state)


class ActionRepeat(Wrapper):
    """Applies each action `repeat` times and sums the rewards.

    Once the episode ends inside the repeat, the remaining inner steps are computed but
    masked out (state and TimeStep frozen), so the result carries the last real step's
    observation, flags and info. `default_max_steps` is in wrapper steps: ceil(inner / repeat).
    """

    def __init__(self, env: Environment, repeat: int) -> None:
        if repeat < 1:
            raise ValueError(f"repeat must be >= 1, got {repeat}")
        super().__init__(env)
        self.repeat = repeat

    def step(self, state: Any, action: jax.Array) -> tuple[Any, TimeStep]:
        state, timestep = self.env.step(state, action)

        def body(carry: tuple[Any, TimeStep], _: None) -> tuple[tuple[Any, TimeStep], None]:
            state, timestep = carry
            next_state, next_timestep = self.env.step(state, action)
            next_timestep = next_timestep.replace(reward=timestep.reward + next_timestep.reward)
            done = timestep.done
            return (_select(done, state, next_state), _select(done, timestep, next_timestep)), None

        (state, timestep), _ = jax.lax.scan(body, (state, timestep), None, self.repeat - 1)
        return state, timestep

    @property
    def default_max_steps(self) -> int | None:
        inner = self.env.default_max_steps
        return None if inner is None else math.ceil(inner / self.repeat)


@struct.dataclass
class TimeLimitState:
    inner: Any
    steps: jax.Array


class TimeLimit(Wrapper):
    """Truncates episodes after `max_steps` steps; termination takes precedence.

    `terminated` and `truncated` are never both True: a terminal step at the limit is
    reported as terminated only (no bootstrapping).
    """

    def __init__(self, env: Environment, max_steps: int) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        super().__init__(env)
        self.max_steps = max_steps

    def reset(self, key: jax.Array) -> tuple[TimeLimitState, TimeStep]:
        inner, timestep = self.env.reset(key)
        return TimeLimitState(inner, jnp.zeros((), jnp.int32)), timestep

    def step(self, state: TimeLimitState, action: jax.Array) -> tuple[TimeLimitState, TimeStep]:
        inner, timestep = self.env.step(state.inner, action)
        steps = state.steps + 1
        truncated = (timestep.truncated | (steps >= self.max_steps)) & ~timestep.terminated
        return TimeLimitState(inner, steps), timestep.replace(truncated=truncated)

    @property
    def default_max_steps(self) -> int:
        return self.max_steps

    def unwrapped_state(self, state: TimeLimitState) -> Any:
        return self.env.unwrapped_state(state.inner)


@struct.dataclass
class EpisodeStatisticsState:
    inner: Any
    episode_return: jax.Array
    episode_length: jax.Array


class EpisodeStatistics(Wrapper):
    """Adds info["episode_return"] and info["episode_length"] to every TimeStep.

    They hold the finished episode's totals on steps where `done`, and 0 elsewhere (running
    totals are not reported), so `sum(info[k] * done) / sum(done)` averages finished episodes.
    Length counts wrapper steps. The accumulators are not zeroed here: `AutoReset` (outside)
    zeroes them by swapping in a fresh reset state.
    """

    def reset(self, key: jax.Array) -> tuple[EpisodeStatisticsState, TimeStep]:
        inner, timestep = self.env.reset(key)
        episode_return = jnp.zeros((), jnp.float32)
        episode_length = jnp.zeros((), jnp.int32)
        info = {**timestep.info, "episode_return": episode_return, "episode_length": episode_length}
        state = EpisodeStatisticsState(inner, episode_return, episode_length)
        return state, timestep.replace(info=info)

    def step(
        self, state: EpisodeStatisticsState, action: jax.Array
    ) -> tuple[EpisodeStatisticsState, TimeStep]:
        inner, timestep = self.env.step(state.inner, action)
        episode_return = state.episode_return + timestep.reward.astype(jnp.float32)
        episode_length = state.episode_length + 1
        done = timestep.done
        info = {
            **timestep.info,
            "episode_return": jnp.where(done, episode_return, 0.0),
            "episode_length": jnp.where(done, episode_length, 0),
        }
        state = EpisodeStatisticsState(inner, episode_return, episode_length)
        return state, timestep.replace(info=info)

    def unwrapped_state(self, state: EpisodeStatisticsState) -> Any:
        return self.env.unwrapped_state(state.inner)


@struct.dataclass
class AutoResetState:
    inner: Any
    key: jax.Array


class AutoReset(Wrapper):
    """Starts a new episode, branchlessly, on the step where the current one ends.

    On a done step the returned TimeStep has the reset observation but the final step's
    reward, flags and info; info["final_observation"] is the pre-reset observation (for
    bootstrapping truncated episodes). It is present after reset and every step (equal to
    the observation when not done) so the info keys never change. A reset is computed on
    every step and selected with `where`, the price of having no branches.
    """

    def reset(self, key: jax.Array) -> tuple[AutoResetState, TimeStep]:
        key, reset_key = jax.random.split(key)
        inner, timestep = self.env.reset(reset_key)
        info = {**timestep.info, "final_observation": timestep.observation}
        return AutoResetState(inner, key), timestep.replace(info=info)

    def step(self, state: AutoResetState, action: jax.Array) -> tuple[AutoResetState, TimeStep]:
        key, reset_key = jax.random.split(state.key)
        inner, timestep = self.env.step(state.inner, action)
        reset_inner, reset_timestep = self.env.reset(reset_key)
        done = timestep.done
        info = {**timestep.info, "final_observation": timestep.observation}
        timestep = timestep.replace(
            observation=jnp.where(done, reset_timestep.observation, timestep.observation),
            info=info,
        )
        return AutoResetState(_select(done, reset_inner, inner), key), timestep

    def unwrapped_state(self, state: AutoResetState) -> Any:
        return self.env.unwrapped_state(state.inner)


class Vectorize(Wrapper):
    """`num_envs` independent copies stepped in lockstep with `vmap`.

    States, observations, rewards and flags gain a leading [num_envs] axis; the spaces stay
    those of a single env.
    """

    def __init__(self, env: Environment, num_envs: int) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        super().__init__(env)
        self.num_envs = num_envs

    def reset(self, key: jax.Array) -> tuple[Any, TimeStep]:
        return jax.vmap(self.env.reset)(jax.random.split(key, self.num_envs))

    def step(self, state: Any, action: jax.Array) -> tuple[Any, TimeStep]:
        return jax.vmap(self.env.step)(state, action)


@struct.dataclass
class RunningStats:
    """Running mean/variance of observations over all envs and steps seen."""

    mean: jax.Array
    var: jax.Array
    count: jax.Array

    @classmethod
    def create(cls, shape: tuple[int, ...]) -> RunningStats:
        """Empty stats: normalising with them is (almost) the identity."""
        return cls(
            jnp.zeros(shape, jnp.float32), jnp.ones(shape, jnp.float32), jnp.zeros((), jnp.float32)
        )

    def update(self, batch: jax.Array) -> RunningStats:
        """Merges the moments of `batch` [..., *shape] (Chan et al. parallel algorithm)."""
        axes = tuple(range(batch.ndim - self.mean.ndim))
        batch = batch.astype(jnp.float32)
        batch_count = jnp.asarray(math.prod(batch.shape[: len(axes)]), jnp.float32)
        batch_mean = jnp.mean(batch, axis=axes)
        batch_var = jnp.var(batch, axis=axes)
        total = self.count + batch_count
        delta = batch_mean - self.mean
        mean = self.mean + delta * batch_count / total
        m2 = (
            self.var * self.count
            + batch_var * batch_count
            + delta**2 * self.count * batch_count / total
        )
        return RunningStats(mean, m2 / total, total)


@struct.dataclass
class NormalizeObservationState:
    inner: Any
    stats: RunningStats


class NormalizeObservation(Wrapper):
    """Normalises observations with running statistics shared across a batch of envs.

    Stats are updated from the raw `observation` after reset and every step (if `update`),
    then `observation` and info["final_observation"] (if present) are mapped to
    clip((x - mean) / sqrt(var + epsilon), -clip, clip). Evaluators pass a training run's
    stats as `initial_stats` with `update=False`, so even the first observation is normalised
    as in training.
    """

    def __init__(
        self,
        env: Environment,
        update: bool = True,
        clip: float = 10.0,
        epsilon: float = 1e-8,
        initial_stats: RunningStats | None = None,
    ) -> None:
        super().__init__(env)
        self.update = update
        self.initial_stats = initial_stats
        self.clip = clip
        self.epsilon = epsilon

    def _process(self, stats: RunningStats, timestep: TimeStep) -> tuple[RunningStats, TimeStep]:
        if self.update:
            stats = stats.update(timestep.observation)

        def normalize(x: jax.Array) -> jax.Array:
            x = (x - stats.mean) / jnp.sqrt(stats.var + self.epsilon)
            return jnp.clip(x, -self.clip, self.clip).astype(jnp.float32)

        info = dict(timestep.info)
        if "final_observation" in info:
            info["final_observation"] = normalize(info["final_observation"])
        return stats, timestep.replace(observation=normalize(timestep.observation), info=info)

    def reset(self, key: jax.Array) -> tuple[NormalizeObservationState, TimeStep]:
        inner, timestep = self.env.reset(key)
        stats = self.initial_stats
        if stats is None:
            stats = RunningStats.create(self.observation_space.shape)
        stats, timestep = self._process(stats, timestep)
        return NormalizeObservationState(inner, stats), timestep

    def step(
        self, state: NormalizeObservationState, action: jax.Array
    ) -> tuple[NormalizeObservationState, TimeStep]:
        inner, timestep = self.env.step(state.inner, action)
        stats, timestep = self._process(state.stats, timestep)
        return NormalizeObservationState(inner, stats), timestep

    @property
    def num_envs(self) -> int:
        """Batch size of the wrapped `Vectorize` env."""
        return self.env.num_envs

    @property
    def observation_space(self) -> Box:
        return Box(shape=self.env.observation_space.shape, low=-self.clip, high=self.clip)

    def unwrapped_state(self, state: NormalizeObservationState) -> Any:
        return self.env.unwrapped_state(state.inner)
