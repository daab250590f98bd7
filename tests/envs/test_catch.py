"""bsuite Catch: rewards, episode length, observation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from accelrl.envs.catch import Catch


def _play(env: Catch, key: jax.Array, follow_ball: bool):
    """Moves the paddle towards (or away from) the ball every step until termination."""
    state, timestep = env.reset(key)
    rewards = []
    while not bool(timestep.terminated):
        toward = jnp.sign(state.ball_col - state.paddle_col) + 1
        away = jnp.where(state.ball_col >= state.paddle_col, 0, 2)
        state, timestep = env.step(state, jnp.where(follow_ball, toward, away))
        rewards.append(float(timestep.reward))
        assert len(rewards) <= env.rows
    return rewards, state, timestep


@pytest.mark.parametrize("follow_ball, final_reward", [(True, 1.0), (False, -1.0)])
def test_catch_and_miss(follow_ball, final_reward):
    env = Catch()
    for seed in range(5):
        rewards, state, timestep = _play(env, jax.random.key(seed), follow_ball)
        assert len(rewards) == 9
        assert rewards == [0.0] * 8 + [final_reward]
        assert not bool(timestep.truncated)
        assert (int(state.paddle_col) == int(state.ball_col)) == follow_ball


def test_observation():
    env = Catch()
    state, timestep = env.reset(jax.random.key(3))
    obs = np.asarray(timestep.observation)
    assert obs.shape == (10, 5) and obs.dtype == np.float32
    assert obs.sum() == 2.0
    assert obs[0, int(state.ball_col)] == 1.0 and obs[9, 2] == 1.0
    assert env.observation_space.shape == (10, 5) and env.action_space.num_values == 3
    state, timestep = env.step(state, jnp.int32(0))  # left
    obs = np.asarray(timestep.observation)
    assert obs[1, int(state.ball_col)] == 1.0 and obs[9, 1] == 1.0 and obs.sum() == 2.0


def test_paddle_clipped_and_ball_column_uniform():
    env = Catch()
    state, _ = env.reset(jax.random.key(0))
    for _ in range(4):
        state, _ = env.step(state, jnp.int32(2))
    assert int(state.paddle_col) == 4
    cols = jax.vmap(lambda k: env.reset(k)[0].ball_col)(jax.random.split(jax.random.key(1), 5000))
    counts = np.bincount(np.asarray(cols), minlength=5)
    assert counts.shape == (5,) and counts.min() > 900
