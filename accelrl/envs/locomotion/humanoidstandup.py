"""HumanoidStandup: the humanoid, lying on its back, rewarded for raising its torso (Brax's)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import physics
from accelrl.envs.locomotion.base import LocomotionEnv, ctrl_cost
from accelrl.envs.locomotion.humanoid import humanoid_observation

TORSO = 1


class HumanoidStandup(LocomotionEnv):
    """HumanoidStandup on our physics (frame_skip 5, timestep 0.003: dt = 0.015); never
    terminates.

    Action: 17 motor controls in [-0.4, 0.4]; out-of-range actions are clipped. Observation
    (276): the Humanoid's (`humanoid_observation`). Every geom collides with the floor; no
    self-collisions (fewer contact pairs than Gymnasium's model, which collides all pairs).
    Reward = linup + 1 - ctrl (Brax's; Gymnasium v5 divides by the physics timestep instead of
    dt, weighs ctrl by 0.1 and subtracts an impact cost):
      linup = torso_z_after / dt
      ctrl = 0.01 * sum(action^2)
    Reset: qpos0 + U(-0.01, 0.01), qvel U(-0.01, 0.01).
    """

    asset = "humanoidstandup.xml"
    frame_skip = 5
    # Lying on the floor it touches with many parts: random-action rollouts had up to 13 of its
    # 29 contact slots active (more than 8 in 4.5% of steps), so it solves up to 16.
    max_contacts = 16

    def __init__(self, ctrl_cost_weight: float = 0.01, reset_noise_scale: float = 1e-2) -> None:
        self.ctrl_cost_weight = ctrl_cost_weight
        self.reset_noise_scale = reset_noise_scale
        super().__init__()

    def _observation(self, pipeline: physics.State, action: jax.Array) -> jax.Array:
        return humanoid_observation(self.sys, pipeline, action)

    def _reward(
        self, before: physics.State, after: physics.State, action: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        linup = after.xpos[TORSO, 2] / self.dt
        ctrl = ctrl_cost(self.ctrl_cost_weight, action)
        metrics = {"reward_linup": linup, "reward_quadctrl": -ctrl}
        return linup + 1.0 - ctrl, jnp.zeros((), bool), metrics
