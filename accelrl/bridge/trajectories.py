"""Trajectory assembly on the bridge server: actor messages -> transitions -> sequences.

For each actor message, `TrajectoryBuilder.acting_inputs` gives what the policy acts on, and
after the reply, `complete` turns the message's `Steps` (rewards and next observations of the
actions the server chose last time) into transitions of the slots' pending steps and makes the
newly chosen actions pending. `SequenceAssembler` keeps each slot's
last `length` transitions in a ring and emits them as one sequence every `period` transitions
once `length` have accumulated: V-trace uses length = period = unroll length (disjoint
unrolls), R2D2 length = burn-in + trace length with period < length (overlapping sequences, as
R2D2 stores them). A sequence's `start_carry` is the recurrent state the server had before its
first step; `version` is the policy version that chose each action.

Pending steps, transitions and rings share one record dtype (slots.py's `Records`), so each
message costs a handful of whole-record numpy operations over its env slots, whatever the
number of fields.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelrl.bridge.slots import Records, SlotTable

OUTCOME = {
    "next_observation": None,  # the observation's (shape, dtype), filled in by `create`
    "reward": ((), np.float32),
    "terminated": ((), bool),
    "truncated": ((), bool),
}
"""What the env's reply adds to a pending step to make it a transition."""


class SequenceAssembler:
    """Per-slot rings of the last `length` transitions; emits overlapping or disjoint windows."""

    def __init__(self, capacity: int, length: int, period: int, records: Records) -> None:
        self.length, self.period = length, period
        self.records = records
        self.ring = records.zeros((capacity, length))
        self.count = np.zeros(capacity, np.int64)  # transitions added since the slot's reset

    def reset(self, slots: np.ndarray) -> None:
        self.count[slots] = 0

    def add(self, slots: np.ndarray, transitions: np.ndarray) -> dict | None:
        """Append one transition per slot (`transitions`: [n] records, each with the carry
        before its step); returns the sequences completed now (fields [m, length, ...] and
        `start_carry`) or None."""
        count = self.count[slots]
        self.records.put(self.ring, (slots, count % self.length), transitions)
        count += 1
        self.count[slots] = count
        ready = (count >= self.length) & ((count - self.length) % self.period == 0)
        if not ready.any():
            return None
        rows = slots[ready]
        oldest_first = (count[ready, None] - self.length + np.arange(self.length)) % self.length
        windows = self.records.take(self.ring, (rows[:, None], oldest_first))  # the rings move on
        item = self.records.fields(windows)
        item["start_carry"] = self.records.carry(windows[:, 0])
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
        outcome = {**OUTCOME, "next_observation": observation}
        slots = SlotTable(
            capacity, *observation, frame_stack, *action, carry_template, learner.extras, outcome
        )
        assembler = SequenceAssembler(
            capacity, learner.sequence_length, learner.sequence_period, slots.records
        )
        return cls(slots, assembler)

    def allocate(self, count: int) -> tuple[int, np.ndarray] | None:
        allocated = self.slots.allocate(count)
        if allocated is not None:
            self.assembler.reset(allocated[1])
        return allocated

    def acting_inputs(self, steps: Any) -> dict[str, np.ndarray]:
        """What the policy acts on for `steps`' new observations: observation (stacked),
        is_first, and the slots' previous action and its reward (zero for a slot's first
        step)."""
        s = self.slots
        ids = steps.env_ids
        starts = steps.terminated | steps.truncated | s.fresh[ids]
        pend = s.has_pending[ids]
        prev_action, prev_reward = s.pending_action[ids], steps.reward
        if not pend.all():
            prev_action[~pend] = 0
            prev_reward = np.where(pend, prev_reward, np.float32(0))
        return {
            "observation": s.stack(ids, steps.observation, starts),
            "is_first": starts,
            "prev_action": prev_action,
            "prev_reward": prev_reward,
        }

    def complete(
        self,
        steps: Any,
        inputs: dict[str, np.ndarray],
        outputs: dict[str, np.ndarray],
        carry: Any,
        version: int,
    ) -> dict | None:
        """After acting on `inputs` (from `acting_inputs(steps)`): turn the slots' pending
        steps into transitions with `steps`' outcome, then make the new actions pending
        (`carry`: the state each env acted from). Returns the sequences completed now, or None.
        The reply does not need any of this, so the server sends it first."""
        item = self._add_transitions(steps, inputs["observation"])
        self._record_actions(steps.env_ids, inputs, outputs, carry, version)
        return item

    def _add_transitions(self, steps: Any, observation: np.ndarray) -> dict | None:
        s = self.slots
        ids = steps.env_ids
        pend = s.has_pending[ids]
        all_pending = bool(pend.all())
        # the rows of envs with a pending step (all of them, usually: no copy then)
        of_pending = (lambda x: x) if all_pending else (lambda x: x[pend])
        p = of_pending(ids)
        if not p.size:
            return None
        pending = s.records.take(s.pending, p)  # one gather of every field of the pending steps
        reward = of_pending(steps.reward)
        pending["next_observation"] = of_pending(observation)
        pending["reward"] = reward
        pending["terminated"] = of_pending(steps.terminated)
        pending["truncated"] = of_pending(steps.truncated)
        done = steps.terminated | steps.truncated
        done_p = None
        if done.any():
            final = s.stack(ids[done], steps.final_observation, np.zeros(done.sum(), bool))
            rows = np.zeros(len(ids), np.int64)  # row of each env in `final` (done envs)
            rows[done] = np.arange(len(final))
            done_p = of_pending(done)
            pending["next_observation"][done_p] = final[rows[pend][done_p]]
        item = self.assembler.add(p, pending)
        s.episode_return[p] += reward
        s.episode_length[p] += 1
        if done_p is not None:
            ended = p[done_p]
            returns = s.episode_return[ended].tolist()
            lengths = s.episode_length[ended].tolist()
            self.episodes.extend(zip(returns, lengths, strict=True))
            s.episode_return[ended] = 0
            s.episode_length[ended] = 0
        self.transitions += int(p.size)
        return item

    def _record_actions(
        self,
        ids: np.ndarray,
        inputs: dict[str, np.ndarray],
        outputs: dict[str, np.ndarray],
        carry: Any,
        version: int,
    ) -> None:
        s = self.slots
        step = np.empty(len(ids), s.pending.dtype)  # built whole, then ONE scatter
        step["observation"] = inputs["observation"]
        step["is_first"] = inputs["is_first"]
        step["prev_action"] = inputs["prev_action"]
        step["prev_reward"] = inputs["prev_reward"]
        step["action"] = outputs["action"]
        step["version"] = version
        for name in s.extra_names:
            step[name] = outputs[name]
        s.records.set_carry(step, carry)
        s.records.put(s.pending, ids, step)
        s.has_pending[ids] = True
        s.fresh[ids] = False
