"""Stopping at a target return (accelrl/early_stop.py): the window's arithmetic, the config
checks, and a fused CartPole run that stops with a checkpoint once its episodes reach it."""

import io
import re

import pytest

from accelrl.checkpoint import Checkpointer
from accelrl.config import ConfigError, apply_overrides
from accelrl.early_stop import RecentReturns
from accelrl.logger import Progress
from accelrl.train import train
from configs import load_preset


def test_the_mean_is_over_the_latest_windows_that_hold_enough_episodes():
    recent = RecentReturns(10)
    recent.add(50.0, 5)
    assert recent.mean is None and not recent.reached(0.0)  # 5 of 10 episodes
    recent.add(100.0, 5)
    assert recent.count == 10 and recent.mean == 15.0
    recent.add(300.0, 6)  # 11 episodes without the first window: it is dropped
    assert recent.count == 11 and recent.mean == pytest.approx(400 / 11)
    recent.add(0.0, 0)  # a window in which no episode finished changes nothing
    assert recent.count == 11
    assert recent.reached(36.0) and not recent.reached(37.0) and not recent.reached(None)


def test_episodes_added_one_by_one_give_the_exact_mean():
    recent = RecentReturns(3)
    for episode_return in [1.0, 2.0, 3.0, 4.0, 5.0]:
        recent.add(episode_return, 1)
    assert recent.count == 3 and recent.mean == 4.0


@pytest.mark.parametrize(
    "override, message",
    [
        ("target_episodes=0", "target_episodes must be at least 1"),
        ("target_return=nan", "target_return must be a finite number"),
    ],
)
def test_bad_settings_are_refused(override, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(load_preset("cartpole_vtrace"), [override])


def test_a_fused_run_stops_at_its_target_with_a_checkpoint(tmp_path):
    # A random policy averages ~22 on CartPole; 40 over 20 episodes comes within a few chunks.
    config = apply_overrides(
        load_preset("cartpole_vtrace"),
        ["total_env_steps=2000000", "target_return=40", "target_episodes=20", "eval_episodes=0"],
    )
    out = io.StringIO()
    result = train(config, tmp_path, progress=Progress(stream=out))
    assert result.target_reached, out.getvalue()
    assert result.env_steps < config.total_env_steps // 10
    stop = re.search(
        r"target return 40 reached: mean ([\d.]+) over the latest (\d+)", out.getvalue()
    )
    assert stop and float(stop.group(1)) >= 40 and int(stop.group(2)) >= 20, out.getvalue()
    checkpointer = Checkpointer(tmp_path / "checkpoints")
    assert checkpointer.latest_step == int(result.state.iteration)
    checkpointer.close()
