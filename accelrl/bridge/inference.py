"""Jitted inference for the bridge, with every slot's recurrent state resident on the device.

The learner's `policy_step(params, carry, inputs, slot_constants, key) -> (carry, outputs)`
(V-trace: sample from the policy; R2D2: epsilon-greedy on Q) runs for the slots of one batch:
their carries are gathered from the device-resident table, stepped and scattered back, so only
observations go up and actions come down. Batches are padded to power-of-two buckets (one
compiled program each, all compiled before serving); padding rows use a spare slot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

PolicyStep = Callable[[Any, Any, dict, Any, jax.Array], tuple[Any, dict]]


def buckets(max_batch: int) -> list[int]:
    """Padded batch sizes: powers of two below `max_batch`, then `max_batch`."""
    sizes, m = [], 1
    while m < max_batch:
        sizes.append(m)
        m *= 2
    return [*sizes, max_batch]


class Inference:
    """Acting for up to `max_batch` slots at once out of `capacity`."""

    def __init__(
        self,
        policy_step: PolicyStep,
        initial_carry: Callable[[int], Any],
        capacity: int,
        max_batch: int,
        slot_constants: Any = (),
    ) -> None:
        """`slot_constants`: per-slot arrays ([capacity + 1, ...] leaves, e.g. epsilons) that
        `policy_step` receives for the batch's slots."""

        def infer(
            params: Any,
            carries: Any,
            constants: Any,
            slots: jax.Array,
            inputs: dict,
            key: jax.Array,
            counter: jax.Array,
        ) -> tuple:
            key = jax.random.fold_in(key, counter)
            carry0 = jax.tree.map(lambda x: x[slots], carries)
            mine = jax.tree.map(lambda x: x[slots], constants)
            carry1, outputs = policy_step(params, carry0, inputs, mine, key)
            carries = jax.tree.map(lambda x, n: x.at[slots].set(n), carries, carry1)
            return carries, outputs, carry0

        self.capacity = capacity
        self._infer = jax.jit(infer, donate_argnums=1)
        # One spare slot (index `capacity`) absorbs the padding rows of a batch.
        # (An LSTM's zero carry may hold one array twice: copy, as each leaf is donated.)
        self.carries = jax.tree.map(lambda x: jnp.array(x, copy=True), initial_carry(capacity + 1))
        self.constants = jax.device_put(slot_constants)
        self.buckets = buckets(max_batch)

    def bucket(self, n: int) -> int:
        for m in self.buckets:
            if m >= n:
                return m
        return n

    def act(
        self, params: Any, slots: np.ndarray, inputs: dict, key: jax.Array, counter: int = 0
    ) -> tuple[dict[str, np.ndarray], Any]:
        """`(outputs, carry0)` for `len(slots)` envs: per-env arrays, carry0 the state each env
        acted from. Rows are padded to a bucket size (is_first there, so padding never reads a
        real carry)."""
        n = len(slots)
        pad = self.bucket(n) - n
        if pad:
            slots = np.concatenate([slots, np.full(pad, self.capacity, slots.dtype)])
            fill = lambda x, v: np.concatenate([x, np.full((pad, *x.shape[1:]), v, x.dtype)])
            inputs = {k: fill(x, 1 if k == "is_first" else 0) for k, x in inputs.items()}
        self.carries, outputs, carry0 = self._infer(
            params, self.carries, self.constants, slots, inputs, key, np.int32(counter)
        )
        outputs, carry0 = jax.device_get((outputs, carry0))
        return jax.tree.map(lambda x: x[:n], (outputs, carry0))

    def warm_up(self, params: Any, example_inputs: Callable[[int], dict]) -> None:
        """Compile every bucket size before serving (a compile mid-run would hold up every
        batch behind it); `example_inputs(m)` gives inputs for m envs."""
        for m in self.buckets:
            slots = np.full(m, self.capacity, np.int32)
            self.act(params, slots, example_inputs(m), jax.random.PRNGKey(0))
