"""The device replay: sum tree, ring insertion, prioritised sampling frequencies."""

import jax
import jax.numpy as jnp
import numpy as np

from accelrl import replay


def chi2_critical(df, z=3.719):
    """Upper quantile of chi-square(df) (Wilson-Hilferty; z=3.719 is p = 1e-4)."""
    return df * (1 - 2 / (9 * df) + z * np.sqrt(2 / (9 * df))) ** 3


def test_sum_tree_totals_and_prefix_search():
    rng = np.random.default_rng(0)
    values = rng.uniform(0, 2, size=37).astype(np.float32)
    values[[3, 10, 11]] = 0.0
    tree = jnp.zeros(2 * replay.tree_size(37), jnp.float32)
    tree = replay.set_tree_values(tree, jnp.arange(37), jnp.asarray(values))
    np.testing.assert_allclose(float(tree[1]), values.sum(), rtol=1e-5)
    cumsum = np.cumsum(values.astype(np.float64))
    mass = rng.uniform(0, cumsum[-1], size=500)
    got = np.asarray(replay.find_prefix(tree, jnp.asarray(mass, jnp.float32)))
    want = np.searchsorted(cumsum, mass, side="right")
    agree = got == want
    # float32 sums may disagree exactly at a boundary; never on a zero-priority leaf.
    assert agree.mean() > 0.99
    assert not np.isin(got, [3, 10, 11]).any()
    # Duplicate indices in one update are consistent.
    tree = replay.set_tree_values(tree, jnp.array([5, 5, 6]), jnp.array([1.0, 1.0, 0.5]))
    values[5], values[6] = 1.0, 0.5
    np.testing.assert_allclose(float(tree[1]), values.sum(), rtol=1e-5)


def test_ring_insertion_wraps_and_counts_valid_items():
    state = replay.init({"x": jnp.zeros((2,))}, capacity=5)
    for start in range(0, 12, 3):
        items = {"x": jnp.arange(start, start + 3, dtype=jnp.float32)[:, None] * jnp.ones(2)}
        valid = jnp.array([start > 0] * 3)
        state = replay.insert(state, items, valid, alpha=0.9)
    # 12 items written into 5 slots: slot i holds the last item i (mod 5).
    np.testing.assert_array_equal(np.asarray(state.items["x"][:, 0]), [10, 11, 7, 8, 9])
    assert int(state.size) == 5 and int(state.next_index) == 2
    np.testing.assert_allclose(float(state.tree[1]), 5.0, rtol=1e-6)  # max priority 1


def test_sampling_frequencies_match_priority_to_the_alpha():
    alpha, capacity, batch, rounds = 0.9, 20, 64, 400
    rng = np.random.default_rng(1)
    priorities = rng.uniform(0.05, 3.0, size=capacity).astype(np.float32)
    priorities[4] = 0.0  # never sampled
    state = replay.init({"i": jnp.zeros((), jnp.int32)}, capacity)
    state = replay.insert(state, {"i": jnp.arange(capacity)}, jnp.ones(capacity, bool), alpha)
    state = replay.update_priorities(state, jnp.arange(capacity), jnp.asarray(priorities), alpha)

    @jax.jit
    def draw(key):
        index, prob, items = replay.sample(state, key, batch)
        return index, prob, items["i"]

    counts = np.zeros(capacity)
    for key in jax.random.split(jax.random.PRNGKey(0), rounds):
        index, prob, item = map(np.asarray, draw(key))
        np.testing.assert_array_equal(index, item)
        counts += np.bincount(index, minlength=capacity)
    expected_p = np.where(priorities > 0, np.maximum(priorities, 1e-6) ** alpha, 0.0)
    expected_p /= expected_p.sum()
    np.testing.assert_allclose(prob, expected_p[index], rtol=1e-4)
    assert counts[4] == 0
    nz = expected_p > 0
    expected = expected_p[nz] * counts.sum()
    chi2 = np.sum((counts[nz] - expected) ** 2 / expected)
    assert chi2 < chi2_critical(nz.sum() - 1), chi2
    # ...and the frequencies are those of priority**alpha, not of the raw priorities.
    raw = priorities[nz] / priorities[nz].sum() * counts.sum()
    assert np.sum((counts[nz] - raw) ** 2 / raw) > chi2_critical(nz.sum() - 1)
