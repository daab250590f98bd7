"""benchmarks/train_curves.py end to end on a tiny budget: a real training run through the host
loop, stopped by its wall budget, with the curve read back from the written JSON, markdown and
PNG. CartPole keeps it to seconds (a locomotion env's physics alone compiles for ~35 s here).
"""

import json
import subprocess
import sys
from pathlib import Path

import matplotlib.image

REPO = Path(__file__).resolve().parents[2]


def test_train_curves_writes_curve_json_markdown_and_png(tmp_path):
    command = [
        sys.executable,
        str(REPO / "benchmarks" / "train_curves.py"),
        "--envs",
        "cartpole",
        "--env-steps",
        "40960",  # ten chunks of 4,096 in the schedule ...
        "--minutes",
        "0.0001",  # ... but the wall budget is spent during compile: one chunk runs
        "--eval-episodes",
        "2",
        "--out-dir",
        str(tmp_path),
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    payload = json.loads((tmp_path / "train_curves.json").read_text())
    (run,) = payload["runs"]
    assert (run["env"], run["schedule_env_steps"], run["env_steps"]) == ("cartpole", 40960, 4096)
    (point,) = run["curve"]
    assert point["env_steps"] == 4096
    assert run["compile_s"] < point["wall_s"] <= run["wall_s"]
    # Read back from TensorBoard (float32) and equal to the host loop's own figure.
    assert abs(point["return"] - run["final_return_host"]) < 1e-4 * abs(run["final_return_host"])
    assert 8 <= point["return"] <= 500  # CartPole episode returns are lengths
    assert run["target"] is None  # targets exist for Ant only
    assert run["eval_episodes"] == 2 and 8 <= run["eval_return"] <= 500  # deterministic policy

    markdown = (tmp_path / "train_curves.md").read_text()
    assert "| cartpole | 0 | 4 |" in markdown
    image = matplotlib.image.imread(tmp_path / "train_curves.png")
    assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 300
    assert image[..., :3].std() > 0.01  # not blank: axes, labels and a curve
