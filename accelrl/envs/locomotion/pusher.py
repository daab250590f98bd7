"""Pusher: a 7-joint arm pushes a puck to a goal on a table (Gymnasium's Pusher-v5)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import physics
from accelrl.envs.locomotion.base import LocomotionEnv, ctrl_cost, uniform_noise

# Reset: the puck's two slides (qpos[-4], the y slide, then qpos[-3], the x slide) are drawn
# uniformly from these ranges until it is more than PUCK_GOAL_MIN_DISTANCE from the goal, which
# stays at the origin of its slides (Gymnasium's draw, in the model's joint order).
PUCK_SLIDE_Y, PUCK_SLIDE_X = (-0.3, 0.0), (-0.2, 0.2)
PUCK_GOAL_MIN_DISTANCE = 0.17
# Gymnasium redraws until a draw passes; here a fixed number of candidates is drawn at once and
# the first that passes is taken (each fails with probability ~0.38, all 16 with ~2e-7; then
# the last is used as it is).
PUCK_CANDIDATES = 16


class Pusher(LocomotionEnv):
    """Pusher on our physics (frame_skip 5, timestep 0.01: dt = 0.05); never terminates.

    Action: 7 joint motor controls in [-2, 2]; out-of-range actions are clipped.
    Observation (23, Gymnasium's): the arm's qpos (7) and qvel (7), then the centres of mass
    of the fingertips (`tips_arm`), the puck and the goal (3 each).
    Reward = reward_dist + reward_ctrl + reward_near, each with its weight applied:
      reward_dist = -1.0 * ||puck - goal||
      reward_ctrl = -0.1 * sum(action^2)
      reward_near = -0.5 * ||fingertips - puck||
    Reset: the arm at qpos0 and the goal at the origin of its slides; the puck's y slide
    uniform in [-0.3, 0] and its x slide in [-0.2, 0.2], more than 0.17 from the goal; arm
    qvel U(-5e-3, 5e-3), puck and goal at rest. There is no gravity; the hand and the
    puck touch without friction. Episodes are truncated at 1000 steps like every env here
    (Gymnasium registers 100: `configs/pusher_vtrace` uses that).
    """

    asset = "pusher.xml"
    frame_skip = 5

    def __init__(self) -> None:
        super().__init__()
        self.tips = self.sys.body_id("tips_arm")
        self.puck = self.sys.body_id("object")
        self.goal = self.sys.body_id("goal")

    def _initial_state(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k_y, k_x, k_qd = jax.random.split(key, 3)
        candidates = jnp.stack(
            [
                jax.random.uniform(
                    k_y, (PUCK_CANDIDATES,), minval=PUCK_SLIDE_Y[0], maxval=PUCK_SLIDE_Y[1]
                ),
                jax.random.uniform(
                    k_x, (PUCK_CANDIDATES,), minval=PUCK_SLIDE_X[0], maxval=PUCK_SLIDE_X[1]
                ),
            ],
            axis=-1,
        )
        far = jnp.linalg.norm(candidates, axis=-1) > PUCK_GOAL_MIN_DISTANCE
        first = jnp.where(jnp.any(far), jnp.argmax(far), PUCK_CANDIDATES - 1)
        q = self.sys.qpos0.at[-4:-2].set(candidates[first]).at[-2:].set(0.0)
        qd = uniform_noise(k_qd, self.sys.nv, 5e-3).at[-4:].set(0.0)
        return q, qd

    def _observation(self, pipeline: physics.State, action: jax.Array) -> jax.Array:
        com = pipeline.xipos
        return jnp.concatenate(
            [pipeline.q[:7], pipeline.qd[:7], com[self.tips], com[self.puck], com[self.goal]]
        )

    def _reward(
        self, before: physics.State, after: physics.State, action: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        com = after.xipos
        metrics = {
            "reward_dist": -1.0 * jnp.linalg.norm(com[self.puck] - com[self.goal]),
            "reward_ctrl": -ctrl_cost(0.1, action),
            "reward_near": -0.5 * jnp.linalg.norm(com[self.tips] - com[self.puck]),
        }
        return sum(metrics.values()), jnp.zeros((), bool), metrics
