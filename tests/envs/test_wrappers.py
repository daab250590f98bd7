"""Wrappers on real environments: flags, statistics, resets, batching, normalisation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from accelrl.envs import (
    ActionRepeat,
    AutoReset,
    Box,
    EpisodeStatistics,
    NormalizeObservation,
    TimeLimit,
    Vectorize,
    make_training_env,
    registered_names,
)
from accelrl.envs.cartpole import CartPole
from accelrl.envs.catch import Catch
from accelrl.envs.locomotion import ENVS as LOCOMOTION_ENVS
from accelrl.envs.pendulum import Pendulum

STAY = jnp.int32(1)


def _rollout(env, num_steps, action=STAY, key=0):
    """Jitted scan of `num_steps` steps with a constant action; returns stacked TimeSteps."""

    @jax.jit
    def run(key):
        state, first = env.reset(key)

        def body(state, _):
            state, timestep = env.step(state, action)
            return state, timestep

        state, timesteps = jax.lax.scan(body, state, None, num_steps)
        return first, state, timesteps

    return run(jax.random.key(key))


def test_time_limit_truncates_unless_terminated():
    _, _, ts = _rollout(TimeLimit(Catch(), 5), 5)
    assert ts.truncated.tolist() == [False] * 4 + [True]
    assert not ts.terminated.any()
    # Catch terminates on its 9th step: at a limit of exactly 9 termination wins.
    _, state, ts = _rollout(TimeLimit(Catch(), 9), 9)
    assert ts.terminated.tolist() == [False] * 8 + [True]
    assert not ts.truncated.any()
    assert int(state.steps) == 9
    _, _, ts = _rollout(TimeLimit(Catch(), 10), 9)
    assert not ts.truncated.any() and bool(ts.terminated[-1])


def test_auto_reset_keeps_final_observation_and_resets():
    env = AutoReset(Catch())
    first, _, ts = _rollout(env, 20)
    assert set(first.info) == set(ts.info) == {"final_observation"}
    np.testing.assert_array_equal(first.info["final_observation"], first.observation)
    done = np.asarray(ts.done)
    assert np.flatnonzero(done).tolist() == [8, 17]
    # Not done: final_observation is the observation.
    np.testing.assert_array_equal(ts.info["final_observation"][~done], ts.observation[~done])
    for t in (8, 17):
        final, obs = np.asarray(ts.info["final_observation"][t]), np.asarray(ts.observation[t])
        assert final[:9].sum() == 0.0 and final[9].sum() >= 1.0  # ball reached the bottom
        assert obs[0].sum() == 1.0 and obs[9, 2] == 1.0  # fresh episode: ball on top, centre
        assert abs(float(ts.reward[t])) == 1.0 and bool(ts.terminated[t])
    assert (ts.reward[~done] == 0).all()


def test_episode_statistics_totals():
    env = AutoReset(EpisodeStatistics(TimeLimit(CartPole(), 5)))
    first, _, ts = _rollout(env, 12)
    assert float(first.info["episode_return"]) == 0 and int(first.info["episode_length"]) == 0
    done = np.asarray(ts.done)
    assert np.flatnonzero(done).tolist() == [4, 9] and ts.truncated[done].all()
    np.testing.assert_array_equal(ts.info["episode_return"], np.where(done, 5.0, 0.0))
    np.testing.assert_array_equal(ts.info["episode_length"], np.where(done, 5, 0))
    assert ts.info["episode_return"].dtype == jnp.float32
    catch = AutoReset(EpisodeStatistics(Catch()))
    _, _, ts = _rollout(catch, 18)
    done = np.asarray(ts.done)
    np.testing.assert_array_equal(ts.info["episode_length"], np.where(done, 9, 0))
    np.testing.assert_array_equal(ts.info["episode_return"], np.where(done, ts.reward, 0.0))


def test_action_repeat_sums_rewards_and_stops_at_episode_end():
    env = ActionRepeat(CartPole(), 3)
    assert env.default_max_steps == 167
    state, _ = env.reset(jax.random.key(0))
    inner = state
    for _ in range(3):
        inner, _ = CartPole().step(inner, jnp.int32(1))
    state, ts = env.step(state, jnp.int32(1))
    assert float(ts.reward) == 3.0
    for got, want in zip(jax.tree.leaves(state), jax.tree.leaves(inner), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)  # scan vs eager: ulp differences
    # Catch ends after 9 inner steps: repeat 4 gives 4 + 4 + 1 real steps.
    _, state, ts = _rollout(ActionRepeat(Catch(), 4), 3)
    assert ts.terminated.tolist() == [False, False, True]
    assert int(state.ball_row) == 9  # frozen at the terminal state, not stepped past it
    assert ts.reward.tolist()[:2] == [0.0, 0.0] and abs(float(ts.reward[2])) == 1.0
    assert np.asarray(ts.observation[2])[:9].sum() == 0.0


def test_vectorize_shapes():
    env = Vectorize(AutoReset(CartPole()), 8)
    state, first = env.reset(jax.random.key(0))
    assert first.observation.shape == (8, 4) and first.reward.shape == (8,)
    assert state.inner.x.shape == (8,)
    assert len(np.unique(np.asarray(first.observation[:, 0]))) == 8  # independent resets
    state, ts = env.step(state, jnp.ones(8, jnp.int32))
    assert ts.observation.shape == (8, 4) and ts.info["final_observation"].shape == (8, 4)
    assert ts.terminated.shape == ts.truncated.shape == (8,)
    assert env.num_envs == 8 and env.observation_space.shape == (4,)
    assert env.action_space.num_values == 2 and env.unwrapped.__class__ is CartPole


def _random_actions(env, key, num_steps):
    """Random actions per step for a batched env, drawn from its single-env action space."""
    space, shape = env.action_space, (num_steps, env.num_envs)
    if isinstance(space, Box):
        return jax.random.uniform(key, shape + space.shape, minval=space.low, maxval=space.high)
    return jax.random.randint(key, shape, 0, space.num_values)


def test_normalize_observation_statistics():
    num_envs, num_steps = 64, 600
    raw_env = Vectorize(AutoReset(TimeLimit(Pendulum(), 200)), num_envs)
    env = NormalizeObservation(raw_env)
    actions = _random_actions(raw_env, jax.random.key(1), num_steps)

    @jax.jit
    def run(env_key):
        # The raw observations are those the wrapper saw: each step also steps the raw env from
        # the wrapper's inner state (two separate rollouts would drift apart by rounding).
        def step(state, action):
            _, raw = raw_env.step(state.inner, action)
            state, normalized = env.step(state, action)
            return state, (raw, normalized)

        _, raw_first = raw_env.reset(env_key)
        state, _ = env.reset(env_key)
        state, observations = jax.lax.scan(step, state, actions)
        return state, raw_first.observation, observations

    state, raw_first, (raw_ts, norm_ts) = run(jax.random.key(0))
    norm_obs = norm_ts.observation
    all_raw = np.concatenate([raw_first[None], raw_ts.observation]).reshape(-1, 3)
    stats = state.stats
    assert float(stats.count) == all_raw.shape[0]
    np.testing.assert_allclose(stats.mean, all_raw.mean(0), rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(stats.var, all_raw.var(0), rtol=1e-3, atol=1e-8)
    # Pendulum under random torques is close to stationary (CartPole's cart position is not).
    late = np.asarray(norm_obs[num_steps // 2 :]).reshape(-1, 3)
    assert np.abs(late.mean(0)).max() < 0.15
    assert np.all(np.abs(late.std(0) - 1.0) < 0.15)
    assert np.abs(np.asarray(norm_obs)).max() <= 10.0
    # final_observation is normalised with the same stats: equal to observation unless done.
    done = np.asarray(norm_ts.done)
    assert done.sum() == 3 * num_envs
    final = np.asarray(norm_ts.info["final_observation"])
    np.testing.assert_array_equal(final[~done], np.asarray(norm_obs)[~done])
    assert np.abs(final[done]).max() < 5.0 < np.abs(raw_ts.info["final_observation"]).max()

    # Frozen stats (an evaluator's view): loaded with replace, unchanged by steps.
    frozen = NormalizeObservation(raw_env, update=False)
    eval_state, _ = frozen.reset(jax.random.key(5))
    assert float(eval_state.stats.count) == 0
    eval_state = eval_state.replace(stats=stats)
    _, raw_ts = raw_env.step(eval_state.inner, actions[0])
    eval_state, ts = jax.jit(frozen.step)(eval_state, actions[0])
    for got, want in zip(jax.tree.leaves(eval_state.stats), jax.tree.leaves(stats), strict=True):
        np.testing.assert_array_equal(got, want)
    expected = np.clip((raw_ts.observation - stats.mean) / np.sqrt(stats.var + 1e-8), -10, 10)
    np.testing.assert_allclose(ts.observation, expected, rtol=1e-5, atol=1e-5)


# The physics envs are stepped through this stack in test_locomotion.py, one compile per env.
@pytest.mark.parametrize("name", sorted(set(registered_names()) - set(LOCOMOTION_ENVS)))
def test_training_stack_scans_without_nan(name):
    env = make_training_env(name, 16, action_repeat=2, normalize_observation=True)
    num_steps = 1000
    actions = _random_actions(env, jax.random.key(1), num_steps)

    @jax.jit
    def run(key):
        state, first = env.reset(key)
        state, ts = jax.lax.scan(env.step, state, actions)
        return first, ts

    first, ts = run(jax.random.key(0))
    keys = {"episode_return", "episode_length", "final_observation"}
    assert set(first.info) == set(ts.info) == keys
    for leaf in jax.tree.leaves((first, ts)):
        assert np.isfinite(np.asarray(leaf, np.float64)).all()
    assert ts.observation.shape == (num_steps, 16, *env.observation_space.shape)
    assert ts.done.any()
    assert not (ts.terminated & ts.truncated).any()
