"""Smoke test of the pong_r2d2_bridge preset: real ALE actors, conv R2D2 on the server.

Shrunk by overrides (sequences, replay, batch, LSTM) to run in seconds on a CPU; it checks that
actors connect, inference serves them and the learner inserts sequences and updates.
"""

from pathlib import Path

import pytest
from bridge_helpers import read_scalars, run_cli

ale_py = pytest.importorskip("ale_py", reason="needs ale-py for Atari actors")
if not (Path(ale_py.__file__).parent / "roms" / "pong.bin").exists():
    pytest.skip("ale-py has no Pong ROM (ale_py/roms/pong.bin)", allow_module_level=True)

SMALL = [
    "r2d2.lstm_size=32",
    "r2d2.head_size=32",
    "r2d2.burn_in=2",
    "r2d2.trace_length=4",
    "r2d2.period=2",
    "r2d2.batch_size=4",
    "r2d2.replay_capacity=64",
    "r2d2.min_replay_size=4",
    "env.num_envs=4",
    "bridge.batch_unrolls=4",
    "bridge.queue_size=4",
    "bridge.num_actors=1",
    "bridge.envs_per_actor=2",
    "bridge.max_envs=4",
    "bridge.max_batch=2",
    "total_env_steps=64",
]


def test_pong_r2d2_preset_acts_and_learns(tmp_path):
    run = tmp_path / "run"
    out = run_cli("train", "pong_r2d2_bridge", "--run-dir", str(run), *SMALL)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "gymnasium:ALE/Pong-v5" in out.stdout and "agent obs [84, 84, 4]" in out.stdout
    scalars = read_scalars(run)
    assert max(v for _, v in scalars["bridge/inference_batches"]) > 0
    assert "losses/loss" in scalars, out.stdout[-2000:]  # at least one learner update ran
    assert (run / "checkpoints").exists()
