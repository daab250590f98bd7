"""CartPole-v1 as in gymnasium: Euler integration, same constants, reset and termination."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import struct

from accelrl.envs.base import Environment, TimeStep, first_timestep
from accelrl.envs.spaces import Box, Discrete

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_CART + MASS_POLE
HALF_LENGTH = 0.5
POLE_MASS_LENGTH = MASS_POLE * HALF_LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4


@struct.dataclass
class CartPoleState:
    x: jax.Array
    x_dot: jax.Array
    theta: jax.Array
    theta_dot: jax.Array


def _observation(state: CartPoleState) -> jax.Array:
    return jnp.stack([state.x, state.x_dot, state.theta, state.theta_dot]).astype(jnp.float32)


class CartPole(Environment[CartPoleState]):
    """Balance a pole on a cart; action 0 pushes left, 1 pushes right.

    Reward is 1.0 on every step, the terminating one included (as gymnasium's default).
    """

    def reset(self, key: jax.Array) -> tuple[CartPoleState, TimeStep]:
        x, x_dot, theta, theta_dot = jax.random.uniform(
            key, (4,), jnp.float32, minval=-0.05, maxval=0.05
        )
        state = CartPoleState(x, x_dot, theta, theta_dot)
        return state, first_timestep(_observation(state))

    def step(self, state: CartPoleState, action: jax.Array) -> tuple[CartPoleState, TimeStep]:
        force = jnp.where(action == 1, FORCE_MAG, -FORCE_MAG)
        cos, sin = jnp.cos(state.theta), jnp.sin(state.theta)
        temp = (force + POLE_MASS_LENGTH * state.theta_dot**2 * sin) / TOTAL_MASS
        theta_acc = (GRAVITY * sin - cos * temp) / (
            HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * cos**2 / TOTAL_MASS)
        )
        x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos / TOTAL_MASS
        state = CartPoleState(
            x=state.x + TAU * state.x_dot,
            x_dot=state.x_dot + TAU * x_acc,
            theta=state.theta + TAU * state.theta_dot,
            theta_dot=state.theta_dot + TAU * theta_acc,
        )
        terminated = (jnp.abs(state.x) > X_THRESHOLD) | (jnp.abs(state.theta) > THETA_THRESHOLD)
        return state, TimeStep(
            observation=_observation(state),
            reward=jnp.ones((), jnp.float32),
            terminated=terminated,
            truncated=jnp.zeros((), bool),
            info={},
        )

    @property
    def observation_space(self) -> Box:
        high = [X_THRESHOLD * 2, float("inf"), THETA_THRESHOLD * 2, float("inf")]
        return Box(shape=(4,), low=[-h for h in high], high=high)

    @property
    def action_space(self) -> Discrete:
        return Discrete(2)

    @property
    def default_max_steps(self) -> int:
        return 500
