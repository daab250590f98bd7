"""gymnax environments under accelrl's env API: `env.name=gymnax:CartPole-v1`.

gymnax (PureJaxRL's environments) is functional already; what differs is the calling
convention:
- gymnax's `step_env(key, state, action, params)` takes a key and the env params; here the key
  travels in the state and the params are fixed when the env is made.
- gymnax's `step` resets inside; `step_env` is used instead (terminated: the env's own end),
  truncation comes from gymnax's `is_truncated` (its `params.max_steps_in_episode` limit), and
  AutoReset resets, keeping the final observation. A step that both terminates and reaches the
  limit is reported terminated only (no bootstrapping).

gymnax is optional (`pip install 'accelrl[gymnax]'`); it is imported only when such a name is
made.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from accelrl.envs.base import Environment, TimeStep, first_timestep
from accelrl.envs.spaces import Box, Discrete, Space

PREFIX = "gymnax:"


@struct.dataclass
class GymnaxState:
    """gymnax's own env state, and the key its next step draws from."""

    env_state: Any
    key: jax.Array


class GymnaxEnv(Environment[GymnaxState]):
    """The gymnax env `env_id` (e.g. "CartPole-v1", "Breakout-MinAtar") with its default
    params; `env_kwargs` go to `gymnax.make`, `params` replace fields of the default params."""

    def __init__(
        self, env_id: str, params: dict[str, Any] | None = None, **env_kwargs: Any
    ) -> None:
        try:
            import gymnax
        except ImportError as error:
            raise ValueError(
                f"environment {PREFIX}{env_id} needs gymnax, which is not installed: "
                f"pip install 'accelrl[gymnax]' ({error})"
            ) from None
        if not hasattr(gymnax.environments.environment.Environment, "is_truncated"):
            raise ValueError(
                f"environment {PREFIX}{env_id} needs gymnax >= 1.0.1 (terminated and truncated "
                f"reported apart), found {getattr(gymnax, '__version__', 'an older one')}"
            )
        if env_id not in gymnax.registered_envs:
            raise ValueError(
                f"unknown gymnax environment {env_id!r}; gymnax has: "
                f"{', '.join(gymnax.registered_envs)}"
            )
        self.env_id = env_id
        try:
            self.env, default = gymnax.make(env_id, **env_kwargs)
        except Exception as error:  # noqa: BLE001 - e.g. bad kwargs, a dataset download
            raise ValueError(
                f"gymnax could not make {env_id!r} with {env_kwargs}: "
                f"{type(error).__name__}: {error}"
            ) from None
        try:
            self.params = default.replace(**(params or {}))
        except (TypeError, ValueError) as error:
            raise ValueError(f"{PREFIX}{env_id}: bad params {params}: {error}") from None
        self._observation_space = _space(self.env.observation_space(self.params), env_id, "obs")
        self._action_space = _space(self.env.action_space(self.params), env_id, "action")
        if not isinstance(self._observation_space, Box):
            raise ValueError(f"{PREFIX}{env_id}: observations must be an array (a Box)")
        self._check_state_keeps_its_shape()

    def reset(self, key: jax.Array) -> tuple[GymnaxState, TimeStep]:
        key, reset_key = jax.random.split(key)
        obs, env_state = self.env.reset_env(reset_key, self.params)
        return GymnaxState(env_state, key), first_timestep(self._observation(obs))

    def step(self, state: GymnaxState, action: jax.Array) -> tuple[GymnaxState, TimeStep]:
        key, step_key = jax.random.split(state.key)
        obs, env_state, reward, terminated, _ = self.env.step_env(
            step_key, state.env_state, action, self.params
        )
        terminated = jnp.asarray(terminated, bool)
        truncated = jnp.asarray(self.env.is_truncated(env_state, self.params), bool)
        timestep = TimeStep(
            observation=self._observation(obs),
            reward=jnp.asarray(reward, jnp.float32).reshape(()),
            terminated=terminated,
            truncated=truncated & ~terminated,
        )
        return GymnaxState(env_state, key), timestep

    @property
    def observation_space(self) -> Box:
        return self._observation_space

    @property
    def action_space(self) -> Space:
        return self._action_space

    def _observation(self, obs: jax.Array) -> jax.Array:
        space = self._observation_space
        return jnp.asarray(obs).reshape(space.shape).astype(space.dtype)

    def _check_state_keeps_its_shape(self) -> None:
        """A step must return a state of the reset's shapes (the training loop scans over
        steps); some gymnax envs broadcast a [1] continuous action into their state."""
        key = jax.ShapeDtypeStruct((2,), jnp.uint32)
        state, _ = jax.eval_shape(self.reset, key)
        space = self._action_space
        action = jax.ShapeDtypeStruct(space.shape, space.dtype)
        after, _ = jax.eval_shape(self.step, state, action)
        before_shapes = jax.tree.map(lambda x: (x.shape, x.dtype), state)
        after_shapes = jax.tree.map(lambda x: (x.shape, x.dtype), after)
        if before_shapes != after_shapes:
            raise ValueError(
                f"{PREFIX}{self.env_id}: a step changes the shape of gymnax's env state "
                f"({before_shapes.env_state} after reset, {after_shapes.env_state} after a "
                "step with an action of its action space), so it cannot be stepped in a loop"
            )


def _space(space: Any, env_id: str, what: str) -> Space:
    """Our Box or Discrete for a gymnax space; others (Dict, Tuple) are refused by name."""
    kind = type(space).__name__
    if kind == "Discrete":
        return Discrete(int(space.n), np.dtype(space.dtype))
    if kind == "Box":
        shape = np.broadcast_shapes(space.shape)  # gymnax allows an int
        dtype = np.dtype(space.dtype)
        bounds = (space.low, space.high)
        low, high = (np.broadcast_to(np.asarray(b), shape).astype(dtype) for b in bounds)
        return Box(shape, low, high, dtype)
    raise ValueError(f"{PREFIX}{env_id}: unsupported {what} space {kind} (Box or Discrete only)")
