"""InvertedPendulum: keep a pole upright on a cart (Brax's = Gymnasium v5 but the last reward)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import physics
from accelrl.envs.locomotion.base import LocomotionEnv, uniform_noise


class InvertedPendulum(LocomotionEnv):
    """InvertedPendulum on our physics (frame_skip 2, timestep 0.02: dt = 0.04).

    Action: 1 cart force control in [-3, 3] (gear 100); out-of-range actions are clipped.
    Observation (4): qpos (cart x, pole angle) and qvel.
    Reward: survive = 1 on every step, the terminating one included (Brax; Gymnasium v5 gives
    0 there). Terminates when |pole angle| > 0.2 (or the state is not finite).
    Reset: qpos0 + U(-0.01, 0.01), qvel U(-0.01, 0.01).
    """

    asset = "inverted_pendulum.xml"
    frame_skip = 2

    def _initial_state(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k1, k2 = jax.random.split(key)
        q = self.sys.qpos0 + uniform_noise(k1, self.sys.nq, 0.01)
        return q, uniform_noise(k2, self.sys.nv, 0.01)

    def _observation(self, pipeline: physics.State, action: jax.Array) -> jax.Array:
        return jnp.concatenate([pipeline.q, pipeline.qd])

    def _reward(
        self, before: physics.State, after: physics.State, action: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        survive = jnp.ones((), jnp.float32)
        return survive, jnp.abs(after.q[1]) > 0.2, {"reward_survive": survive}
