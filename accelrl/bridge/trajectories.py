"""Trajectory assembly on the bridge server: actor messages -> transitions -> sequences.

`TrajectoryBuilder.observe` turns an actor's `Steps` (rewards and next observations of the
actions the server chose last time) into transitions of the slots' pending steps, and
`record_actions` makes the newly chosen actions pending. `SequenceAssembler` keeps each slot's
last `length` transitions in a ring and emits them as one sequence every `period` transitions
once `length` have accumulated: V-trace uses length = period = unroll length (disjoint
unrolls), R2D2 length = burn-in + trace length with period < length (overlapping sequences, as
R2D2 stores them). A sequence's `start_carry` is the recurrent state the server had before its
first step; `version` is the policy version that chose each action.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from accelrl.bridge.slots import Fields, SlotTable


class SequenceAssembler:
    """Per-slot rings of the last `length` transitions; emits overlapping or disjoint windows."""

    def __init__(
        self, capacity: int, length: int, period: int, fields: Fields, carry_template: Any
    ) -> None:
        self.length, self.period = length, period
        self.buffers = {
            name: np.zeros((capacity, length, *shape), dtype)
            for name, (shape, dtype) in fields.items()
        }
        self.carries = jax.tree.map(
            lambda x: np.zeros((capacity, length, *x.shape[1:]), x.dtype), carry_template
        )
        self.count = np.zeros(capacity, np.int64)  # transitions added since the slot's reset

    def reset(self, slots: np.ndarray) -> None:
        self.count[slots] = 0

    def add(self, slots: np.ndarray, record: dict[str, np.ndarray], carry: Any) -> dict | None:
        """Append one transition per slot (`record` fields [n, ...], `carry` the state before
        it); returns the sequences completed now (fields [m, length, ...]) or None."""
        position = self.count[slots] % self.length
        for name, buffer in self.buffers.items():
            buffer[slots, position] = record[name]
        jax.tree.map(lambda ring, c: ring.__setitem__((slots, position), c), self.carries, carry)
        self.count[slots] += 1
        count = self.count[slots]
        ready = (count >= self.length) & ((count - self.length) % self.period == 0)
        if not ready.any():
            return None
        rows = slots[ready]
        oldest_first = (count[ready, None] - self.length + np.arange(self.length)) % self.length
        item = {name: buffer[rows[:, None], oldest_first] for name, buffer in self.buffers.items()}
        item["start_carry"] = jax.tree.map(lambda r: r[rows, oldest_first[:, 0]], self.carries)
        return item


class TrajectoryBuilder:
    """Joins each slot's pending step with the env's reply into transitions."""

    def __init__(self, slots: SlotTable, assembler: SequenceAssembler) -> None:
        self.slots = slots
        self.assembler = assembler
        self.episodes: list[tuple[float, int]] = []  # finished (return, length), drained by logs
        self.transitions = 0  # env steps turned into transitions

    @classmethod
    def create(
        cls,
        capacity: int,
        frame_stack: int,
        observation: tuple[tuple[int, ...], Any],
        action: tuple[tuple[int, ...], Any],
        carry_template: Any,
        learner: Any,
    ) -> TrajectoryBuilder:
        """Slots and sequences for `capacity` envs: `observation`/`action` are (shape, dtype)
        of what the agent sees and does; the learner gives the sequence length and period and
        its acting outputs to keep (`extras`)."""
        slots = SlotTable(
            capacity, *observation, frame_stack, *action, carry_template, learner.extras
        )
        fields = {
            "observation": observation,
            "next_observation": observation,
            "action": action,
            "prev_action": action,
            "is_first": ((), bool),
            "prev_reward": ((), np.float32),
            "reward": ((), np.float32),
            "terminated": ((), bool),
            "truncated": ((), bool),
            "version": ((), np.int64),
            **learner.extras,
        }
        assembler = SequenceAssembler(
            capacity, learner.sequence_length, learner.sequence_period, fields, carry_template
        )
        return cls(slots, assembler)

    def allocate(self, count: int) -> tuple[int, np.ndarray] | None:
        allocated = self.slots.allocate(count)
        if allocated is not None:
            self.assembler.reset(allocated[1])
        return allocated

    def observe(self, steps: Any) -> tuple[dict[str, np.ndarray], dict | None]:
        """Complete the pending transitions of `steps.env_ids`; returns the acting inputs for
        the new observations (observation, is_first, prev_action, prev_reward) and the
        sequences completed by this message (or None)."""
        s = self.slots
        ids = steps.env_ids
        done = steps.terminated | steps.truncated
        starts = done | s.fresh[ids]
        observation = s.stack(ids, steps.observation, starts)
        pend = s.has_pending[ids]
        prev_action = np.where(
            pend.reshape(-1, *[1] * (s.pending_action.ndim - 1)), s.pending_action[ids], 0
        ).astype(s.pending_action.dtype)
        prev_reward = np.where(pend, steps.reward, 0.0).astype(np.float32)
        item = None
        if np.any(pend):
            p = ids[pend]
            next_obs = observation[pend].copy()
            done_p = done[pend]
            if np.any(done_p):
                final = s.stack(ids[done], steps.final_observation, np.zeros(done.sum(), bool))
                # rows of `final` follow the order of done envs among all ids
                final_rows = np.cumsum(done) - 1
                next_obs[done_p] = final[final_rows[pend][done_p]]
            record = {
                "observation": s.pending_obs[p],
                "next_observation": next_obs,
                "is_first": s.pending_first[p],
                "action": s.pending_action[p],
                "prev_action": s.pending_prev_action[p],
                "prev_reward": s.pending_prev_reward[p],
                "reward": steps.reward[pend],
                "terminated": steps.terminated[pend],
                "truncated": steps.truncated[pend],
                "version": s.pending_version[p],
                **{name: v[p] for name, v in s.pending_extras.items()},
            }
            carry = jax.tree.map(lambda x: x[p], s.pending_carry)
            item = self.assembler.add(p, record, carry)
            s.episode_return[p] += steps.reward[pend]
            s.episode_length[p] += 1
            ended = p[done_p]
            if ended.size:
                returns = s.episode_return[ended].tolist()
                lengths = s.episode_length[ended].tolist()
                self.episodes.extend(zip(returns, lengths, strict=True))
                s.episode_return[ended] = 0
                s.episode_length[ended] = 0
            self.transitions += int(p.size)
        inputs = {
            "observation": observation,
            "is_first": starts,
            "prev_action": prev_action,
            "prev_reward": prev_reward,
        }
        return inputs, item

    def record_actions(
        self,
        ids: np.ndarray,
        inputs: dict[str, np.ndarray],
        outputs: dict[str, np.ndarray],
        carry: Any,
        version: int,
    ) -> None:
        """Make the chosen actions pending (`carry`: the state each env acted from)."""
        s = self.slots
        s.pending_obs[ids] = inputs["observation"]
        s.pending_first[ids] = inputs["is_first"]
        s.pending_prev_action[ids] = inputs["prev_action"]
        s.pending_prev_reward[ids] = inputs["prev_reward"]
        s.pending_action[ids] = outputs["action"]
        s.pending_version[ids] = version
        for name, values in s.pending_extras.items():
            values[ids] = outputs[name]
        jax.tree.map(lambda buf, c: buf.__setitem__(ids, c), s.pending_carry, carry)
        s.has_pending[ids] = True
        s.fresh[ids] = False
