"""InvertedDoublePendulum: balance two poles in series on a cart (Brax's)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import physics
from accelrl.envs.locomotion.base import LocomotionEnv, uniform_noise

POLE_LENGTH = 0.6


class InvertedDoublePendulum(LocomotionEnv):
    """InvertedDoublePendulum on our physics (frame_skip 5 as Gymnasium, timestep 0.01: dt 0.05).

    Action: 1 cart force control in [-1, 1] (gear 500); out-of-range actions are clipped.
    Observation (8, Brax's; Gymnasium v5 appends the clipped slider constraint force: 9): cart
    x, sin and cos of the two hinge angles, clip(qvel, -10, 10) (3).
    Reward = alive - distance - velocity, with the tip (x, z) of the second pole:
      alive = 10 unless terminated, else 0
      distance = 0.01 x^2 + (z - 2)^2
      velocity = 1e-3 qvel[1]^2 + 5e-3 qvel[2]^2
    Terminates when the tip's z <= 1 (or the state is not finite).
    Reset (Brax's noise): qpos0 + U(-0.01, 0.01), qvel 0.01 * N(0, 1).
    """

    asset = "inverted_double_pendulum.xml"
    frame_skip = 5

    def __init__(self) -> None:
        super().__init__()
        self.pole2 = self.sys.body_id("pole2")

    def _initial_state(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k1, k2 = jax.random.split(key)
        q = self.sys.qpos0 + uniform_noise(k1, self.sys.nq, 0.01)
        return q, 0.01 * jax.random.normal(k2, (self.sys.nv,), jnp.float32)

    def _observation(self, pipeline: physics.State, action: jax.Array) -> jax.Array:
        q = pipeline.q
        return jnp.concatenate(
            [q[:1], jnp.sin(q[1:]), jnp.cos(q[1:]), jnp.clip(pipeline.qd, -10.0, 10.0)]
        )

    def tip(self, pipeline: physics.State) -> jax.Array:
        """World position of the free end of the second pole."""
        return pipeline.xpos[self.pole2] + pipeline.xmat[self.pole2][:, 2] * POLE_LENGTH

    def _reward(
        self, before: physics.State, after: physics.State, action: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        x, _, z = self.tip(after)
        v1, v2 = after.qd[1], after.qd[2]
        distance = 0.01 * x**2 + (z - 2.0) ** 2
        velocity = 1e-3 * v1**2 + 5e-3 * v2**2
        terminated = z <= 1.0
        alive = jnp.where(terminated, 0.0, 10.0)
        metrics = {
            "reward_survive": alive,
            "distance_penalty": -distance,
            "velocity_penalty": -velocity,
        }
        return alive - distance - velocity, terminated, metrics
