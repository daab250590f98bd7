"""Stopping a run early once its training episodes reach a target return.

Like gymnasium's `reward_threshold` (CartPole-v1: 475 averaged over 100 consecutive episodes)
and Stable-Baselines3's `StopTrainingOnRewardThreshold`: `TrainConfig.target_return` set, the
fused loop and the bridge's learner stop (saving a checkpoint, as at the end of the budget) at
the first log point where the mean return of the latest `target_episodes` finished training
episodes reaches it. The returns are those of the acting policy (exploration included).
"""

from __future__ import annotations

from collections import deque


class RecentReturns:
    """Mean return of the latest `episodes` finished episodes, from per-window sums.

    The fused loop reports a sum and a count per chunk, so the mean is over the latest chunks
    that together hold at least `episodes` episodes (whole chunks); the bridge adds its episodes
    one by one, which makes it exact.
    """

    def __init__(self, episodes: int) -> None:
        if episodes < 1:
            raise ValueError(f"episodes must be at least 1, got {episodes}")
        self.episodes = episodes
        self._windows: deque[tuple[float, int]] = deque()
        self._sum, self._count = 0.0, 0

    def add(self, return_sum: float, count: int) -> None:
        """Adds a window of `count` finished episodes whose returns sum to `return_sum`."""
        if count <= 0:
            return
        self._windows.append((return_sum, count))
        self._sum, self._count = self._sum + return_sum, self._count + count
        while self._count - self._windows[0][1] >= self.episodes:  # the rest still suffice
            old_sum, old_count = self._windows.popleft()
            self._sum, self._count = self._sum - old_sum, self._count - old_count

    @property
    def count(self) -> int:
        """Episodes the mean is over (at least `episodes` once that many have finished)."""
        return self._count

    @property
    def mean(self) -> float | None:
        """The mean return, or None until `episodes` episodes have finished."""
        return self._sum / self._count if self._count >= self.episodes else None

    def reached(self, target: float | None) -> bool:
        """Whether `target` is set and the mean (once defined) is at least it."""
        mean = self.mean
        return target is not None and mean is not None and mean >= target

    def describe(self, target: float) -> str:
        """The progress line that says why the run stops."""
        return (
            f"target return {target:g} reached: mean {self.mean:.2f} over the latest "
            f"{self.count} episodes; stopping"
        )
