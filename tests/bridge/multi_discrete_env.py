"""A gymnasium env with a MultiDiscrete action space, registered on import (gymnasium.make's
"module:EnvId" form imports it, in the actor and server processes alike).

Each step shows a target pair as one-hot parts; the reward is 1 per component chosen right.
The components' ranges start at 1 and -2, so an action reaching the env unshifted (the agent's
0..n-1) is out of range and raises.
"""

import gymnasium
import numpy as np
from gymnasium import spaces

NVEC = (3, 4)
START = (1, -2)
EPISODE_LENGTH = 10


class MatchTargets(gymnasium.Env):
    """Reward 1 per action component equal to the shown target's; 10 steps an episode."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0.0, 1.0, (sum(NVEC),), np.float32)
        self.action_space = spaces.MultiDiscrete(NVEC, start=START)
        self._target = np.zeros(2, np.int64)
        self._t = 0

    def _observe(self) -> np.ndarray:
        self._target = self.np_random.integers(0, NVEC) + START
        obs = np.zeros(sum(NVEC), np.float32)
        obs[self._target[0] - START[0]] = 1.0
        obs[NVEC[0] + self._target[1] - START[1]] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._observe(), {}

    def step(self, action):
        action = np.asarray(action)
        if action.shape != (2,) or not self.action_space.contains(action.astype(np.int64)):
            raise ValueError(f"action {action!r} is outside {self.action_space}")
        reward = float(np.sum(action == self._target))
        self._t += 1
        return self._observe(), reward, False, self._t >= EPISODE_LENGTH, {}


gymnasium.register("MatchTargets-v0", entry_point=MatchTargets)
