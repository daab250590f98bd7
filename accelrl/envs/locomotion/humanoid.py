"""Humanoid: a 3D biped rewarded for walking in +x without falling (Brax's Humanoid)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import physics
from accelrl.envs.locomotion.base import LocomotionEnv, ctrl_cost, finite
from physics import dynamics

TORSO = 1


def humanoid_observation(
    sys: physics.System, pipeline: physics.State, action: jax.Array
) -> jax.Array:
    """Brax's humanoid observation (276 for 13 bodies, nq 24, nv 23), from MuJoCo quantities.

    qpos[2:] (22), qvel (23), per moving body its world-frame rotational inertia about its
    centre of mass (9) and mass (1) (130), its mass-weighted centre-of-mass velocity
    m_b v_b / sum(m) (3) and angular velocity (3) (78), and the actuator forces in joint
    space, gear * ctrl (23).
    """
    rot = pipeline.xmat[1:]
    inertia = jnp.einsum("bij,bjk,blk->bil", rot, sys.body_inertia[1:], rot)
    mass = sys.body_mass[1:]
    angular, linear = physics.body_velocity(sys, pipeline)
    com_inertia = jnp.concatenate([inertia.reshape(-1, 9), mass[:, None]], axis=1)
    com_velocity = jnp.concatenate(
        [mass[:, None] * linear[1:] / jnp.sum(mass), angular[1:]], axis=1
    )
    return jnp.concatenate(
        [
            pipeline.q[2:],
            pipeline.qd,
            com_inertia.ravel(),
            com_velocity.ravel(),
            dynamics.actuator_force(sys, pipeline.kin, pipeline.q, pipeline.qd, action),
        ]
    )


class Humanoid(LocomotionEnv):
    """Humanoid on our physics (frame_skip 5, timestep 0.003: dt = 0.015).

    Action: 17 motor controls in [-0.4, 0.4] (the actuators' ctrlrange, which Brax reaches by
    rescaling [-1, 1]); out-of-range actions are clipped. Observation (276): see
    `humanoid_observation` (Brax's; Gymnasium v5 uses MuJoCo's cinert/cvel and adds
    cfrc_ext instead). Only the feet collide with the floor (Brax's model).
    Reward = forward + healthy - ctrl:
      forward = 1.25 * (com_x_after - com_x_before) / dt  (com: all bodies, mass-weighted)
      healthy = 5 on every step (Brax, terminate_when_unhealthy); else 5 while healthy
      ctrl = 0.1 * sum(action^2)
    Healthy: torso z in [1.0, 2.0] and the state finite; unhealthy terminates.
    Reset: qpos0 + U(-0.01, 0.01), qvel U(-0.01, 0.01).
    """

    asset = "humanoid.xml"
    frame_skip = 5

    def __init__(
        self,
        forward_reward_weight: float = 1.25,
        ctrl_cost_weight: float = 0.1,
        healthy_reward: float = 5.0,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (1.0, 2.0),
        reset_noise_scale: float = 1e-2,
    ) -> None:
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        self.healthy_reward = healthy_reward
        self.terminate_when_unhealthy = terminate_when_unhealthy
        self.healthy_z_range = healthy_z_range
        self.reset_noise_scale = reset_noise_scale
        super().__init__()

    def _observation(self, pipeline: physics.State, action: jax.Array) -> jax.Array:
        return humanoid_observation(self.sys, pipeline, action)

    def _reward(
        self, before: physics.State, after: physics.State, action: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        com_after = physics.center_of_mass(self.sys, after)
        velocity = (com_after - physics.center_of_mass(self.sys, before)) / self.dt
        forward = self.forward_reward_weight * velocity[0]
        z = after.xpos[TORSO, 2]
        low, high = self.healthy_z_range
        healthy = (z >= low) & (z <= high) & finite(after.q, after.qd)
        alive = jnp.asarray(self.healthy_reward, jnp.float32)
        if not self.terminate_when_unhealthy:
            alive = alive * healthy
        ctrl = ctrl_cost(self.ctrl_cost_weight, action)
        terminated = ~healthy if self.terminate_when_unhealthy else jnp.zeros((), bool)
        metrics = {
            "forward_reward": forward,
            "reward_linvel": forward,
            "reward_quadctrl": -ctrl,
            "reward_alive": alive,
            "x_position": com_after[0],
            "y_position": com_after[1],
            "distance_from_origin": jnp.linalg.norm(com_after),
            "x_velocity": velocity[0],
            "y_velocity": velocity[1],
        }
        return forward + alive - ctrl, terminated, metrics
