"""Walker2d: a planar biped rewarded for walking in +x (Brax's Walker2d = Gymnasium v5)."""

from __future__ import annotations

import math

from accelrl.envs.locomotion.hopper import Hopper


class Walker2d(Hopper):
    """Walker2d on our physics (frame_skip 4, timestep 0.002: dt = 0.008).

    The Hopper's task on a biped. Action: 6 thigh/leg/foot motor controls in [-1, 1] (gear
    100); out-of-range actions are clipped. Observation (17): qpos[1:] (torso z, torso pitch, 6
    joint angles) and clip(qvel, -10, 10) (9).
    Reward = forward + healthy - ctrl:
      forward = (x_torso_after - x_torso_before) / dt
      healthy = 1 on every step (Brax, terminate_when_unhealthy); else 1 while healthy
      ctrl = 1e-3 * sum(action^2)
    Healthy: torso z in (0.8, 2.0), pitch qpos[2] in (-1, 1), state finite (no bound on the
    other state entries, unlike the Hopper); unhealthy terminates.
    Reset: qpos0 + U(-5e-3, 5e-3), qvel U(-5e-3, 5e-3).
    """

    asset = "walker2d.xml"
    frame_skip = 4

    def __init__(
        self,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 1e-3,
        healthy_reward: float = 1.0,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (0.8, 2.0),
        healthy_angle_range: tuple[float, float] = (-1.0, 1.0),
        reset_noise_scale: float = 5e-3,
    ) -> None:
        super().__init__(
            forward_reward_weight=forward_reward_weight,
            ctrl_cost_weight=ctrl_cost_weight,
            healthy_reward=healthy_reward,
            terminate_when_unhealthy=terminate_when_unhealthy,
            healthy_state_range=(-math.inf, math.inf),
            healthy_z_range=healthy_z_range,
            healthy_angle_range=healthy_angle_range,
            reset_noise_scale=reset_noise_scale,
        )
