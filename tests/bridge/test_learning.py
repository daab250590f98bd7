"""gymnasium's CartPole-v1, and an env of the user's with MultiDiscrete actions, in actor
processes learn through the bridge (`accelrl train`), and `accelrl eval` evaluates the run."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from bridge_helpers import read_scalars, run_cli

from accelrl.bridge.local import START_MARK


def train_through_bridge(run: Path, *overrides: str) -> str:
    """`accelrl train cartpole_vtrace_bridge` with `overrides` into `run`; its stdout."""
    out = run_cli("train", "cartpole_vtrace_bridge", "--run-dir", str(run), *overrides)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


@pytest.mark.slow
def test_cartpole_through_bridge_reaches_475(tmp_path):
    run = tmp_path / "run"
    stdout = train_through_bridge(
        run,
        # The preset (2 actors x 8 envs), stopped once 25 consecutive episodes average 475:
        # gymnasium's reward_threshold for CartPole-v1, over 25 episodes and not its 100
        # because this asynchronous learner's returns still dip now and then (a 300k-step run
        # never held 475 over 100). With the preset's learning rate, 2e-4, runs stop at 27-64 s
        # (12 of 12, three at a time); at 3e-4 some peaked early, fell back and wandered at
        # 170-430 through 450k steps. The budget of 450k gives a run that dips room to recover
        # (the asynchronous run is not deterministic, whatever the seed).
        # tests/bridge/test_reliability.py and test_foreign_actor.py cover actors that keep
        # several messages in flight.
        "target_return=475",
        "target_episodes=25",
        "total_env_steps=450000",
    )
    stop = re.search(r"target return 475 reached: mean ([\d.]+) over the latest (\d+)", stdout)
    assert stop, stdout[-2000:]
    assert float(stop.group(1)) >= 475 and int(stop.group(2)) == 25
    # and TensorBoard's log windows (about 16 episodes each at that length) show it balancing.
    # A window need not reach 475 itself: it is not the stopping window of 25 (one run's best
    # was 463). Those 25 fall short of 500 by at most 625 in all, so the ~16 of them logged at
    # the stop average at least ~461; 400 leaves room for a shorter last window.
    scalars = read_scalars(run)
    returns = [value for _, value in scalars["charts/episodic_return"]]
    assert max(returns) >= 400, (returns, stdout[-2000:])
    # the server's batching statistics: 2 actors x 8 envs, batches of at most 16 envs
    batch_means = [value for _, value in scalars["bridge/inference_batch_mean"]]
    assert all(1 <= b <= 16 for b in batch_means) and max(batch_means) > 1, batch_means
    # acting on a batch takes part of a request's time from arrival to its actions
    run_ms = [value for _, value in scalars["bridge/batch_run_ms_mean"]]
    latency_ms = [value for _, value in scalars["bridge/act_latency_ms_max"]]
    assert 0 < float(np.median(run_ms)) < float(np.median(latency_ms)), (run_ms, latency_ms)
    assert "listening on 127.0.0.1:" in stdout
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


@pytest.mark.slow
def test_multi_discrete_actions_learn_through_the_bridge(tmp_path, monkeypatch):
    """An env of the user's with a MultiDiscrete action space (components starting at 1 and
    -2; tests/bridge/multi_discrete_env.py), in actor processes that import it by gymnasium's
    "module:EnvId": one categorical per component learns to match both targets. Random play
    averages 5.8 of 20 an episode; greedy play after 40k steps scored 18.75 (lr 2e-4) and
    training episodes averaged 19 at 1e-3."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    run = tmp_path / "run"
    stdout = train_through_bridge(
        run,
        "bridge.env=gymnasium:multi_discrete_env:MatchTargets-v0",
        "agent.learning_rate=1e-3",
        "total_env_steps=40000",
    )
    assert "multi-discrete actions nvec=[3, 4]" in stdout
    returns = [value for _, value in read_scalars(run)["charts/episodic_return"]]
    assert max(returns) >= 15, (returns, stdout[-2000:])
    evaluated = run_cli("eval", str(run), "--episodes", "8", timeout=300)
    assert evaluated.returncode == 0, evaluated.stdout[-2000:] + evaluated.stderr[-2000:]
    assert json.loads((run / "eval.json").read_text())["mean_return"] >= 15
