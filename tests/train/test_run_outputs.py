"""A run's outputs read back for real: orbax checkpoints, TensorBoard events, eval.json."""

import io
import json
import struct
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tensorboardX.proto import event_pb2

from accelrl.checkpoint import Checkpointer, CheckpointMismatch
from accelrl.config import apply_overrides
from accelrl.envs import Discrete, Environment, TimeStep, register, registered_names
from accelrl.envs.spaces import Box
from accelrl.fused import make_fused_trainer
from accelrl.logger import Progress, RunLogger
from accelrl.train import TrainingDiverged, train
from configs import load_preset

SMALL = [
    "env.num_envs=4",
    "agent.unroll_length=16",
    "agent.num_minibatches=2",
    "agent.num_epochs=2",
    "iterations_per_chunk=2",
    "total_env_steps=512",  # 4 chunks of 128 env steps
    "checkpoint_every_chunks=1",
    "eval_episodes=0",
]


def small_config(*extra):
    return apply_overrides(load_preset("cartpole_vtrace"), [*SMALL, *extra])


def read_scalars(run_dir):
    """{tag: [(step, value), ...]} from every event file in run_dir (TFRecord framing)."""
    scalars = {}
    for path in sorted(run_dir.glob("events.out.tfevents.*")):
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            record = data[offset + 12 : offset + 12 + length]
            offset += 12 + length + 4
            event = event_pb2.Event.FromString(record)
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


def host_leaves(state):
    """The state's leaves as numpy arrays (PRNG keys as their key data)."""
    as_data = lambda x: (
        jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x
    )
    return [np.asarray(as_data(x)) for x in jax.tree.leaves(state)]


def test_resume_gives_identical_parameters(tmp_path):
    config = small_config()
    straight = train(config, tmp_path / "straight")
    train(config, tmp_path / "split", max_chunks=2)
    resumed = train(config, tmp_path / "split", resume=True)
    assert int(resumed.state.iteration) == int(straight.state.iteration) == 8
    for a, b in zip(host_leaves(straight.state), host_leaves(resumed.state), strict=True):
        np.testing.assert_array_equal(a, b)


def test_resume_with_a_config_that_does_not_fit_the_checkpoint(tmp_path):
    config = small_config()
    train(config, tmp_path, max_chunks=1)
    saved = (tmp_path / "config.yaml").read_text()
    wider = apply_overrides(config, [f"env.num_envs={2 * config.env.num_envs}"])
    with pytest.raises(CheckpointMismatch, match=r"env_state/.*saved, .* wanted"):
        train(wider, tmp_path, resume=True)
    assert (tmp_path / "config.yaml").read_text() == saved  # the run is as it was
    resumed = train(config, tmp_path, resume=True, max_chunks=1)
    assert int(resumed.state.iteration) == 2 * config.iterations_per_chunk


def test_resume_before_the_first_checkpoint_starts_from_step_zero(tmp_path):
    lines = io.StringIO()
    result = train(small_config(), tmp_path, resume=True, max_chunks=1, progress=Progress(0, lines))
    assert int(result.state.iteration) == 2
    assert "no checkpoint in" in lines.getvalue()


def test_tensorboard_scalars_are_written_against_env_steps(tmp_path):
    train(small_config(), tmp_path)
    scalars = read_scalars(tmp_path)
    for tag in [
        "charts/episodic_return",
        "charts/episodic_length",
        "charts/SPS",
        "charts/learning_rate",
        "losses/policy_loss",
        "losses/value_loss",
        "losses/entropy",
    ]:
        assert tag in scalars, tag
    steps = [step for step, _ in scalars["charts/SPS"]]
    assert steps == [128, 256, 384, 512]
    learning_rates = [value for _, value in scalars["charts/learning_rate"]]
    assert learning_rates == sorted(learning_rates, reverse=True)  # linear decay


def test_writers_opened_within_one_second_keep_each_others_events(tmp_path):
    # A run resumed right after its predecessor stopped opens its event file in the same
    # second; tensorboardX's default name would then truncate the earlier file.
    for step in (1, 2):
        logger = RunLogger(tmp_path)
        logger.scalars(step, {"x": float(step)})
        logger.close()
    assert sorted(read_scalars(tmp_path)["x"]) == [(1, 1.0), (2, 2.0)]


