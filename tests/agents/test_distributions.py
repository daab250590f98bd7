"""Distributions against numpy and against the change-of-variables density of bounded actions."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from agents.distributions import Categorical, ClippedGaussian, MultiCategorical, TanhGaussian

LOGITS = np.array([[0.5, -1.0, 2.0, 0.0], [3.0, 3.0, -2.0, 1.0]], np.float32)


def test_categorical_log_prob_entropy_mode_against_numpy():
    dist = Categorical(jnp.asarray(LOGITS))
    p = np.exp(LOGITS) / np.exp(LOGITS).sum(-1, keepdims=True)
    actions = np.array([2, 3])
    np.testing.assert_allclose(dist.log_prob(actions), np.log(p[[0, 1], actions]), rtol=1e-5)
    np.testing.assert_allclose(dist.entropy(), -(p * np.log(p)).sum(-1), rtol=1e-5)
    mode = dist.mode()
    assert mode.dtype == jnp.int32
    np.testing.assert_array_equal(mode, [2, 0])
    np.testing.assert_array_equal(dist.to_env(actions), actions)


def test_categorical_sample_frequencies():
    n = 40_000
    dist = Categorical(jnp.broadcast_to(jnp.asarray(LOGITS[0]), (n, 4)))
    a = dist.sample(jax.random.key(0))
    assert a.dtype == jnp.int32 and a.shape == (n,)
    p = np.exp(LOGITS[0]) / np.exp(LOGITS[0]).sum()
    np.testing.assert_allclose(np.bincount(np.asarray(a), minlength=4) / n, p, atol=0.01)


NVEC = (3, 1, 4)


def test_multi_categorical_sums_its_components_and_never_picks_padding():
    """Components laid out one after another in the flat logits: log-probability and entropy
    are the sums of each component's own categorical's (numpy), and the padding of the
    shorter components is never sampled nor the mode."""
    flat = np.array([[0.5, -1.0, 2.0, 7.0, 3.0, 3.0, -2.0, 1.0]], np.float32)
    dist = MultiCategorical.from_flat(jnp.asarray(flat), NVEC)
    parts = [flat[0, :3], flat[0, 3:4], flat[0, 4:]]
    probs = [np.exp(x) / np.exp(x).sum() for x in parts]
    action = np.array([[2, 0, 1]])
    expected = sum(np.log(p[a]) for p, a in zip(probs, action[0], strict=True))
    np.testing.assert_allclose(dist.log_prob(action), [expected], rtol=1e-5)
    entropy = sum(-(p * np.log(p)).sum() for p in probs)
    np.testing.assert_allclose(dist.entropy(), [entropy], rtol=1e-5)
    np.testing.assert_array_equal(dist.mode(), [[2, 0, 0]])
    n = 20_000
    samples = np.asarray(
        MultiCategorical(jnp.broadcast_to(dist.logits, (n, 3, 4))).sample(jax.random.key(0))
    )
    assert samples.dtype == np.int32 and samples.shape == (n, 3)
    for i, (size, p) in enumerate(zip(NVEC, probs, strict=True)):
        counts = np.bincount(samples[:, i], minlength=4)
        assert counts[size:].sum() == 0, (i, counts)
        np.testing.assert_allclose(counts[:size] / n, p, atol=0.015)


LOW = np.array([-1.0, 0.5], np.float32)
HIGH = np.array([2.0, 0.75], np.float32)
LOC = np.array([0.3, -0.8], np.float32)
LOG_SCALE = np.array([-0.2, 0.4], np.float32)


def tanh_gaussian(shape=()):
    bcast = lambda x: jnp.broadcast_to(jnp.asarray(x), (*shape, 2))
    return TanhGaussian(bcast(LOC), bcast(LOG_SCALE), jnp.asarray(LOW), jnp.asarray(HIGH))


def bounded_cdf(y, d):
    """P(Y_d <= y) for Y = low + (tanh(U) + 1)/2 (high - low), U ~ N(loc, scale), in float64."""
    with np.errstate(divide="ignore"):  # the box edges map to u = -inf, +inf
        u = np.arctanh(2 * (y - LOW[d]) / (HIGH[d] - LOW[d]) - 1)
    z = (u - LOC[d]) / np.exp(LOG_SCALE[d])
    return 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))


def test_tanh_gaussian_log_prob_is_density_of_bounded_action():
    # Density of the bounded action from finite differences of its CDF, per (independent) dim.
    rng = np.random.default_rng(0)
    u = rng.normal(LOC, np.exp(LOG_SCALE), size=(50, 2)).astype(np.float32)
    dist = tanh_gaussian((50,))
    y = np.asarray(dist.to_env(u), np.float64)
    log_density = np.zeros(50)
    for d in range(2):
        h = 1e-6 * (HIGH[d] - LOW[d])
        pdf = (bounded_cdf(y[:, d] + h, d) - bounded_cdf(y[:, d] - h, d)) / (2 * h)
        log_density += np.log(pdf)
    np.testing.assert_allclose(dist.log_prob(u), log_density, rtol=1e-3, atol=1e-3)


def test_tanh_gaussian_samples_are_bounded_and_match_histogram():
    n = 100_000
    dist = tanh_gaussian((n,))
    u = dist.sample(jax.random.key(1))
    y = np.asarray(dist.to_env(u))
    assert np.all(y >= LOW) and np.all(y <= HIGH)
    edges = np.linspace(LOW[0], HIGH[0], 11)
    freq = np.histogram(y[:, 0], edges)[0] / n
    np.testing.assert_allclose(freq, np.diff(bounded_cdf(edges, 0)), atol=0.005)


def test_tanh_gaussian_is_stable_for_saturated_and_extreme_inputs():
    dist = TanhGaussian(
        jnp.zeros(2), jnp.array([-100.0, 100.0]), jnp.asarray(LOW), jnp.asarray(HIGH)
    )
    u = jnp.array([40.0, -40.0])
    assert np.isfinite(dist.log_prob(u))
    assert np.all(np.isfinite(jax.grad(lambda x: dist.log_prob(x))(u)))
    assert np.all(np.isfinite(dist.entropy(jax.random.key(0))))
    y = dist.to_env(u)
    np.testing.assert_allclose(y, [HIGH[0], LOW[1]])


def test_tanh_gaussian_entropy_estimate_is_unbiased():
    # Mean of the one-sample estimate equals -E[log p(Y)] estimated from independent samples.
    n = 200_000
    dist = tanh_gaussian((n,))
    k1, k2 = jax.random.split(jax.random.key(2))
    entropy = float(jnp.mean(dist.entropy(k1)))
    neg_log_p = float(-jnp.mean(dist.log_prob(dist.sample(k2))))
    assert abs(entropy - neg_log_p) < 0.02
    assert dist.entropy(k1).shape == (n,)


def test_tanh_gaussian_mode_and_shapes():
    dist = tanh_gaussian((3, 4))
    u = dist.sample(jax.random.key(3))
    assert u.shape == (3, 4, 2) and dist.log_prob(u).shape == (3, 4)
    np.testing.assert_array_equal(dist.mode(), np.broadcast_to(LOC, (3, 4, 2)))


def test_clipped_gaussian_density_entropy_and_clipping_against_numpy():
    """The unclipped sample's Gaussian log-density and exact entropy; the env gets the sample
    clipped to the finite bounds only."""
    low, high = np.array([-np.inf, 0.0], np.float32), np.array([np.inf, np.inf], np.float32)
    dist = ClippedGaussian(jnp.asarray(LOC), jnp.asarray(LOG_SCALE), low, high)
    a = np.array([1.5, -2.0], np.float32)
    scale = np.exp(LOG_SCALE)
    expected = np.sum(-0.5 * ((a - LOC) / scale) ** 2 - np.log(scale * np.sqrt(2 * np.pi)))
    np.testing.assert_allclose(dist.log_prob(a), expected, rtol=1e-5)
    np.testing.assert_allclose(dist.entropy(), np.sum(0.5 + np.log(scale * np.sqrt(2 * np.pi))))
    np.testing.assert_array_equal(dist.to_env(a), [1.5, 0.0])
    n = 20_000
    samples = ClippedGaussian(*(jnp.broadcast_to(x, (n, 2)) for x in dist)).sample(
        jax.random.key(1)
    )
    np.testing.assert_allclose(samples.mean(0), LOC, atol=0.03)
    np.testing.assert_allclose(samples.std(0), scale, rtol=0.03)
