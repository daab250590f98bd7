"""Config overrides and the command line, through the real `accelrl` entry point."""

import subprocess
import sys
from pathlib import Path

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
        ("env.max_steps=0", "env.max_steps"),
        ("agent.hidden_sizes=[64,0]", "agent.hidden_sizes"),
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


USER_ENVS = """
from accelrl.envs.cartpole import CartPole


def ShortCartPole():
    return CartPole()
"""

USER_NETS = """
import flax.linen as nn


class Torso(nn.Module):
    width: int = 24

    @nn.compact
    def __call__(self, obs):
        return nn.relu(nn.Dense(self.width)(obs))


class Unflattened(nn.Module):
    @nn.compact
    def __call__(self, obs):
        return obs[:, None, :]


WIDTH = 24
"""

USER_PRESET = """
from accelrl.config import AgentConfig, EnvConfig, TrainConfig


def config() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="user_envs:ShortCartPole", num_envs=4),
        agent=AgentConfig(unroll_length=16, torso="user_nets:Torso"),
        total_env_steps=128,
        iterations_per_chunk=1,
    )
"""


def write_user_files(directory: Path) -> None:
    (directory / "user_envs.py").write_text(USER_ENVS)
    (directory / "user_nets.py").write_text(USER_NETS)
    (directory / "user_preset.py").write_text(USER_PRESET)


def test_user_preset_file_env_module_and_torso(tmp_path):
    # The console script, as a user runs it: their preset file, env module and torso module in
    # the cwd, beside modules named like accelrl's own top-level packages, which must not
    # shadow them.
    write_user_files(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "__init__.py").write_text("raise ImportError('shadowed')\n")
    (tmp_path / "physics.py").write_text("raise ImportError('shadowed')\n")
    accelrl = str(Path(sys.executable).parent / "accelrl")
    for args in (
        ["train", "user_preset.py", "--run-dir", "run"],
        ["eval", "run", "--episodes", "2"],
    ):
        result = subprocess.run(
            [accelrl, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, (args, result.stderr[-2000:])
    saved = (tmp_path / "run" / "config.yaml").read_text()
    assert "user_envs:ShortCartPole" in saved and "user_nets:Torso" in saved
    assert (tmp_path / "run" / "eval.json").exists()


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["user_preset.py", "env.name=user_envs:Nope"], "user_envs has no attribute 'Nope'"),
        (["user_preset.py", "agent.torso=user_nets:Unflattened"], "must return [batch, features]"),
        (
            ["user_preset.py", "agent.torso=user_nets:WIDTH"],
            "is of type int, not a flax.linen Module",
        ),
        (["cartpole_r2d2", "r2d2.torso=natur_cnn"], "Did you mean 'nature_cnn'"),
        (["user_preset.py", "env.name=no_such_module:Env"], "cannot import 'no_such_module'"),
        (["cartpole_vtrace", "env.name=cartpol"], "Did you mean 'cartpole'"),
        (["cartpole_r2d2", "env.name=pendulum"], "r2d2 needs discrete actions"),
        (["missing_preset.py"], "preset file 'missing_preset.py' does not exist"),
    ],
)
def test_bad_env_torso_or_preset_file_exits_2_without_run_dir(tmp_path, args, fragment):
    write_user_files(tmp_path)
    result = run_cli("train", *args, "--run-dir", "out", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert fragment in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "overrides, code, fragment",
    [
        ([], 1, "no checkpoint in"),  # a run directory killed before its first checkpoint
        (["env.name=gone_module:Env"], 2, "cannot import 'gone_module'"),
    ],
)
def test_eval_of_a_run_it_cannot_load_names_the_problem(tmp_path, overrides, code, fragment):
    save_config(
        apply_overrides(load_preset("cartpole_vtrace"), overrides), tmp_path / "config.yaml"
    )
    result = run_cli("eval", str(tmp_path), "--episodes", "2", cwd=tmp_path)
    assert result.returncode == code, result.stderr[-2000:]
    assert fragment in result.stderr and "Traceback" not in result.stderr
