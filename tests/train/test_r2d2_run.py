"""R2D2 through the real host loop: resume with the replay, outputs, memory refusal, eval."""

import json
import struct
import subprocess
import sys

import jax
import numpy as np
import pytest
from tensorboardX.proto import event_pb2

from accelrl.config import ConfigError, apply_overrides
from accelrl.evaluate import evaluate_run
from accelrl.fused import make_fused_trainer, make_mesh
from accelrl.fused_r2d2 import check_replay_memory
from accelrl.train import train
from configs import load_preset

SMALL = [
    "env.num_envs=4",
    "r2d2.torso_sizes=[16]",
    "r2d2.lstm_size=16",
    "r2d2.head_size=16",
    "r2d2.burn_in=2",
    "r2d2.trace_length=6",
    "r2d2.period=4",
    "r2d2.batch_size=8",
    "r2d2.replay_capacity=64",
    "r2d2.min_replay_size=8",
    "r2d2.replay_ratio=2",  # 1 update per iteration
    "r2d2.target_update_period=3",
    "iterations_per_chunk=2",
    "total_env_steps=192",  # 6 chunks of 32 env steps
    "checkpoint_every_chunks=1",
    "eval_episodes=0",
]


def read_scalars(run_dir):
    """{tag: [(step, value), ...]} from the run's event files (TFRecord framing)."""
    scalars = {}
    for path in sorted(run_dir.glob("events.out.tfevents.*")):
        data, offset = path.read_bytes(), 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


def small_config(*extra):
    return apply_overrides(load_preset("cartpole_r2d2"), [*SMALL, *extra])


def test_resume_gives_identical_parameters_and_replay(tmp_path):
    config = small_config()
    straight = train(config, tmp_path / "straight")
    train(config, tmp_path / "split", max_chunks=3)
    resumed = train(config, tmp_path / "split", resume=True)
    state = straight.state
    assert int(state.iteration) == int(resumed.state.iteration) == 12
    # Learning ran (min fill 8 reached at iteration 2 of 0..11) and wrote priorities back.
    assert int(state.updates) == 10
    leaves = np.asarray(state.replay.tree)[0, 64:128]
    assert len(np.unique(leaves[leaves > 0])) > 2
    assert int(state.replay.size.sum()) == 44  # full windows from iteration 1 on, x 4 envs
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(resumed.state), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    changed = jax.tree.map(
        lambda p, t: np.any(np.asarray(p) != np.asarray(t)), state.params, state.target_params
    )
    assert any(jax.tree.leaves(changed))  # target lags the online network (period 3, 10 updates)


def test_outputs_logs_and_eval(tmp_path):
    train(small_config(), tmp_path)
    scalars = read_scalars(tmp_path)
    for tag in [
        "charts/episodic_return",
        "charts/SPS",
        "losses/loss",
        "losses/q_mean",
        "losses/td_abs",
        "losses/replay_fill",
    ]:
        assert tag in scalars, tag
    assert [step for step, _ in scalars["charts/SPS"]] == [32, 64, 96, 128, 160, 192]
    fill = [value for _, value in scalars["losses/replay_fill"]]
    assert fill == sorted(fill) and fill[-1] > 0
    report = evaluate_run(tmp_path, episodes=3)
    assert report.episodes == 3 and 1 <= report.mean_return <= 500
    assert json.loads((tmp_path / "eval.json").read_text())["checkpoint_iteration"] == 12


def test_replay_too_large_is_refused_before_anything_runs():
    config = small_config("r2d2.replay_capacity=2000000000", "r2d2.min_replay_size=8")
    with pytest.raises(ConfigError, match=r"replay needs [\d,]+ bytes .* only [\d,]+ bytes"):
        make_fused_trainer(config)
    mesh = make_mesh(4)
    with pytest.raises(ConfigError, match="needs 1,000 bytes.*only 999 bytes"):
        check_replay_memory(1000, mesh, available=999)
    check_replay_memory(1000, mesh, available=1000)


@pytest.mark.parametrize(
    "override, message",
    [
        ("r2d2.replay_ratio=3", "whole number"),
        ("r2d2.period=9", "period"),
        ("r2d2.min_replay_size=65", "min_replay_size"),
        ("r2d2.lstm_size=0", "lstm_size"),
        ("r2d2.priority_exponent=-1", "priority_exponent"),
        ("r2d2.importance_exponent=2", "importance_exponent"),
    ],
)
def test_bad_r2d2_configs_are_config_errors(override, message):
    with pytest.raises(ConfigError, match=message):
        small_config(override)


def test_an_eager_replay_is_allocated_once(tmp_path):
    """init_replay called op by op (as the bridge learner does) holds the replay once: the
    peak memory of a process that makes a 512 MB replay stays well below twice that."""
    script = tmp_path / "make_replay.py"
    script.write_text(
        "import resource, jax, jax.numpy as jnp\n"
        "from accelrl.r2d2_learning import init_replay\n"
        "jax.block_until_ready(jnp.zeros(8) + 1)  # the runtime's own memory, before\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "replay = jax.block_until_ready(init_replay({'x': jnp.zeros(2**17, jnp.uint8)}, 4096, 1))\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=True
    )
    grown = int(out.stdout.split()[-1])
    assert grown < 1.5 * 2**29, f"peak grew by {grown / 2**20:.0f} MiB for a 512 MiB replay"


def _eval_peak_rss(run_dir, tmp_path):
    """Peak RSS growth (bytes) of `accelrl eval run_dir` in a fresh process, past its imports."""
    script = tmp_path / "eval_peak.py"
    script.write_text(
        "import resource, sys\n"
        "import jax.numpy as jnp\n"
        "from accelrl.cli import main\n"
        "jnp.zeros(8).block_until_ready()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "assert main(['eval', sys.argv[1], '--episodes', '1']) in (0, None)\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)\n"
    )
    out = subprocess.run(
        [sys.executable, str(script), str(run_dir)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return int(out.stdout.split()[-1])


def test_restoring_a_replay_holds_it_once(tmp_path):
    """A checkpoint is read into the shapes of a fresh state that is dropped first, so the
    fresh state's replay is not held beside the restored one. Measured by `accelrl eval`,
    which restores the whole state: with a 544 MiB replay its peak memory grew by 294-490 MiB
    (two runs) while the fresh state was kept through the read, and now by about nothing."""
    replay_bytes = 544 * 2**20  # capacity 2**20 of SMALL's sequences
    peaks = {}
    for capacity in (64, 2**20):
        config = small_config(f"r2d2.replay_capacity={capacity}")
        train(config, tmp_path / str(capacity), max_chunks=1)
        peaks[capacity] = _eval_peak_rss(tmp_path / str(capacity), tmp_path)
    grown = peaks[2**20] - peaks[64]
    assert grown < replay_bytes / 4, f"{grown / 2**20:.0f} MiB more for a 544 MiB replay"
