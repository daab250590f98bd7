"""Hopper: a planar one-legged robot rewarded for hopping in +x (Brax's Hopper = Gymnasium v5)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

import physics
from accelrl.envs.locomotion.base import LocomotionEnv, ctrl_cost, finite

TORSO = 1


class Hopper(LocomotionEnv):
    """Hopper on our physics (frame_skip 4, timestep 0.002: dt = 0.008).

    Action: 3 thigh/leg/foot motor controls in [-1, 1] (gear 200); out-of-range actions are
    clipped. Observation (11): qpos[1:] (torso z, torso pitch, 3 joint angles) and
    clip(qvel, -10, 10) (6).
    Reward = forward + healthy - ctrl:
      forward = (x_torso_after - x_torso_before) / dt
      healthy = 1 on every step (Brax, terminate_when_unhealthy); else 1 while healthy
      ctrl = 1e-3 * sum(action^2)
    Healthy: every entry of (qpos[2:], qvel) in (-100, 100), torso z > 0.7, pitch qpos[2] in
    (-0.2, 0.2), and the state finite; unhealthy terminates.
    Reset: qpos0 + U(-5e-3, 5e-3), qvel U(-5e-3, 5e-3).
    """

    asset = "hopper.xml"
    frame_skip = 4

    def __init__(
        self,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 1e-3,
        healthy_reward: float = 1.0,
        terminate_when_unhealthy: bool = True,
        healthy_state_range: tuple[float, float] = (-100.0, 100.0),
        healthy_z_range: tuple[float, float] = (0.7, math.inf),
        healthy_angle_range: tuple[float, float] = (-0.2, 0.2),
        reset_noise_scale: float = 5e-3,
    ) -> None:
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        self.healthy_reward = healthy_reward
        self.terminate_when_unhealthy = terminate_when_unhealthy
        self.healthy_state_range = healthy_state_range
        self.healthy_z_range = healthy_z_range
        self.healthy_angle_range = healthy_angle_range
        self.reset_noise_scale = reset_noise_scale
        super().__init__()

    def _observation(self, pipeline: physics.State, action: jax.Array) -> jax.Array:
        position = pipeline.q.at[1].set(pipeline.xpos[TORSO, 2])[1:]
        return jnp.concatenate([position, jnp.clip(pipeline.qd, -10.0, 10.0)])

    def is_healthy(self, pipeline: physics.State) -> jax.Array:
        """The posture and state bounds of this env hold (and the state is finite)."""
        z, angle = pipeline.xpos[TORSO, 2], pipeline.q[2]
        state = jnp.concatenate([pipeline.q[2:], pipeline.qd])
        lo, hi = self.healthy_state_range
        z_lo, z_hi = self.healthy_z_range
        a_lo, a_hi = self.healthy_angle_range
        return (
            jnp.all((state > lo) & (state < hi))
            & (z > z_lo)
            & (z < z_hi)
            & (angle > a_lo)
            & (angle < a_hi)
            & finite(pipeline.q, pipeline.qd)
        )

    def _reward(
        self, before: physics.State, after: physics.State, action: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        x_velocity = (after.xpos[TORSO, 0] - before.xpos[TORSO, 0]) / self.dt
        forward = self.forward_reward_weight * x_velocity
        healthy = self.is_healthy(after)
        survive = jnp.asarray(self.healthy_reward, jnp.float32)
        if not self.terminate_when_unhealthy:
            survive = survive * healthy
        ctrl = ctrl_cost(self.ctrl_cost_weight, action)
        terminated = ~healthy if self.terminate_when_unhealthy else jnp.zeros((), bool)
        metrics = {
            "reward_forward": forward,
            "reward_ctrl": -ctrl,
            "reward_healthy": survive,
            "x_position": after.xpos[TORSO, 0],
            "x_velocity": x_velocity,
        }
        return forward + survive - ctrl, terminated, metrics
