"""Per-env-slot host state of the bridge server: ownership, frame stacks and the pending step.

Every env of every connected actor owns one slot (a row of these numpy arrays) for the life of
its stream. The pending step is what the server decided for the slot's last observation (the
observation itself, the action, the acting recurrent state and policy version, and the acting
inputs/outputs the learner needs); it becomes a transition when the env's next message brings
the reward and the next observation.

The pending steps are one numpy structured array (a `Records` layout: one field per value,
the recurrent state's leaves included), with room for what the reply adds, so that a message's
transitions are gathered from it with ONE fancy index and written to the sequence rings with
one more (`Records.take` and `put`, moving records as raw bytes), instead of one gather and one
scatter per field.
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import jax
import numpy as np

Fields = dict[str, tuple[tuple[int, ...], Any]]
"""Named per-env arrays: name -> (shape of one env's value, dtype)."""


class Records:
    """A structured dtype holding named fields and a recurrent-state pytree per record."""

    def __init__(self, fields: Fields, carry_template: Any) -> None:
        """`carry_template`: the recurrent state of one env ([1, ...] leaves)."""
        leaves, self.carry_treedef = jax.tree.flatten(carry_template)
        self.field_names = tuple(fields)
        self.carry_names = tuple(f"carry/{i}" for i in range(len(leaves)))
        carry_fields = {
            name: (tuple(x.shape[1:]), x.dtype)
            for name, x in zip(self.carry_names, leaves, strict=True)
        }
        spec = {**fields, **carry_fields}
        self.dtype = np.dtype([(name, np.dtype(t), shape) for name, (shape, t) in spec.items()])
        self._bytes = np.dtype((np.void, self.dtype.itemsize))

    def zeros(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape, self.dtype)

    # numpy gathers and scatters structured records field by field; viewed as opaque bytes
    # they move whole, 4-5x faster (a message's records make several such moves)
    def take(self, table: np.ndarray, index: Any) -> np.ndarray:
        """`table[index]`: a copy of whole records."""
        return table.view(self._bytes)[index].view(self.dtype)

    def put(self, table: np.ndarray, index: Any, records: np.ndarray) -> None:
        """`table[index] = records`, whole records."""
        table.view(self._bytes)[index] = records.view(self._bytes)

    def fields(self, records: np.ndarray) -> dict[str, np.ndarray]:
        """Each named field of `records` (views)."""
        return {name: records[name] for name in self.field_names}

    def carry(self, records: np.ndarray) -> Any:
        """The recurrent-state pytree of `records` (views)."""
        return jax.tree.unflatten(self.carry_treedef, [records[n] for n in self.carry_names])

    def set_carry(self, records: np.ndarray, carry: Any) -> None:
        if not self.carry_names:  # a feed-forward agent
            return
        for name, leaf in zip(self.carry_names, jax.tree.leaves(carry), strict=True):
            records[name] = leaf


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
        outcome: Fields | None = None,
    ) -> None:
        """`carry_template`: the recurrent state of one env ([1, ...] leaves); `extras`: acting
        outputs kept with each step besides the action (e.g. the behaviour log-probability);
        `outcome`: fields the env's reply adds to a pending step (left zero here)."""
        c = capacity
        self.capacity, self.frame_stack = c, frame_stack
        self.owner = np.full(c, -1, np.int64)
        self.fresh = np.ones(c, bool)  # next observation starts an episode (slot just given)
        self.has_pending = np.zeros(c, bool)
        fields = {
            "observation": (tuple(obs_shape), obs_dtype),
            "action": (tuple(action_shape), action_dtype),
            "is_first": ((), bool),
            "version": ((), np.int64),
            "prev_action": (tuple(action_shape), action_dtype),
            "prev_reward": ((), np.float32),
            **(extras or {}),
            **(outcome or {}),
        }
        self.records = Records(fields, carry_template)
        self.pending = self.records.zeros((c,))
        self.extra_names = tuple(extras or {})
        # views of two fields, for the frame stacks and for shapes and dtypes
        self.pending_obs = self.pending["observation"]
        self.pending_action = self.pending["action"]
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
        width = frames.shape[-1]
        frame_bytes = width * frames.dtype.itemsize
        if sys.byteorder == "little" and frame_bytes in _WORDS and k * frame_bytes in _WORDS:
            return self._stack_words(slots, frames, starts, frame_bytes)
        stacked = np.empty((len(slots), *frames.shape[1:-1], width * k), frames.dtype)
        stacked[..., :-width] = self.pending_obs[slots, ..., width:]
        stacked[..., -width:] = frames
        if starts.any():
            fresh = np.flatnonzero(starts)
            stacked[fresh] = np.concatenate([frames[fresh]] * k, axis=-1)
        return stacked

    def _stack_words(
        self, slots: np.ndarray, frames: np.ndarray, starts: np.ndarray, frame_bytes: int
    ) -> np.ndarray:
        """`stack` for a stack of at most 8 bytes per pixel (Atari: 4 uint8 frames): each
        pixel's stack is one little-endian integer, oldest frame in the low bytes, so rolling
        it is a shift and an OR over whole words (numpy copies along a last axis of 4 bytes
        element by element, ~40x slower)."""
        k, bits = self.frame_stack, 8 * frame_bytes
        word = _WORDS[k * frame_bytes]
        prev = self.pending_obs[slots].view(word)[..., 0]
        new = np.ascontiguousarray(frames).view(_WORDS[frame_bytes])[..., 0].astype(word)
        stacked = (prev >> bits) | (new << bits * (k - 1))
        if starts.any():
            repeat = sum(1 << bits * i for i in range(k))  # the frame in every position
            stacked[starts] = new[starts] * repeat
        return stacked[..., None].view(frames.dtype)


_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
