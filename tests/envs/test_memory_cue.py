"""The memory_cue env: cue only at the first step, reward for recalling it at the last."""

import jax
import jax.numpy as jnp
import numpy as np

from accelrl.envs import make


def run_episode(env, key, actions):
    state, timestep = env.reset(key)
    observations, rewards, terminated = [np.asarray(timestep.observation)], [], []
    for action in actions:
        state, timestep = env.step(state, jnp.asarray(action))
        observations.append(np.asarray(timestep.observation))
        rewards.append(float(timestep.reward))
        terminated.append(bool(timestep.terminated))
    return int(state.cue), observations, rewards, terminated


def test_cue_then_blank_then_query_and_reward():
    env = make("memory_cue", length=5)
    for seed in range(6):
        key = jax.random.PRNGKey(seed)
        cue, obs, _, _ = run_episode(env, key, [0] * 5)
        np.testing.assert_array_equal(obs[0], np.eye(3)[cue])  # one-hot cue, no query flag
        for t in range(1, 4):
            np.testing.assert_array_equal(obs[t], [0, 0, 0])
        np.testing.assert_array_equal(obs[4], [0, 0, 1])  # the query
        _, _, rewards, terminated = run_episode(env, key, [1 - cue] * 4 + [cue])
        assert rewards == [0, 0, 0, 0, 1.0] and terminated == [False] * 4 + [True]
        _, _, rewards, _ = run_episode(env, key, [cue] * 4 + [1 - cue])
        assert rewards[-1] == -1.0
