"""Brax environments under our env API: spaces, episode ends, a user's own Brax env, errors."""

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from accelrl.config import ConfigError
from accelrl.envs import Box, TimeLimit, make, make_training_env
from accelrl.envs.brax_env import BraxEnv
from accelrl.render import renderable

# A Brax Env of a user's own (not a PipelineEnv: no physics to compile): a point that moves by
# its action and ends its episode when |x| > 1.
POINT = """
import jax.numpy as jnp
from brax.envs.base import Env, State


class Point(Env):
    def __init__(self, speed=0.25):
        self.speed = speed

    def reset(self, rng):
        x = jnp.zeros(1)
        return State(None, jnp.concatenate([x, x]), jnp.zeros(()), jnp.zeros(()), {}, {"x": x})

    def step(self, state, action):
        x = state.info["x"] + self.speed * action
        done = jnp.where(jnp.abs(x[0]) > 1, 1.0, 0.0)
        obs = jnp.concatenate([x, action])
        return state.replace(obs=obs, reward=-jnp.abs(x[0]), done=done, info={"x": x})

    @property
    def observation_size(self):
        return 2

    @property
    def action_size(self):
        return 1

    @property
    def backend(self):
        return "none"
"""


@pytest.fixture
def point_module(tmp_path, monkeypatch):
    (tmp_path / "my_brax_envs.py").write_text(textwrap.dedent(POINT))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_brax_envs"


def test_a_users_brax_env_terminates_by_its_done_and_is_truncated_at_braxs_1000(point_module):
    env = make(f"brax:{point_module}:Point", speed=0.5)
    assert isinstance(env, BraxEnv) and env.default_max_steps == 1000
    assert env.observation_space.shape == (2,)
    assert env.action_space.shape == (1,)
    np.testing.assert_array_equal(env.action_space.low, [-1.0])
    state, ts = env.reset(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    for t in range(1, 4):
        state, ts = step(state, jnp.ones(1))
        assert bool(ts.terminated) == (t == 3) and not bool(ts.truncated)  # x = 1.5 at t = 3
    assert float(ts.reward) == -1.5
    # no Brax System, so no MuJoCo model to draw: rendering is refused by name
    with pytest.raises(ConfigError, match=f"'brax:{point_module}:Point' cannot be rendered"):
        renderable(env, f"brax:{point_module}:Point")

    stack = make_training_env(f"brax:{point_module}:Point", 2)
    assert isinstance(stack.env.env.env, TimeLimit) and stack.env.env.env.max_steps == 1000
    state, ts = stack.reset(jax.random.PRNGKey(0))
    still = jnp.zeros((2, 1))
    stand = lambda c, _: (stack.step(c, still)[0], None)
    state, _ = jax.jit(lambda s: jax.lax.scan(stand, s, None, 999))(state)
    state, ts = stack.step(state, still)
    assert ts.truncated.tolist() == [True, True] and not ts.terminated.any()


def test_braxs_own_env_steps_batched():
    env = make_training_env("brax:fast", 3)
    assert isinstance(env.observation_space, Box) and env.observation_space.shape == (2,)
    state, ts = env.reset(jax.random.PRNGKey(0))
    state, ts = jax.jit(env.step)(state, jnp.ones((3, 1)))
    assert ts.observation.shape == (3, 2) and np.isfinite(np.asarray(ts.reward)).all()


@pytest.mark.parametrize(
    "name, kwargs, needle",
    [
        ("brax:antt", {}, "unknown Brax environment 'antt'; brax has: ant, fast"),
        ("brax:fast", {"obs_mode": "dict_state"}, "only array observations"),
        ("brax:fast", {"obs_mode": "nope"}, "brax could not make 'fast'"),
        ("brax:no_such_module:Env", {}, "cannot import 'no_such_module'"),
    ],
)
def test_bad_names_kwargs_and_observations_are_named(name, kwargs, needle):
    with pytest.raises(ValueError) as error:
        make(name, **kwargs)
    assert needle in str(error.value)
