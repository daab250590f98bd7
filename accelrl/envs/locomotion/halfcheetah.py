"""HalfCheetah: a planar runner rewarded for speed in +x (Gymnasium v5 = Brax)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import physics
from accelrl.envs.locomotion.base import LocomotionEnv, ctrl_cost, uniform_noise

TORSO = 1


class HalfCheetah(LocomotionEnv):
    """HalfCheetah on our physics (frame_skip 5, timestep 0.01: dt = 0.05); never terminates.

    Action: 6 thigh/shin/foot motor controls in [-1, 1]; out-of-range actions are clipped.
    Observation (17): qpos[1:] (root z, root pitch, 6 joint angles) and qvel (9).
    Reward = run - ctrl:
      run = (x_torso_after - x_torso_before) / dt
      ctrl = 0.1 * sum(action^2)
    Reset: qpos0 + U(-0.1, 0.1), qvel 0.1 * N(0, 1).
    """

    asset = "halfcheetah.xml"
    frame_skip = 5

    def __init__(
        self,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 0.1,
        reset_noise_scale: float = 0.1,
    ) -> None:
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        self.reset_noise_scale = reset_noise_scale
        super().__init__()

    def _initial_state(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k1, k2 = jax.random.split(key)
        q = self.sys.qpos0 + uniform_noise(k1, self.sys.nq, self.reset_noise_scale)
        qd = self.reset_noise_scale * jax.random.normal(k2, (self.sys.nv,), jnp.float32)
        return q, qd

    def _observation(self, pipeline: physics.State, action: jax.Array) -> jax.Array:
        return jnp.concatenate([pipeline.q[1:], pipeline.qd])

    def _reward(
        self, before: physics.State, after: physics.State, action: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        x_velocity = (after.xpos[TORSO, 0] - before.xpos[TORSO, 0]) / self.dt
        run = self.forward_reward_weight * x_velocity
        ctrl = ctrl_cost(self.ctrl_cost_weight, action)
        metrics = {
            "x_position": after.xpos[TORSO, 0],
            "x_velocity": x_velocity,
            "reward_run": run,
            "reward_ctrl": -ctrl,
        }
        return run - ctrl, jnp.zeros((), bool), metrics
