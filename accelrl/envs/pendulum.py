"""Pendulum-v1 as in gymnasium: swing up and hold an underactuated pendulum."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from accelrl.envs.base import Environment, TimeStep, first_timestep
from accelrl.envs.spaces import Box

MAX_SPEED = 8.0
MAX_TORQUE = 2.0
DT = 0.05
MASS = 1.0
LENGTH = 1.0


@struct.dataclass
class PendulumState:
    theta: jax.Array
    theta_dot: jax.Array


def angle_normalize(x: jax.Array) -> jax.Array:
    """Wrap an angle to [-pi, pi)."""
    return ((x + jnp.pi) % (2 * jnp.pi)) - jnp.pi


def _observation(state: PendulumState) -> jax.Array:
    return jnp.stack([jnp.cos(state.theta), jnp.sin(state.theta), state.theta_dot]).astype(
        jnp.float32
    )


class Pendulum(Environment[PendulumState]):
    """Torque-controlled pendulum; never terminates (the time limit ends episodes).

    Actions outside [-2, 2] are clipped, as gymnasium does. The reward is computed from the
    state before the step.
    """

    def __init__(self, g: float = 10.0) -> None:
        self.g = g

    def reset(self, key: jax.Array) -> tuple[PendulumState, TimeStep]:
        high = jnp.array([jnp.pi, 1.0], jnp.float32)
        theta, theta_dot = jax.random.uniform(key, (2,), jnp.float32, minval=-high, maxval=high)
        state = PendulumState(theta, theta_dot)
        return state, first_timestep(_observation(state))

    def step(self, state: PendulumState, action: jax.Array) -> tuple[PendulumState, TimeStep]:
        u = jnp.clip(jnp.reshape(action, ()).astype(jnp.float32), -MAX_TORQUE, MAX_TORQUE)
        th, thdot = state.theta, state.theta_dot
        cost = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
        new_thdot = (
            thdot + (3 * self.g / (2 * LENGTH) * jnp.sin(th) + 3.0 / (MASS * LENGTH**2) * u) * DT
        )
        new_thdot = jnp.clip(new_thdot, -MAX_SPEED, MAX_SPEED)
        state = PendulumState(theta=th + new_thdot * DT, theta_dot=new_thdot)
        return state, TimeStep(
            observation=_observation(state),
            reward=-cost.astype(jnp.float32),
            terminated=jnp.zeros((), bool),
            truncated=jnp.zeros((), bool),
            info={},
        )

    @property
    def observation_space(self) -> Box:
        return Box(shape=(3,), low=[-1.0, -1.0, -MAX_SPEED], high=[1.0, 1.0, MAX_SPEED])

    @property
    def action_space(self) -> Box:
        return Box(shape=(1,), low=-MAX_TORQUE, high=MAX_TORQUE)

    @property
    def default_max_steps(self) -> int:
        return 200
