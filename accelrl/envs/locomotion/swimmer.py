"""Swimmer: a three-link snake in a viscous medium, rewarded for speed in +x (Gymnasium v5)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import physics
from accelrl.envs.locomotion.base import LocomotionEnv, ctrl_cost


class Swimmer(LocomotionEnv):
    """Swimmer on our physics (frame_skip 4, timestep 0.01: dt = 0.04); never terminates.

    The medium (density 4000, viscosity 0.1) pushes back through MuJoCo's inertia-box fluid
    model, which is what makes undulating swim forward. Gymnasium simulates this model with
    RK4; ours integrates with Euler (as all our models), so returns are close, not identical.

    Action: 2 joint motor controls in [-1, 1]; out-of-range actions are clipped.
    Observation (8): qpos[2:] (head yaw, 2 joint angles) and qvel (5).
    Reward = forward - ctrl:
      forward = forward_reward_weight * (x_head_after - x_head_before) / dt
      ctrl = 1e-4 * sum(action^2)
    with x_head the position of the head's slide joints (qpos[0]).
    Reset: qpos0 + U(-0.1, 0.1), qvel U(-0.1, 0.1).
    """

    asset = "swimmer.xml"
    frame_skip = 4

    def __init__(
        self,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 1e-4,
        reset_noise_scale: float = 0.1,
    ) -> None:
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        self.reset_noise_scale = reset_noise_scale
        super().__init__()

    def _observation(self, pipeline: physics.State, action: jax.Array) -> jax.Array:
        return jnp.concatenate([pipeline.q[2:], pipeline.qd])

    def _reward(
        self, before: physics.State, after: physics.State, action: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        xy = after.q[:2]
        velocity = (xy - before.q[:2]) / self.dt
        forward = self.forward_reward_weight * velocity[0]
        ctrl = ctrl_cost(self.ctrl_cost_weight, action)
        metrics = {
            "x_position": xy[0],
            "y_position": xy[1],
            "distance_from_origin": jnp.linalg.norm(xy),
            "x_velocity": velocity[0],
            "y_velocity": velocity[1],
            "reward_forward": forward,
            "reward_ctrl": -ctrl,
        }
        return forward - ctrl, jnp.zeros((), bool), metrics
