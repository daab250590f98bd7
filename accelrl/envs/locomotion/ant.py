"""Ant: a four-legged robot rewarded for running in +x (Brax's Ant; Gymnasium's Ant-v5 option)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import physics
from accelrl.envs.locomotion.base import LocomotionEnv, ctrl_cost, finite, uniform_noise

TORSO = 1


class Ant(LocomotionEnv):
    """Ant on our physics (frame_skip 5, timestep 0.01: dt = 0.05).

    Action: 8 hip/ankle motor controls in [-1, 1] (gear 150); out-of-range actions are clipped.
    Observation (27): qpos[2:] (torso z, quaternion, 8 joint angles) and qvel (14). With
    `use_contact_forces=True` (Gymnasium v5's default; Brax's default is False and Brax has no
    implementation) it also holds clip(cfrc_ext[1:], -1, 1) flattened (13 bodies x 6 = 78): 105.
    Reward = forward + healthy - ctrl - contact:
      forward = (x_torso_after - x_torso_before) / dt
      healthy = 1 on every step (Brax, terminate_when_unhealthy); else 1 while healthy
      ctrl = 0.5 * sum(action^2)
      contact = 5e-4 * sum(clip(cfrc_ext, -1, 1)^2), only with use_contact_forces (else 0)
    Healthy: torso z in [0.2, 1.0] and the state finite; unhealthy terminates.
    Reset: qpos0 + U(-0.1, 0.1) on every qpos entry, qvel 0.1 * N(0, 1).
    """

    asset = "ant.xml"
    frame_skip = 5

    def __init__(
        self,
        use_contact_forces: bool = False,
        ctrl_cost_weight: float = 0.5,
        contact_cost_weight: float = 5e-4,
        healthy_reward: float = 1.0,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (0.2, 1.0),
        contact_force_range: tuple[float, float] = (-1.0, 1.0),
        reset_noise_scale: float = 0.1,
    ) -> None:
        self.use_contact_forces = use_contact_forces
        self.ctrl_cost_weight = ctrl_cost_weight
        self.contact_cost_weight = contact_cost_weight
        self.healthy_reward = healthy_reward
        self.terminate_when_unhealthy = terminate_when_unhealthy
        self.healthy_z_range = healthy_z_range
        self.contact_force_range = contact_force_range
        self.reset_noise_scale = reset_noise_scale
        super().__init__()

    def _initial_state(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k1, k2 = jax.random.split(key)
        q = self.sys.qpos0 + uniform_noise(k1, self.sys.nq, self.reset_noise_scale)
        qd = self.reset_noise_scale * jax.random.normal(k2, (self.sys.nv,), jnp.float32)
        return q, qd

    def _contact_forces(self, pipeline: physics.State) -> jax.Array:
        low, high = self.contact_force_range
        return jnp.clip(physics.external_contact_forces(self.sys, pipeline)[1:], low, high)

    def _observation(self, pipeline: physics.State, action: jax.Array) -> jax.Array:
        parts = [pipeline.q[2:], pipeline.qd]
        if self.use_contact_forces:
            parts.append(self._contact_forces(pipeline).ravel())
        return jnp.concatenate(parts)

    def _reward(
        self, before: physics.State, after: physics.State, action: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        velocity = (after.xpos[TORSO] - before.xpos[TORSO]) / self.dt
        forward = velocity[0]
        z = after.xpos[TORSO, 2]
        low, high = self.healthy_z_range
        healthy = (z >= low) & (z <= high) & finite(after.q, after.qd)
        survive = jnp.asarray(self.healthy_reward, jnp.float32)
        if not self.terminate_when_unhealthy:
            survive = survive * healthy
        ctrl = ctrl_cost(self.ctrl_cost_weight, action)
        contact = jnp.zeros((), jnp.float32)
        if self.use_contact_forces:
            contact = self.contact_cost_weight * jnp.sum(jnp.square(self._contact_forces(after)))
        reward = forward + survive - ctrl - contact
        terminated = ~healthy if self.terminate_when_unhealthy else jnp.zeros((), bool)
        pos = after.xpos[TORSO]
        metrics = {
            "reward_forward": forward,
            "reward_survive": survive,
            "reward_ctrl": -ctrl,
            "reward_contact": -contact,
            "x_position": pos[0],
            "y_position": pos[1],
            "distance_from_origin": jnp.linalg.norm(pos),
            "x_velocity": velocity[0],
            "y_velocity": velocity[1],
            "forward_reward": forward,
        }
        return reward, terminated, metrics