def test_resumed_run_continues_tensorboard_steps(tmp_path):
    config = small_config()
    train(config, tmp_path, max_chunks=2)
    train(config, tmp_path, resume=True)
    steps = sorted({step for step, _ in read_scalars(tmp_path)["charts/SPS"]})
    assert steps == [128, 256, 384, 512]


@pytest.mark.parametrize(("seconds", "saved"), [(1e9, [8]), (1e-9, [2, 4, 6, 8])])
def test_checkpoints_are_saved_by_time_and_at_the_end(tmp_path, seconds, saved):
    config = small_config(
        "checkpoint_every_chunks=0", f"checkpoint_every_seconds={seconds}", "keep_checkpoints=10"
    )
    train(config, tmp_path)
    steps = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
    assert steps == saved


def test_checkpoint_restores_the_saved_state(tmp_path):
    config = small_config()
    result = train(config, tmp_path)
    trainer = make_fused_trainer(config)
    checkpointer = Checkpointer(tmp_path / "checkpoints")
    assert checkpointer.latest_step == 8
    restored = checkpointer.restore_latest(trainer.init(jax.random.PRNGKey(123)))
    checkpointer.close()
    for a, b in zip(host_leaves(result.state), host_leaves(restored), strict=True):
        np.testing.assert_array_equal(a, b)


def test_cli_eval_writes_eval_json(tmp_path):
    train(small_config(), tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "accelrl.cli", "eval", str(tmp_path), "--episodes", "5"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["episodes"] == 5
    assert 1.0 <= report["mean_return"] <= 500.0
    assert "mean return" in result.stdout


class NanAfter(Environment):
    """Never ends; from its `at`-th step on, the reward is NaN (a user env gone bad)."""

    def __init__(self, at: int = 40) -> None:
        self.at = at

    def reset(self, key):
        return jnp.zeros((), jnp.int32), self._timestep(jnp.zeros((), jnp.int32))

    def step(self, state, action):
        state = state + 1
        return state, self._timestep(state)

    def _timestep(self, t):
        reward = jnp.where(t >= self.at, jnp.nan, 1.0).astype(jnp.float32)
        observation = jnp.ones((3,), jnp.float32)
        return TimeStep(observation, reward, jnp.zeros((), bool), jnp.zeros((), bool), {})

    @property
    def observation_space(self):
        return Box(shape=(3,))

    @property
    def action_space(self):
        return Discrete(2)


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    if "nan_after_40" not in registered_names():
        register("nan_after_40", NanAfter)
    # 16 steps per iteration and per chunk: steps 32..47 (iteration 2) see the first NaN.
    config = small_config("env.name=nan_after_40", "iterations_per_chunk=1")
    with pytest.raises(TrainingDiverged, match="iteration 2"):
        train(config, tmp_path)
    checkpointer = Checkpointer(tmp_path / "checkpoints")
    assert checkpointer.latest_step == 2
    restored = checkpointer.restore_latest(make_fused_trainer(config).init(jax.random.PRNGKey(0)))
    checkpointer.close()
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(restored.params))


def test_checkpointer_round_trips_zero_size_and_none_leaves(tmp_path):
    """Orbax refuses zero-size arrays (a user env with no contact slots, an empty buffer); the
    checkpointer leaves them out, keeps None subtrees, and restores everything else exactly."""
    state = {
        "params": {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones(3, jnp.bfloat16)},
        "empty": jnp.zeros((4, 0), jnp.int32),
        "carry": None,
        "nested": (jnp.zeros((0,)), jnp.asarray(7, jnp.int32)),
    }
    checkpointer = Checkpointer(tmp_path / "ck")
    checkpointer.save(3, state)
    checkpointer.close()
    assert (tmp_path / "ck" / "3").is_dir()
    like = jax.tree.map(jnp.zeros_like, state)
    restored = Checkpointer(tmp_path / "ck").restore_latest(like)
    assert jax.tree.structure(restored) == jax.tree.structure(state)
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(state), strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
