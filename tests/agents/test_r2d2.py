"""R2D2 agent: value rescaling, TD targets against a numpy reference, burn-in, epsilons."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.r2d2 import (
    R2D2Agent,
    R2D2LossConfig,
    Sequences,
    epsilons,
    r2d2_loss,
    signed_hyperbolic_pair,
    td_errors,
)

EPS = 1e-3


def h_numpy(x):
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + EPS * x


def h_inv_numpy(y):
    # h is odd; for x >= 0 with s = sqrt(x + 1): eps*s^2 + s - (1 + eps + |y|) = 0.
    a = np.abs(y)
    s = (-1.0 + np.sqrt(1.0 + 4.0 * EPS * (1.0 + EPS + a))) / (2.0 * EPS)
    return np.sign(y) * (s * s - 1.0)


def test_value_rescaling_round_trip_and_formula():
    tx = signed_hyperbolic_pair(EPS)
    x = np.concatenate([-np.logspace(-4, 4, 200), [0.0], np.logspace(-4, 4, 200)]).astype(
        np.float32
    )
    np.testing.assert_allclose(
        np.asarray(tx.apply(jnp.asarray(x))), h_numpy(x), rtol=1e-5, atol=1e-6
    )
    round_trip = np.asarray(tx.apply_inv(tx.apply(jnp.asarray(x))))
    # float32: rlax's closed-form inverse loses ~1e-4 absolute to cancellation near 0.
    np.testing.assert_allclose(round_trip, x, rtol=1e-3, atol=5e-4)
    y = np.linspace(-50, 50, 101).astype(np.float32)
    np.testing.assert_allclose(
        np.asarray(tx.apply(tx.apply_inv(jnp.asarray(y)))), y, rtol=1e-4, atol=1e-4
    )
    np.testing.assert_allclose(h_inv_numpy(h_numpy(x.astype(np.float64))), x, rtol=1e-6, atol=1e-8)


def reference_td(q, action, next_q_target, next_q_online, reward, terminated, truncated, gamma, n):
    """Straight from the definitions, one target at a time (float64)."""
    T = len(reward)
    td = np.zeros(T)
    for t in range(T):
        ret, g = 0.0, 1.0
        for k in range(n):
            j = t + k
            ret += g * reward[j]
            boot = h_inv_numpy(next_q_target[j, np.argmax(next_q_online[j])])
            if terminated[j]:
                break  # no bootstrap
            if truncated[j] or k == n - 1 or j == T - 1:
                ret += g * gamma * boot  # truncation bootstraps from the final observation
                break
            g *= gamma
        td[t] = h_numpy(ret) - q[t, action[t]]
    return td


@pytest.mark.parametrize("n", [1, 3, 5])
def test_td_errors_match_numpy_reference(n):
    rng = np.random.default_rng(n)
    T, A, gamma = 12, 4, 0.97
    q = rng.normal(size=(T, A)).astype(np.float32)
    next_q_target = rng.normal(size=(T, A)).astype(np.float32) * 3
    next_q_online = rng.normal(size=(T, A)).astype(np.float32)
    action = rng.integers(0, A, size=T).astype(np.int32)
    reward = rng.normal(size=T).astype(np.float32) * 5
    terminated = np.zeros(T, bool)
    truncated = np.zeros(T, bool)
    terminated[3] = True
    truncated[7] = True
    terminated[T - 2] = True
    config = R2D2LossConfig(discount=gamma, n_step=n, value_rescaling_eps=EPS)
    got = td_errors(
        *map(jnp.asarray, (q, action, next_q_target, next_q_online, reward, terminated, truncated)),
        config,
    )
    want = reference_td(
        q,
        action,
        next_q_target.astype(np.float64),
        next_q_online,
        reward.astype(np.float64),
        terminated,
        truncated,
        gamma,
        n,
    )
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


def random_sequences(agent, key, S, L):
    k = jax.random.split(key, 6)
    obs = jax.random.normal(k[0], (S, L, *agent.obs_shape))
    next_obs = jax.random.normal(k[1], (S, L, *agent.obs_shape))
    is_first = jax.random.uniform(k[2], (S, L)) < 0.1
    action = jax.random.randint(k[3], (S, L), 0, agent.num_actions)
    reward = jax.random.normal(k[4], (S, L))
    prev_action = jnp.concatenate([jnp.zeros((S, 1), jnp.int32), action[:, :-1]], axis=1)
    prev_reward = jnp.concatenate([jnp.zeros((S, 1)), reward[:, :-1]], axis=1)
    terminated = jnp.concatenate([is_first[:, 1:], jnp.zeros((S, 1), bool)], axis=1)
    carry = jax.tree.map(lambda c: jax.random.normal(k[5], c.shape), agent.initial_carry(S))
    return Sequences(
        obs,
        next_obs,
        is_first,
        prev_action,
        prev_reward,
        action,
        reward,
        terminated,
        jnp.zeros((S, L), bool),
        carry,
    )


def test_no_gradient_through_burn_in():
    agent = R2D2Agent(obs_shape=(3,), num_actions=2, torso_sizes=(8,), lstm_size=8, head_size=8)
    params = agent.init(jax.random.PRNGKey(0))
    target = agent.init(jax.random.PRNGKey(1))
    batch = random_sequences(agent, jax.random.PRNGKey(2), S=4, L=10)
    config = R2D2LossConfig(discount=0.9, n_step=2, burn_in=4)
    weights = jnp.ones(4)

    def loss(obs, carry):
        sequences = batch._replace(observation=obs, start_carry=carry)
        return r2d2_loss(agent, params, target, sequences, weights, config)[0]

    # both gradients from one program: one compile
    obs_grad, carry_grad = jax.jit(jax.grad(loss, argnums=(0, 1)))(
        batch.observation, batch.start_carry
    )
    obs_grad = np.asarray(obs_grad)
    assert np.all(obs_grad[:, :4] == 0.0)  # burn-in: the carry is stop-gradient'ed
    assert np.any(obs_grad[:, 4:] != 0.0)
    assert all(np.all(np.asarray(g) == 0.0) for g in jax.tree.leaves(carry_grad))


def test_priorities_mix_max_and_mean_td():
    agent = R2D2Agent(obs_shape=(3,), num_actions=2, torso_sizes=(8,), lstm_size=8, head_size=8)
    params = agent.init(jax.random.PRNGKey(0))
    batch = random_sequences(agent, jax.random.PRNGKey(3), S=5, L=9)
    config = R2D2LossConfig(discount=0.9, n_step=3, burn_in=3, priority_eta=0.9)
    loss_fn = jax.jit(lambda w: r2d2_loss(agent, params, params, batch, w, config))
    loss, out = loss_fn(jnp.ones(5))
    assert out.priorities.shape == (5,)
    assert np.all(np.asarray(out.priorities) > 0) and np.isfinite(float(loss))
    # Importance weights scale each sequence's share of the loss.
    zero_first = jnp.ones(5).at[0].set(0.0)
    loss_w, _ = loss_fn(zero_first)
    only_first, _ = loss_fn(jnp.zeros(5).at[0].set(1.0))
    np.testing.assert_allclose(float(loss_w) + float(only_first), float(loss), rtol=1e-5)


def test_ape_x_epsilons():
    eps = epsilons(8)
    np.testing.assert_allclose(eps[0], 0.4, rtol=1e-6)
    np.testing.assert_allclose(eps[-1], 0.4**8, rtol=1e-5)
    np.testing.assert_allclose(eps, 0.4 ** (1 + 7 * np.arange(8) / 7), rtol=1e-5)
    assert epsilons(1).tolist() == pytest.approx([0.4])


def test_recurrence_removed_ignores_history():
    agent = R2D2Agent(
        obs_shape=(3,), num_actions=2, torso_sizes=(8,), lstm_size=8, head_size=8, recurrent=False
    )
    params = agent.init(jax.random.PRNGKey(0))
    obs = jnp.ones((2, 3))
    carry = jax.tree.map(lambda c: c + 5.0, agent.initial_carry(2))
    _, q1 = agent.step(
        params, carry, obs, jnp.array([0, 1]), jnp.array([3.0, -1.0]), jnp.zeros(2, bool)
    )
    _, q2 = agent.step(
        params,
        agent.initial_carry(2),
        obs,
        jnp.zeros(2, jnp.int32),
        jnp.zeros(2),
        jnp.ones(2, bool),
    )
    np.testing.assert_allclose(np.asarray(q1), np.asarray(q2), rtol=1e-6)
