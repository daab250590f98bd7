"""`accelrl eval RUN_DIR --render out.gif|out.mp4` on a bridge run: episodes drawn from the
env's own rgb_array frames (gymnasium's CartPole here), and the errors for what cannot be."""

import json
import re

import imageio.v3 as iio
import numpy as np
import pytest
from bridge_helpers import run_cli

from accelrl.bridge.run_setup import make_learner, server_spec
from accelrl.checkpoint import Checkpointer
from accelrl.config import ConfigError, apply_overrides, save_config
from accelrl.evaluate import evaluate_run
from configs import load_preset


def bridge_run(run_dir, overrides=()):
    """A bridge run directory holding its config and the untrained policy's checkpoint."""
    config = apply_overrides(load_preset("cartpole_vtrace_bridge"), list(overrides))
    run_dir.mkdir()
    save_config(config, run_dir / "config.yaml")
    learner = make_learner(config, server_spec(config))
    checkpointer = Checkpointer(run_dir / "checkpoints")
    checkpointer.save(0, learner.init_state(config.seed))
    checkpointer.close()
    return run_dir


def test_bridge_run_renders_its_episodes_to_mp4(tmp_path):
    pytest.importorskip("pygame", reason="CartPole draws with pygame (gymnasium[classic-control])")
    run = bridge_run(tmp_path / "run")
    video = tmp_path / "cartpole.mp4"  # (a GIF merges repeated frames: MP4 keeps the count)
    args = ["eval", str(run), "--episodes", "3", "--render", str(video), "--render-episodes", "2"]
    out = run_cli(*args, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "rendered 2 episode(s)" in out.stdout
    report = json.loads((run / "eval.json").read_text())
    frames = iio.imread(video, index=None, plugin="FFMPEG")
    # each drawn episode (CartPole: return = length): its first frame, then one per step
    first_length = int(report["returns"][0])
    assert frames.shape == (first_length + 1 + int(report["returns"][1]) + 1, 400, 600, 3)
    # the pole falls during an episode, and the second episode starts upright again
    start, end, restart = frames[0], frames[first_length], frames[first_length + 1]
    assert np.abs(start.astype(int) - end).mean() > 1
    assert np.abs(start.astype(int) - restart).mean() < np.abs(start.astype(int) - end).mean()


@pytest.mark.parametrize(
    "overrides, render, render_episodes, fragment",
    [
        ([], "out.html", 1, "a bridge run renders to ('.gif', '.mp4')"),
        ([], "out.gif", 4, "render episodes must be in 1..3"),
        (["bridge.env=trivial:4"], "out.gif", 1, "'trivial:4' cannot render rgb_array frames"),
    ],
)
def test_what_a_bridge_run_cannot_render_is_a_config_error(
    tmp_path, overrides, render, render_episodes, fragment
):
    run = bridge_run(tmp_path / "run", overrides)
    with pytest.raises(ConfigError, match=re.escape(fragment)):  # `accelrl eval`: exit 2
        evaluate_run(run, 3, render=tmp_path / render, render_episodes=render_episodes)
    assert not (run / "eval.json").exists()
