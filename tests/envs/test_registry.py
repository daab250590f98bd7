"""Environment registry: names, errors, the training stack's composition."""

import pytest

from accelrl.envs import (
    ActionRepeat,
    AutoReset,
    EpisodeStatistics,
    NormalizeObservation,
    TimeLimit,
    Vectorize,
    make,
    make_training_env,
    register,
    registered_names,
)
from accelrl.envs.cartpole import CartPole
from accelrl.envs.catch import Catch
from accelrl.envs.pendulum import Pendulum


def test_builtin_names():
    assert {"cartpole", "pendulum", "catch"} <= set(registered_names())
    assert isinstance(make("cartpole"), CartPole)
    assert make("pendulum", g=9.81).g == 9.81
    assert make("catch", rows=6).rows == 6


def test_unknown_name_error_lists_names_and_suggests():
    with pytest.raises(ValueError, match="unknown environment 'cartpol'") as excinfo:
        make("cartpol")
    message = str(excinfo.value)
    assert "Did you mean 'cartpole'?" in message
    assert "catch, " in message and "pendulum" in message
    with pytest.raises(ValueError) as excinfo:
        make("zzzz")
    assert "Did you mean" not in str(excinfo.value)


def test_register_rejects_duplicates():
    with pytest.raises(ValueError, match="already registered"):
        register("catch", Catch)


def test_training_stack_order():
    env = make_training_env("pendulum", 4, action_repeat=2, normalize_observation=True)
    chain = [type(env)]
    while hasattr(env, "env"):
        env = env.env
        chain.append(type(env))
    assert chain == [
        NormalizeObservation,
        Vectorize,
        AutoReset,
        EpisodeStatistics,
        TimeLimit,
        ActionRepeat,
        Pendulum,
    ]
    limit = make_training_env("pendulum", 4, action_repeat=2).env.env.env
    assert limit.max_steps == 100  # 200 env steps at repeat 2
    assert make_training_env("cartpole", 4, max_steps=50).env.env.env.max_steps == 50
    # Catch has no limit: no TimeLimit unless asked.
    assert type(make_training_env("catch", 4).env.env.env) is Catch
    assert make_training_env("catch", 4, max_steps=3).env.env.env.max_steps == 3
