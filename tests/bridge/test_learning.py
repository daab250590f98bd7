"""gymnasium's CartPole-v1 in actor processes learns through the bridge (`accelrl train`), and
`accelrl eval` evaluates the run."""

import json

import numpy as np
import pytest
from bridge_helpers import read_scalars, run_cli


@pytest.mark.slow
def test_cartpole_through_bridge_reaches_475(tmp_path):
    run = tmp_path / "run"
    out = run_cli(
        "train",
        "cartpole_vtrace_bridge",
        "--run-dir",
        str(run),
        # 150k steps failed once in CI (best 5-window mean 468.9, under xdist load); 200k
        # reached 500 in 8 of 8 runs here with one or two cores kept busy alongside.
        # (The preset's 2 actors x 8 envs: 2 x 16 envs in 2 groups, tried for speed, failed in
        # CI at 330, its return falling late in the run; tests/bridge/test_reliability.py and
        # test_foreign_actor.py cover actors that pipeline their messages.)
        "total_env_steps=200000",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    returns = [value for _, value in read_scalars(run)["charts/episodic_return"]]
    # mean over 5 consecutive log windows (about 25 episodes once it balances)
    windows = np.convolve(returns, np.ones(5) / 5, mode="valid")
    assert windows.max() >= 475, (returns, out.stdout[-2000:])
    assert "listening on 127.0.0.1:" in out.stdout
    assert (run / "checkpoints").exists()
    # `accelrl eval` on the bridge run: the saved policy's mode on CartPole-v1, in-process
    evaluated = run_cli("eval", str(run), "--episodes", "4", timeout=300)
    assert evaluated.returncode == 0, evaluated.stdout[-2000:] + evaluated.stderr[-2000:]
    report = json.loads((run / "eval.json").read_text())
    # The final policy of an asynchronous run is not deterministic: its greedy play ranged from
    # ~200 (one CI run, after training averaged 500) to 500. A random policy scores ~22, a
    # collapsed one ~10, so 150 shows the checkpoint holds the trained policy.
    assert report["episodes"] == 4 and report["mean_return"] >= 150, report
