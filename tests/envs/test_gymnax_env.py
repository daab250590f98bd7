"""gymnax environments under our env API: episode ends, spaces, batching and errors."""

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from accelrl.envs import Box, Discrete, make, make_training_env
from accelrl.envs.gymnax_env import GymnaxEnv

# Every gymnax env but two (MNISTBandit downloads MNIST, FrozenLake observes a Dict) and three
# MinAtar games that would add 20 s of compiling to what Breakout and SpaceInvaders check.
LEFT_OUT = {
    "MNISTBandit-bsuite",
    "FrozenLake-misc",
    "Asterix-MinAtar",
    "Freeway-MinAtar",
    "Seaquest-MinAtar",
}


def _run(env, policy, steps: int, seed: int = 0):
    """Rolls `env` with `policy(observation)` until the episode ends: (steps taken, last ts)."""
    state, ts = env.reset(jax.random.PRNGKey(seed))
    step = jax.jit(env.step)
    for t in range(1, steps + 1):
        state, ts = step(state, policy(ts.observation))
        if ts.terminated or ts.truncated:
            return t, ts
    return steps, ts


def test_cartpole_is_truncated_at_gymnaxs_limit_and_terminated_when_it_falls():
    env = make("gymnax:CartPole-v1")
    assert isinstance(env, GymnaxEnv)
    assert env.action_space == Discrete(2) and env.observation_space.shape == (4,)
    balance = lambda obs: jnp.int32(obs[2] + 0.5 * obs[3] > 0)
    t, ts = _run(env, balance, 600)
    assert (t, bool(ts.terminated), bool(ts.truncated)) == (500, False, True)
    t, ts = _run(env, lambda obs: jnp.int32(1), 600)
    assert t < 100 and bool(ts.terminated) and not bool(ts.truncated)


def test_params_are_replaced_and_continuous_actions_are_boxes():
    env = make("gymnax:Pendulum-v1", params={"max_steps_in_episode": 7})
    space = env.action_space
    assert isinstance(space, Box) and space.shape == (1,)
    np.testing.assert_array_equal(space.low, [-2.0])
    t, ts = _run(env, lambda obs: jnp.full((1,), 2.0), 50)
    assert (t, bool(ts.truncated)) == (7, True)


@pytest.mark.parametrize("env_id", [e for e in gymnax.registered_envs if e not in LEFT_OUT])
def test_gymnax_envs_run_batched_and_auto_resetting(env_id):
    env = make_training_env(f"gymnax:{env_id}", 3)
    space = env.action_space

    def random_action(key):
        if isinstance(space, Discrete):
            return jax.random.randint(key, (3,), 0, space.num_values)
        return jax.random.uniform(key, (3, *space.shape), minval=space.low, maxval=space.high)

    def body(carry, key):
        state, _ = carry
        state, ts = env.step(state, random_action(key))
        return (state, ts), ts.done

    state, ts = env.reset(jax.random.PRNGKey(0))
    keys = jax.random.split(jax.random.PRNGKey(1), 200)
    (_, ts), done = jax.jit(lambda c: jax.lax.scan(body, c, keys))((state, ts))
    assert ts.observation.shape == (3, *env.observation_space.shape)
    assert ts.observation.dtype == env.observation_space.dtype
    assert np.isfinite(np.asarray(ts.observation, np.float32)).all()
    assert np.isfinite(np.asarray(ts.reward)).all() and done.shape == (200, 3)


@pytest.mark.parametrize(
    "name, kwargs, needle",
    [
        ("gymnax:CartPol-v1", {}, "unknown gymnax environment 'CartPol-v1'; gymnax has: CartPole"),
        ("gymnax:FrozenLake-misc", {}, "observations must be an array"),
        ("gymnax:CartPole-v1", {"params": {"no_such_field": 1}}, "bad params"),
        ("gymnax:CartPole-v1", {"size": 3}, "gymnax could not make 'CartPole-v1'"),
    ],
)
def test_bad_names_spaces_and_params_are_named(name, kwargs, needle):
    with pytest.raises(ValueError, match="gymnax") as error:
        make(name, **kwargs)
    assert needle in str(error.value)
