"""V-trace targets against a numpy reference written from the IMPALA paper's definition."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

from agents import vtrace

vtrace_returns = jax.jit(vtrace.vtrace_returns, static_argnums=6)
VTraceConfig = vtrace.VTraceConfig


def reference_1d(values, next_values, rewards, terminated, truncated, rhos, cfg):
    """IMPALA eq. (1) per episode segment, by explicit sums (no recursion).

    v_s = V(x_s) + sum_{t=s}^{end} gamma^{t-s} (prod_{i=s}^{t-1} c_i) delta_t, with
    delta_t = min(rho_bar, rho_t) (r_t + gamma V(x_{t+1}) - V(x_t)) and c_i = lambda min(1, rho_i),
    where `end` is the first episode end at or after s (or the last step) and V(x_{t+1}) is 0
    after a termination and V(final observation) after a truncation or at the unroll's end.
    """
    T = len(values)
    done = terminated | truncated
    gamma, lam = cfg.discount, cfg.lambda_

    def value_after(t):
        if terminated[t]:
            return 0.0
        if truncated[t] or t == T - 1:
            return next_values[t]
        return values[t + 1]

    delta = [
        min(cfg.clip_rho, rhos[t]) * (rewards[t] + gamma * value_after(t) - values[t])
        for t in range(T)
    ]
    c = [lam * min(1.0, r) for r in rhos]
    vs = np.zeros(T)
    for s in range(T):
        end = next((t for t in range(s, T) if done[t]), T - 1)
        total = 0.0
        for t in range(s, end + 1):
            total += gamma ** (t - s) * np.prod(c[s:t]) * delta[t]
        vs[s] = values[s] + total

    adv = np.zeros(T)
    for s in range(T):
        if terminated[s]:
            q_next = 0.0
        elif truncated[s] or s == T - 1:
            q_next = next_values[s]
        else:
            q_next = lam * vs[s + 1] + (1 - lam) * values[s + 1]
        adv[s] = min(cfg.clip_pg_rho, rhos[s]) * (rewards[s] + gamma * q_next - values[s])
    return vs, adv


def make_batch(rng, T=12):
    """Three columns: term at 3 and trunc at 7; trunc at 2 and term at 9; no episode end."""
    B = 3
    terminated = np.zeros((T, B), bool)
    truncated = np.zeros((T, B), bool)
    terminated[3, 0] = truncated[7, 0] = True
    truncated[2, 1] = terminated[9, 1] = True
    values = rng.normal(size=(T, B))
    # V(next_observation): equals V(observation[t+1]) inside an episode, the value of the final
    # observation (a different state) at episode ends and at the last step.
    next_values = np.concatenate([values[1:], rng.normal(size=(1, B))])
    done = terminated | truncated
    next_values[done] = rng.normal(size=done.sum())
    rewards = rng.normal(size=(T, B))
    rhos = rng.uniform(0.2, 2.0, size=(T, B))
    return values, next_values, rewards, terminated, truncated, rhos


CONFIGS = [
    VTraceConfig(discount=0.9),
    VTraceConfig(discount=0.95, lambda_=0.7),
    VTraceConfig(discount=0.9, lambda_=0.5, clip_rho=1.5, clip_pg_rho=0.8),
]


@pytest.mark.parametrize("cfg", CONFIGS)
def test_matches_paper_definition_across_episode_ends(cfg):
    rng = np.random.default_rng(0)
    values, next_values, rewards, terminated, truncated, rhos = make_batch(rng)
    f32 = lambda x: jnp.asarray(x, jnp.float32)
    out = vtrace_returns(
        f32(values),
        f32(next_values),
        f32(rewards),
        jnp.asarray(terminated),
        jnp.asarray(truncated),
        f32(rhos),
        cfg,
    )
    for b in range(values.shape[1]):
        vs, adv = reference_1d(
            values[:, b],
            next_values[:, b],
            rewards[:, b],
            terminated[:, b],
            truncated[:, b],
            rhos[:, b],
            cfg,
        )
        np.testing.assert_allclose(out.vs[:, b], vs, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(out.pg_advantages[:, b], adv, atol=1e-5, rtol=1e-5)
        # q_advantages: the same advantage before the clipped importance weight.
        pg_rhos = np.minimum(cfg.clip_pg_rho, rhos[:, b])
        np.testing.assert_allclose(out.q_advantages[:, b] * pg_rhos, adv, atol=1e-5, rtol=1e-5)


def test_truncation_bootstraps_and_termination_does_not():
    cfg = VTraceConfig(discount=0.9)
    ones = jnp.ones((1, 1))
    zeros = jnp.zeros((1, 1), bool)
    trunc = vtrace_returns(0 * ones, 2 * ones, ones, zeros, ~zeros, ones, cfg)
    term = vtrace_returns(0 * ones, 2 * ones, ones, ~zeros, zeros, ones, cfg)
    np.testing.assert_allclose(trunc.vs, [[1 + 0.9 * 2]], rtol=1e-6)
    np.testing.assert_allclose(term.vs, [[1.0]], rtol=1e-6)


def test_without_episode_ends_matches_rlax():
    rng = np.random.default_rng(1)
    T, B = 10, 2
    values = rng.normal(size=(T + 1, B)).astype(np.float32)
    rewards = rng.normal(size=(T, B)).astype(np.float32)
    rhos = rng.uniform(0.2, 2.0, size=(T, B)).astype(np.float32)
    cfg = VTraceConfig(discount=0.9, lambda_=0.8)
    no_end = jnp.zeros((T, B), bool)
    out = vtrace_returns(values[:-1], values[1:], rewards, no_end, no_end, rhos, cfg)
    for b in range(B):
        expected = jax.jit(rlax.vtrace_td_error_and_advantage)(
            values[:-1, b],
            values[1:, b],
            rewards[:, b],
            np.full(T, 0.9, np.float32),
            rhos[:, b],
            lambda_=0.8,
        )
        np.testing.assert_allclose(out.vs[:, b], expected.errors + values[:-1, b], atol=1e-5)
        np.testing.assert_allclose(out.pg_advantages[:, b], expected.pg_advantage, atol=1e-5)


def test_outputs_carry_no_gradient():
    rng = np.random.default_rng(2)
    values, next_values, rewards, terminated, truncated, rhos = (
        jnp.asarray(x) if x.dtype == bool else jnp.asarray(x, jnp.float32) for x in make_batch(rng)
    )

    def total(v, nv, r):
        out = vtrace_returns(v, nv, r, terminated, truncated, r * 0 + rhos, VTraceConfig())
        return jnp.sum(out.vs) + jnp.sum(out.pg_advantages)

    grads = jax.jit(jax.grad(total, argnums=(0, 1, 2)))(values, next_values, rewards)
    for g in grads:
        np.testing.assert_array_equal(g, 0.0)
