"""Google Research Football adapter for bridge actors. JAX-free.

`make grf` builds gfootball 2.10.2 from source (Debian's SDL2 and boost development packages,
gym==0.25.2). The env gives the SMM ("super mini map") observation of one frame, 72x96x4 uint8,
and 19 actions; the server stacks 4 frames into 72x96x16 (`bridge.frame_stack=4`), as SEED RL
does. Rewards: `scoring,checkpoints`.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class GRFEnv:
    """gfootball's env behind the gymnasium API (5-tuple step, reset(seed))."""

    def __init__(self, scenario: str) -> None:
        try:
            import gfootball.env as football_env
        except ImportError as error:  # pragma: no cover - depends on the machine
            raise ImportError(
                "gfootball is not installed: run `make grf` (builds gfootball 2.10.2)"
            ) from error
        self._env = football_env.create_environment(
            env_name=scenario,
            representation="extracted",
            stacked=False,
            rewards="scoring,checkpoints",
            render=False,
        )
        self.observation_space = self._env.observation_space
        self.action_space = self._env.action_space

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:
        if seed is not None and hasattr(self._env, "seed"):
            self._env.seed(seed)
        return np.asarray(self._env.reset(), np.uint8), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, done, info = self._env.step(int(action))
        # gfootball ends scenarios on a goal, a lost ball or its step limit; it does not say
        # which, so every end is reported as termination.
        return np.asarray(obs, np.uint8), float(reward), bool(done), False, info

    def close(self) -> None:
        self._env.close()


def make_grf_env(scenario: str) -> GRFEnv:
    return GRFEnv(scenario)
