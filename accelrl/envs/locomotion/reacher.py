"""Reacher: a two-link arm rewarded for bringing its fingertip to a random target (Brax's)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import physics
from accelrl.envs.locomotion.base import LocomotionEnv, uniform_noise


class Reacher(LocomotionEnv):
    """Reacher on our physics (frame_skip 2, timestep 0.01: dt = 0.02); never terminates.

    Action: 2 joint motor controls in [-1, 1] (gear 200); out-of-range actions are clipped.
    Observation (11, Brax's; Gymnasium v5 drops the z of the last block: 10): cos and sin of the
    two arm angles (4), the target position qpos[2:] (2), the arm joint velocities (2),
    fingertip - target in world coordinates (3).
    Reward = dist + ctrl:
      dist = -||fingertip - target||
      ctrl = -sum(action^2)
    Reset: qpos0 + U(-0.1, 0.1) for the arm, the target at distance U(0, 0.2) from the base in
    a uniform direction, arm qvel U(-5e-3, 5e-3), target qvel 0. Episodes are truncated at
    1000 steps like every env here (Brax's episode length; Gymnasium registers 50 for Reacher).
    """

    asset = "reacher.xml"
    frame_skip = 2

    def __init__(self) -> None:
        super().__init__()
        self.fingertip = self.sys.body_id("fingertip")
        self.target = self.sys.body_id("target")

    def _initial_state(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k1, k2, k3, k4 = jax.random.split(key, 4)
        q = self.sys.qpos0 + uniform_noise(k1, self.sys.nq, 0.1)
        distance = 0.2 * jax.random.uniform(k2)
        angle = 2.0 * jnp.pi * jax.random.uniform(k3)
        q = q.at[2:].set(distance * jnp.stack([jnp.cos(angle), jnp.sin(angle)]))
        qd = uniform_noise(k4, self.sys.nv, 5e-3).at[2:].set(0.0)
        return q, qd

    def _tip_to_target(self, pipeline: physics.State) -> jax.Array:
        return pipeline.xpos[self.fingertip] - pipeline.xpos[self.target]

    def _observation(self, pipeline: physics.State, action: jax.Array) -> jax.Array:
        theta = pipeline.q[:2]
        return jnp.concatenate(
            [
                jnp.cos(theta),
                jnp.sin(theta),
                pipeline.q[2:],
                pipeline.qd[:2],
                self._tip_to_target(pipeline),
            ]
        )

    def _reward(
        self, before: physics.State, after: physics.State, action: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        dist = -jnp.linalg.norm(self._tip_to_target(after))
        ctrl = -jnp.sum(jnp.square(action))
        metrics = {"reward_dist": dist, "reward_ctrl": ctrl}
        return dist + ctrl, jnp.zeros((), bool), metrics
