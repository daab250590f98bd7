"""Prioritised replay on the device: a fixed-capacity ring of items with a sum tree.

Pure functions on a `ReplayState` pytree, for use inside jit (the fused step keeps one per
device shard and vmaps these functions over the shard axis). Items are any pytree of arrays
with a leading capacity axis. Priorities live in a sum tree stored as one array: node 1 is the
root, node k has children 2k and 2k+1, and the leaves (items) are nodes P..P+C-1 for
P = the power of two >= C. Updating and sampling walk one root-leaf path per item with a
fixed-depth `fori_loop`, so both cost O(batch * log C), not O(C).

The tree holds priority**alpha (`insert` and `update_priorities` take the exponent alpha); an
item of priority 0 is never sampled (used for sequences not yet fully collected).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class ReplayState(NamedTuple):
    items: Any  # pytree, every leaf [C, ...]
    tree: jax.Array  # [2P] float32 sum tree (node 0 unused)
    next_index: jax.Array  # int32 ring position of the next insertion
    size: jax.Array  # int32 items inserted with nonzero priority, capped at C
    max_priority: jax.Array  # float32 largest priority seen (new items get it)


def tree_size(capacity: int) -> int:
    """P: the number of leaves of the sum tree (the power of two >= capacity)."""
    return 1 << max(0, (capacity - 1).bit_length())


def init(example_item: Any, capacity: int) -> ReplayState:
    """Empty replay for items shaped like `example_item` (one item, no capacity axis)."""
    items = jax.tree.map(
        lambda x: jnp.zeros((capacity, *jnp.shape(x)), jnp.asarray(x).dtype), example_item
    )
    return ReplayState(
        items=items,
        tree=jnp.zeros((2 * tree_size(capacity),), jnp.float32),
        next_index=jnp.zeros((), jnp.int32),
        size=jnp.zeros((), jnp.int32),
        max_priority=jnp.ones((), jnp.float32),
    )


def capacity_of(state: ReplayState) -> int:
    return jax.tree.leaves(state.items)[0].shape[0]


def set_tree_values(tree: jax.Array, index: jax.Array, values: jax.Array) -> jax.Array:
    """Leaf `index` [k] gets `values` [k]; every ancestor is recomputed from its children.

    Duplicate indices are fine: a parent is always the sum of its (already updated) children.
    """
    leaves = tree.shape[0] // 2
    depth = leaves.bit_length() - 1
    node = index.astype(jnp.int32) + leaves
    tree = tree.at[node].set(values.astype(tree.dtype))

    # One loop over the levels rather than `depth` straight-line copies of the scatter: 70
    # fewer kernels in cartpole_r2d2's step (543, compile ~25% shorter); the tree stays in place.
    def level(_: int, carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        tree, node = carry
        node = node // 2
        return tree.at[node].set(tree[2 * node] + tree[2 * node + 1]), node

    tree, _ = jax.lax.fori_loop(0, depth, level, (tree, node))
    return tree


def find_prefix(tree: jax.Array, mass: jax.Array) -> jax.Array:
    """For each `mass` [k] in [0, total): the leaf i with cumsum[i-1] <= mass < cumsum[i].

    Never descends into a subtree of zero mass (guards against float rounding at the edges).
    """
    leaves = tree.shape[0] // 2
    depth = leaves.bit_length() - 1

    def level(_: int, carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        node, mass = carry
        left = tree[2 * node]
        right = tree[2 * node + 1]
        go_right = jnp.logical_or(jnp.logical_and(mass >= left, right > 0), left <= 0)
        return 2 * node + go_right, jnp.where(go_right, mass - left, mass)

    node = jnp.ones(mass.shape, jnp.int32)
    node, _ = jax.lax.fori_loop(0, depth, level, (node, mass.astype(tree.dtype)))
    return node - leaves


def insert(state: ReplayState, items: Any, valid: jax.Array, alpha: float) -> ReplayState:
    """Write `items` (leaves [k, ...]) at the ring position; valid ones get the max priority,
    the others priority 0 (never sampled, not counted in `size`). Needs k <= capacity."""
    capacity = capacity_of(state)
    k = valid.shape[0]
    index = (state.next_index + jnp.arange(k, dtype=jnp.int32)) % capacity
    new_items = jax.tree.map(lambda buf, x: buf.at[index].set(x), state.items, items)
    values = jnp.where(valid, state.max_priority**alpha, 0.0)
    return state._replace(
        items=new_items,
        tree=set_tree_values(state.tree, index, values),
        next_index=(state.next_index + k) % capacity,
        size=jnp.minimum(state.size + jnp.sum(valid, dtype=jnp.int32), capacity),
    )


def sample(state: ReplayState, key: jax.Array, batch_size: int) -> tuple[jax.Array, jax.Array, Any]:
    """Stratified prioritised sample: `(index [b], probability [b], items [b, ...])`.

    Sample j is drawn uniformly from the j-th of `batch_size` equal slices of the total mass,
    so P(item i) = tree_value_i / total for every draw (PER's stratified sampling).
    """
    total = state.tree[1]
    u = (jnp.arange(batch_size) + jax.random.uniform(key, (batch_size,))) / batch_size
    index = find_prefix(state.tree, u * total)
    index = jnp.minimum(index, capacity_of(state) - 1)
    leaves = state.tree.shape[0] // 2
    probability = state.tree[index + leaves] / jnp.maximum(total, 1e-30)
    items = jax.tree.map(lambda buf: buf[index], state.items)
    return index, probability, items


def update_priorities(
    state: ReplayState, index: jax.Array, priorities: jax.Array, alpha: float
) -> ReplayState:
    """Set the priorities (before the exponent) of the items at `index`."""
    priorities = jnp.maximum(priorities, 1e-6)
    return state._replace(
        tree=set_tree_values(state.tree, index, priorities**alpha),
        max_priority=jnp.maximum(state.max_priority, jnp.max(priorities)),
    )


def nbytes(state: ReplayState) -> int:
    """Bytes held by a replay state (or its `jax.eval_shape`)."""
    return sum(int(x.size) * x.dtype.itemsize for x in jax.tree.leaves(state))
