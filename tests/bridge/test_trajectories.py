"""The server's trajectory assembly: actor messages -> transitions -> V-trace unrolls and R2D2's
overlapping sequences, checked step by step against what each message said and each action the
server chose (episode ends, truncation's final observation, a reconnecting actor)."""

import jax
import numpy as np

from accelrl.bridge.codec import DecodedSteps, concatenate_steps
from accelrl.bridge.run_setup import make_learner, server_spec
from accelrl.bridge.trajectories import TrajectoryBuilder
from accelrl.config import apply_overrides
from configs import load_preset

SLOTS = 2


def make_builder(preset: str, overrides: list[str]) -> tuple[TrajectoryBuilder, object]:
    """A builder for the preset's learner (4 slots, no frame stack)."""
    config = apply_overrides(load_preset(preset), overrides)
    learner = make_learner(config, server_spec(config))
    agent = learner.agent
    builder = TrajectoryBuilder.create(
        4,
        1,
        (agent.obs_shape, np.float32),
        ((), np.int32),
        agent.initial_carry(1),
        learner,
    )
    return builder, learner


class Script:
    """Drives a builder as the server does, recording what each step should become.

    Step t of slot i observes obs = 100 i + t (all four features), the action chosen for it is
    t + 10 i, its carry leaves hold 1000 i + t and its reward (sent with step t + 1) is t + 0.5.
    """

    def __init__(self, builder: TrajectoryBuilder, agent, ids: np.ndarray) -> None:
        self.builder, self.agent, self.ids = builder, agent, ids
        self.t = 0
        self.sequences: list[dict] = []
        self.inputs: list[dict] = []

    def message(self, terminated=(), truncated=()) -> None:
        """One message: every slot's reward for step t-1 and its observation t; slots listed in
        `terminated`/`truncated` ended their episode with step t-1 (final obs = -obs)."""
        n, t = len(self.ids), self.t
        obs = (100 * np.arange(n) + t)[:, None].repeat(4, 1).astype(np.float32)
        term = np.isin(np.arange(n), terminated)
        trunc = np.isin(np.arange(n), truncated)
        final = -((100 * np.arange(n) + 1000 + t)[term | trunc, None]).repeat(4, 1)
        steps = DecodedSteps(
            self.ids,
            obs,
            np.full(n, t - 0.5, np.float32),
            term,
            trunc,
            final.astype(np.float32),
        )
        inputs = self.builder.acting_inputs(steps)
        self.inputs.append({k: np.array(v) for k, v in inputs.items()})
        action = (t + 10 * np.arange(n)).astype(np.int32)
        outputs = {"action": action, "behaviour_log_prob": -action.astype(np.float32)}
        acted_from = (1000 * np.arange(n) + t).astype(np.float32)
        carry = jax.tree.map(
            lambda x: np.broadcast_to(acted_from.reshape(-1, *[1] * (x.ndim - 1)), x.shape),
            self.agent.initial_carry(n),
        )
        item = self.builder.complete(steps, inputs, outputs, carry, version=t)
        if item is not None:
            self.sequences.append(item)
        self.t += 1


def check_window(item: dict, row: int, slot: int, first: int, length: int, ends=()) -> None:
    """Row `row` of a sequence batch holds slot `slot`'s steps first..first+length-1."""
    t = np.arange(first, first + length)
    obs = item["observation"][row, :, 0]
    np.testing.assert_array_equal(obs, 100 * slot + t)
    np.testing.assert_array_equal(item["action"][row], t + 10 * slot)
    np.testing.assert_array_equal(item["reward"][row], t + 0.5)
    np.testing.assert_array_equal(item["version"][row], t)
    done = np.isin(t, ends)
    expected_next = np.where(done, -(100 * slot + 1000 + t + 1), 100 * slot + t + 1)
    np.testing.assert_array_equal(item["next_observation"][row, :, 0], expected_next)
    np.testing.assert_array_equal(item["prev_action"][row], np.where(t == 0, 0, t - 1 + 10 * slot))
    np.testing.assert_array_equal(item["prev_reward"][row], np.where(t == 0, 0, t - 0.5))
    starts = (t == 0) | np.isin(t - 1, ends)
    np.testing.assert_array_equal(item["is_first"][row], starts)


def test_vtrace_unrolls_are_disjoint_and_hold_each_step():
    builder, learner = make_builder("cartpole_vtrace_bridge", ["agent.unroll_length=4"])
    _, ids = builder.allocate(SLOTS)
    script = Script(builder, learner.agent, ids)
    for _ in range(9):  # 8 transitions per slot: two unrolls
        script.message(terminated=[1] if script.t == 6 else ())
    assert builder.transitions == 8 * SLOTS
    assert len(script.sequences) == 2
    first, second = script.sequences
    assert first["observation"].shape == (SLOTS, 4, 4)
    for slot in range(SLOTS):
        check_window(first, slot, slot, 0, 4)
        check_window(second, slot, slot, 4, 4, ends=[5] if slot == 1 else [])
        np.testing.assert_array_equal(second["terminated"][slot], [0, slot == 1, 0, 0])
        np.testing.assert_array_equal(
            second["behaviour_log_prob"][slot], -(np.arange(4, 8) + 10 * slot)
        )
    # the episode statistics: slot 1's episode ended after its 6th step
    assert builder.episodes == [(sum(t + 0.5 for t in range(6)), 6)]
    # what the policy acted on: the previous action and reward, zero for a slot's first step
    assert not script.inputs[0]["prev_action"].any() and script.inputs[0]["is_first"].all()
    np.testing.assert_array_equal(script.inputs[3]["prev_action"], [2, 12])
    np.testing.assert_array_equal(script.inputs[6]["is_first"], [False, True])


