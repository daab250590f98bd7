"""gymnasium's CartPole-v1 in actor processes learns through the bridge (`accelrl train`), and
`accelrl eval` evaluates the run."""

import json

import numpy as np
import pytest
from bridge_helpers import read_scalars, run_cli

from accelrl.bridge.local import START_MARK


@pytest.mark.slow
def test_cartpole_through_bridge_reaches_475(tmp_path):
    run = tmp_path / "run"
    out = run_cli(
        "train",
        "cartpole_vtrace_bridge",
        "--run-dir",
        str(run),
        # The preset as it is: 2 actors x 8 envs, 300k steps. At 200k, 10 of 10 runs two at a
        # time reached a best 5-window mean of 483-500, but one of three full-suite runs in CI
        # conditions stopped at 408 (asynchronous acting: the learning is not deterministic).
        # tests/bridge/test_reliability.py and test_foreign_actor.py cover actors that keep
        # several messages in flight.
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    returns = [value for _, value in read_scalars(run)["charts/episodic_return"]]
    # mean over 5 consecutive log windows (about 25 episodes once it balances)
    windows = np.convolve(returns, np.ones(5) / 5, mode="valid")
    assert windows.max() >= 475, (returns, out.stdout[-2000:])
    assert "listening on 127.0.0.1:" in out.stdout
    assert (run / "checkpoints").exists()
    # each local actor started once: none died, and none was restarted after training ended
    for log in sorted((run / "actors").glob("actor-*.log")):
        assert log.read_text().count(START_MARK) == 1, log.read_text()[-2000:]
    # `accelrl eval` on the bridge run: the saved policy's mode on CartPole-v1, in-process
    evaluated = run_cli("eval", str(run), "--episodes", "4", timeout=300)
    assert evaluated.returncode == 0, evaluated.stdout[-2000:] + evaluated.stderr[-2000:]
    report = json.loads((run / "eval.json").read_text())
    # The final policy of an asynchronous run is not deterministic: its greedy play ranged from
    # 132 (a clean-clone run whose training had peaked at 475+) to 500. A random policy scores
    # ~22, a collapsed one ~10, so 100 shows the checkpoint holds the trained policy.
    assert report["episodes"] == 4 and report["mean_return"] >= 100, report
