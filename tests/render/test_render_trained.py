"""End to end: a tiny training run of the inverted_pendulum preset (normalised observations),
then `accelrl eval --render`.

The slowest render test (two compilations of the physics: the training step and the recording
evaluation loop), about 40 s of CPU time on 2 cores.
"""

import json

import imageio.v3 as iio
import numpy as np
import pytest

from accelrl.cli import main

TINY = [
    "env.num_envs=4",
    "agent.hidden_sizes=[16]",
    "agent.unroll_length=8",
    "agent.num_epochs=1",
    "agent.num_minibatches=1",
    "iterations_per_chunk=1",
    "total_env_steps=32",
    "eval_episodes=0",
]


@pytest.mark.slow
def test_trained_policy_renders_to_gif(tmp_path, capsys):
    run_dir, gif = tmp_path / "run", tmp_path / "pendulum.gif"
    assert main(["train", "inverted_pendulum_vtrace", *TINY, "--run-dir", str(run_dir)]) == 0
    assert main(["eval", str(run_dir), "--episodes", "1", "--render", str(gif)]) == 0
    assert f"rendered 1 episode(s) to {gif}" in capsys.readouterr().out
    length = json.loads((run_dir / "eval.json").read_text())["mean_length"]
    frames = iio.imread(gif, index=None)
    # dt = 0.04 s: 25 steps/s fit under the 30 fps cap, so one frame per step
    assert frames.shape == (int(length), 240, 320, 3)
    assert np.abs(frames[0].astype(int) - frames[-1]).mean() > 0.5  # the pole moved