def test_r2d2_sequences_overlap_and_start_from_the_carry_before_them():
    overrides = ["r2d2.burn_in=2", "r2d2.trace_length=3", "r2d2.period=2", "r2d2.lstm_size=8"]
    builder, learner = make_builder("cartpole_r2d2_bridge", overrides)
    assert (learner.sequence_length, learner.sequence_period) == (5, 2)
    _, ids = builder.allocate(SLOTS)
    script = Script(builder, learner.agent, ids)
    for _ in range(10):  # 9 transitions per slot: windows end after steps 4, 6 and 8
        script.message(truncated=[0] if script.t == 4 else ())
    assert [len(s["reward"]) for s in script.sequences] == [SLOTS] * 3
    for k, item in enumerate(script.sequences):
        for slot in range(SLOTS):
            check_window(item, slot, slot, 2 * k, 5, ends=[3] if slot == 0 else [])
            for leaf in jax.tree.leaves(item["start_carry"]):  # the carry step 2k acted from
                assert np.all(leaf[slot] == 1000 * slot + 2 * k)
    # truncation bootstraps from the final observation, it does not terminate
    assert script.sequences[1]["truncated"][0].tolist() == [0, 1, 0, 0, 0]
    assert not script.sequences[1]["terminated"].any()


def test_a_reconnected_slot_starts_afresh():
    builder, learner = make_builder("cartpole_vtrace_bridge", ["agent.unroll_length=4"])
    _, ids = builder.allocate(SLOTS)
    script = Script(builder, learner.agent, ids)
    for _ in range(3):
        script.message()
    builder.slots.release(ids)
    _, again = builder.allocate(SLOTS)
    assert sorted(again) == sorted(ids)
    script = Script(builder, learner.agent, again)
    for _ in range(5):
        script.message()
    (item,) = script.sequences  # nothing of the first connection's steps
    for slot in range(SLOTS):
        check_window(item, slot, slot, 0, 4)
    assert script.inputs[0]["is_first"].all() and not script.inputs[0]["prev_action"].any()


def test_a_slot_without_a_pending_step_adds_no_transition():
    """A message listing a slot for the first time (here: one of two) only starts it."""
    builder, learner = make_builder("cartpole_vtrace_bridge", ["agent.unroll_length=4"])
    _, ids = builder.allocate(SLOTS)
    Script(builder, learner.agent, ids[:1]).message()
    assert builder.transitions == 0
    script = Script(builder, learner.agent, ids)
    script.t = 1
    script.message()
    assert builder.transitions == 1
    np.testing.assert_array_equal(script.inputs[0]["is_first"], [False, True])
    np.testing.assert_array_equal(script.inputs[0]["prev_action"], [0, 0])
    np.testing.assert_array_equal(script.inputs[0]["prev_reward"], [0.5, 0])


def _message(ids: np.ndarray, t: int, ended=()) -> DecodedSteps:
    """Step t of envs `ids` (obs 100 id + t); the rows in `ended` terminated with step t-1."""
    n = len(ids)
    obs = (100 * ids + t)[:, None].repeat(4, 1).astype(np.float32)
    terminated = np.isin(np.arange(n), ended)
    final = -(obs[terminated] + 1000)  # distinct per env, so a misplaced one shows
    truncated = np.zeros(n, bool)
    return DecodedSteps(ids, obs, np.full(n, t - 0.5, np.float32), terminated, truncated, final)


def _act(builder: TrajectoryBuilder, agent, steps: DecodedSteps, t: int) -> dict | None:
    inputs = builder.acting_inputs(steps)
    action = (t + 10 * steps.env_ids).astype(np.int32)
    outputs = {"action": action, "behaviour_log_prob": -action.astype(np.float32)}
    carry = jax.tree.map(np.zeros_like, agent.initial_carry(len(action)))
    return builder.complete(steps, inputs, outputs, carry, version=t)


def test_messages_acted_on_as_one_batch_make_what_they_make_one_by_one():
    """The server acts on a batch of several actors' messages at once (concatenate_steps):
    the transitions, final observations and sequences are those of one message at a time."""
    overrides = ["agent.unroll_length=4"]
    alone, learner = make_builder("cartpole_vtrace_bridge", overrides)
    batched, _ = make_builder("cartpole_vtrace_bridge", overrides)
    actors = [alone.allocate(2)[1], alone.allocate(2)[1]]
    assert all((batched.allocate(2)[1] == ids).all() for ids in actors)
    one_by_one, together = [], []
    for t in range(9):
        ended = {3: ([1], [0]), 6: ([], [0, 1]), 7: ([0, 1], [])}.get(t, ([], []))
        parts = [_message(ids, t, rows) for ids, rows in zip(actors, ended, strict=True)]
        one_by_one += [_act(alone, learner.agent, part, t) for part in parts]
        together.append(_act(batched, learner.agent, concatenate_steps(parts), t))
    one_by_one = [item for item in one_by_one if item is not None]
    together = [item for item in together if item is not None]
    assert len(together) == 2 and len(one_by_one) == 4
    for k, item in enumerate(together):  # rows: the first actor's envs, then the second's
        expected = jax.tree.map(lambda *x: np.concatenate(x), *one_by_one[2 * k : 2 * k + 2])
        jax.tree.map(np.testing.assert_array_equal, item, expected)
    assert alone.episodes == batched.episodes and len(alone.episodes) == 6
    # the final observations landed on the right envs
    next_obs = together[0]["next_observation"][:, :, 0]
    np.testing.assert_array_equal(next_obs[:, 2], [3, -1103, -1203, 303])
