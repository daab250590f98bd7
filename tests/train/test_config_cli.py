"""Config overrides and the command line, through the real `accelrl` entry point."""

import subprocess
import sys

import pytest

from accelrl.config import ConfigError, apply_overrides, load_config, save_config
from configs import load_preset, preset_names


def run_cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "accelrl.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_overrides_are_typed_and_nested():
    config = apply_overrides(
        load_preset("cartpole_vtrace"),
        ["agent.learning_rate=1e-3", "env.num_envs=512", "agent.hidden_sizes=[32,32,32]"],
    )
    assert config.agent.learning_rate == 1e-3
    assert config.env.num_envs == 512
    assert config.agent.hidden_sizes == (32, 32, 32)


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("agent.learning_rat=1e-3", "agent.learning_rat"),
        ("agnet.learning_rate=1e-3", "agnet"),
        ("env.num_envs=many", "env.num_envs"),
        ("seed=1.5", "seed"),
        ("seed", "key=value"),
        ("env.num_envs=6", "num_minibatches"),
    ],
)
def test_bad_overrides_name_the_problem(override, fragment):
    with pytest.raises(ConfigError, match=fragment):
        apply_overrides(load_preset("cartpole_vtrace"), [override])


def test_config_round_trips_through_yaml(tmp_path):
    config = apply_overrides(load_preset("pendulum_vtrace"), ["agent.lstm_size=16"])
    save_config(config, tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml") == config


def test_every_preset_loads():
    assert {"cartpole_vtrace", "catch_vtrace", "pendulum_vtrace"} <= set(preset_names())
    for name in preset_names():
        load_preset(name)


def test_mistyped_key_exits_2_without_run_dir(tmp_path):
    result = run_cli(
        "train", "cartpole_vtrace", "agent.learning_rat=1e-3", "--run-dir", "out", cwd=tmp_path
    )
    assert result.returncode == 2
    assert "agent.learning_rat" in result.stderr
    assert "learning_rate" in result.stderr  # the suggestion
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_unknown_preset_exits_2(tmp_path):
    result = run_cli("train", "cartpole_vtrac", cwd=tmp_path)
    assert result.returncode == 2
    assert "cartpole_vtrace" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_train_help_lists_presets(tmp_path):
    result = run_cli("train", "--help", cwd=tmp_path)
    assert result.returncode == 0
    for name in preset_names():
        assert name in result.stdout


def test_resume_without_run_dir_is_an_error(tmp_path):
    result = run_cli("train", "--resume", cwd=tmp_path)
    assert result.returncode == 2
    assert "--run-dir" in result.stderr
