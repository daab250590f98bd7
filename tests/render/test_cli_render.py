"""`accelrl eval --render`: bad requests stop with exit code 2 (missing OpenGL: 1) before
anything is loaded.

Under a second each: the checks run on the run's config, so no checkpoint is needed.
"""

import pytest

from accelrl.cli import main
from accelrl.config import save_config
from accelrl.render import gl
from configs import load_preset


@pytest.fixture
def run_dir(tmp_path):
    """A run directory with only a config (an unrendered env, cartpole)."""
    save_config(load_preset("cartpole_vtrace"), tmp_path / "config.yaml")
    return tmp_path


def eval_render(run_dir, *args):
    return main(["eval", str(run_dir), "--episodes", "2", *args])


def test_non_mjcf_env_is_refused(run_dir, capsys):
    out = run_dir / "cartpole.gif"
    assert eval_render(run_dir, "--render", str(out)) == 2
    err = capsys.readouterr().err
    assert "environment 'cartpole' cannot be rendered" in err
    assert "`mjcf_xml` or `mj_model`, `qpos" in err
    assert not out.exists() and not (run_dir / "eval.json").exists()


def test_unknown_suffix_is_refused(run_dir, capsys):
    assert eval_render(run_dir, "--render", str(run_dir / "x.avi")) == 2
    assert "must end in ('.gif', '.mp4', '.html')" in capsys.readouterr().err


@pytest.mark.parametrize("count", ["0", "3"])
def test_render_episodes_must_be_among_the_evaluated(tmp_path, capsys, count):
    save_config(load_preset("inverted_pendulum_vtrace"), tmp_path / "config.yaml")
    code = eval_render(tmp_path, "--render", str(tmp_path / "x.gif"), "--render-episodes", count)
    assert code == 2
    assert f"render episodes must be in 1..2 (--episodes), got {count}" in capsys.readouterr().err


def test_missing_opengl_fails_before_evaluating(tmp_path, capsys, monkeypatch):
    save_config(load_preset("inverted_pendulum_vtrace"), tmp_path / "config.yaml")
    monkeypatch.setenv("MUJOCO_GL", "vulkan")
    gl.backend.cache_clear()
    try:
        assert eval_render(tmp_path, "--render", str(tmp_path / "x.mp4")) == 1
    finally:
        gl.backend.cache_clear()  # later tests probe the real environment again
    assert "MUJOCO_GL='vulkan'" in capsys.readouterr().err
    assert not (tmp_path / "eval.json").exists()
