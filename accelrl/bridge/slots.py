"""Per-env-slot host state of the bridge server: ownership, frame stacks and the pending step.

Every env of every connected actor owns one slot (a row of these numpy arrays) for the life of
its stream. The pending step is what the server decided for the slot's last observation (the
observation itself, the action, the acting recurrent state and policy version, and the acting
inputs/outputs the learner needs); it becomes a transition when the env's next message brings
the reward and the next observation.
"""

from __future__ import annotations

import itertools
from typing import Any

import jax
import numpy as np

Fields = dict[str, tuple[tuple[int, ...], Any]]
"""Named per-env arrays: name -> (shape of one env's value, dtype)."""


class SlotTable:
    """Ownership, frame stacks, episode statistics and the pending step of every env slot."""

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        obs_dtype: Any,
        frame_stack: int,
        action_shape: tuple[int, ...],
        action_dtype: Any,
        carry_template: Any,
        extras: Fields | None = None,
    ) -> None:
        """`carry_template`: the recurrent state of one env ([1, ...] leaves); `extras`: acting
        outputs kept with each step besides the action (e.g. the behaviour log-probability)."""
        c = capacity
        self.capacity, self.frame_stack = c, frame_stack
        self.owner = np.full(c, -1, np.int64)
        self.fresh = np.ones(c, bool)  # next observation starts an episode (slot just given)
        self.has_pending = np.zeros(c, bool)
        self.pending_obs = np.zeros((c, *obs_shape), obs_dtype)
        self.pending_action = np.zeros((c, *action_shape), action_dtype)
        self.pending_first = np.zeros(c, bool)
        self.pending_version = np.zeros(c, np.int64)
        self.pending_prev_action = np.zeros((c, *action_shape), action_dtype)
        self.pending_prev_reward = np.zeros(c, np.float32)
        self.pending_carry = jax.tree.map(
            lambda x: np.zeros((c, *x.shape[1:]), x.dtype), carry_template
        )
        self.pending_extras = {
            name: np.zeros((c, *shape), dtype) for name, (shape, dtype) in (extras or {}).items()
        }
        self.episode_return = np.zeros(c, np.float64)
        self.episode_length = np.zeros(c, np.int64)
        self._next_owner = itertools.count()

    def allocate(self, count: int) -> tuple[int, np.ndarray] | None:
        """`count` free slots for a new stream: `(owner id, slots)`, or None when full."""
        free = np.flatnonzero(self.owner < 0)
        if free.size < count:
            return None
        slots = free[:count]
        owner = next(self._next_owner)
        self.owner[slots] = owner
        self.fresh[slots] = True
        self.has_pending[slots] = False
        self.episode_return[slots] = 0
        self.episode_length[slots] = 0
        return owner, slots.astype(np.int32)

    def release(self, slots: np.ndarray) -> None:
        self.owner[slots] = -1
        self.has_pending[slots] = False

    def stack(self, slots: np.ndarray, frames: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Stacked observations after `frames` (fresh stacks where `starts`)."""
        k = self.frame_stack
        if k == 1:
            return frames
        if frames.ndim == 3:  # [n, H, W] -> new trailing axis
            frames = frames[..., None]
        prev = self.pending_obs[slots]
        if prev.ndim == frames.ndim:
            rolled = np.concatenate([prev[..., frames.shape[-1] :], frames], axis=-1)
        else:
            rolled = np.concatenate([prev[..., 1:], frames], axis=-1)
        fresh = np.concatenate([frames] * k, axis=-1)
        return np.where(starts.reshape(-1, *[1] * (frames.ndim - 1)), fresh, rolled)
