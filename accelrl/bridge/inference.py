"""Jitted inference for the bridge, with every slot's recurrent state resident on the device.

The learner's `policy_step(params, carry, inputs, slot_constants, key) -> (carry, outputs)`
(V-trace: sample from the policy; R2D2: epsilon-greedy on Q) runs for the slots of one batch:
their carries are gathered from the device-resident table, stepped and scattered back, so only
observations go up and actions come down. Batches are padded to power-of-two buckets (one
compiled program each, all compiled before serving); padding rows use a spare slot.

The hot path is kept short because the server calls it for every batch: the PRNG key stays on
the device (split inside the program), and the outputs and the carries the envs acted from
come back as ONE host array `[m, K]` (every leaf bitcast to 4-byte words and laid side by side)
that `Packed.rows` cuts into per-env views, instead of one transfer and one slice per leaf; and
the parameters go in as a tuple of leaves, flattened once per published version, and the inputs
as a tuple, so the call does not flatten (and sort the keys of) nested dicts every batch: on
the 2-core CPU host, with the bridge serving one actor of 32 envs, -18 us per batch (of ~200).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from physics.xla_cpu import NETWORK_COMPILE

PolicyStep = Callable[[Any, Any, dict, Any, jax.Array], tuple[Any, dict]]


def inline_cpu_dispatch() -> None:
    """Run XLA:CPU programs on the calling thread instead of handing each to a worker thread.

    The bridge's programs are tiny and called per batch, and on a loaded CPU host the hand-off
    costs more than the program (measured: a 2-layer MLP step 46 us inline, ~150 us handed
    off). XLA still releases the GIL while it runs. JAX reads the setting when its CPU backend
    starts, so this works only before the process's first computation (as in `accelrl serve`
    and `accelrl train`); afterwards it changes nothing.
    """
    jax.config.update("jax_cpu_enable_async_dispatch", False)


def buckets(max_batch: int) -> list[int]:
    """Padded batch sizes: powers of two below `max_batch`, then `max_batch`."""
    sizes, m = [], 1
    while m < max_batch:
        sizes.append(m)
        m *= 2
    return [*sizes, max_batch]


class _Leaf(NamedTuple):
    start: int  # first column in the packed array
    width: int  # columns (4-byte words per env)
    shape: tuple[int, ...]  # per-env shape
    dtype: np.dtype


def _layout(example: Any) -> tuple[list[_Leaf], Any]:
    """Columns of each leaf of `example` ([m, ...] shape structs) in the packed array."""
    leaves, treedef = jax.tree.flatten(example)
    layout, start = [], 0
    for leaf in leaves:
        dtype = np.dtype(leaf.dtype)
        if dtype.itemsize != 4:
            raise ValueError(f"acting outputs must have 4-byte dtypes to be packed, got {dtype}")
        width = int(np.prod(leaf.shape[1:], dtype=np.int64))
        layout.append(_Leaf(start, width, tuple(leaf.shape[1:]), dtype))
        start += width
    return layout, treedef


def _pack(tree: Any) -> jax.Array:
    """[m, K] float32: every leaf's 4-byte words side by side (inside jit)."""
    leaves = jax.tree.leaves(tree)
    m = leaves[0].shape[0]
    words = [jax.lax.bitcast_convert_type(x.reshape(m, -1), jnp.float32) for x in leaves]
    return jnp.concatenate(words, axis=1)


class Packed(NamedTuple):
    """The host copy of one batch's `(outputs, carry0)`, cut per env range on demand."""

    array: np.ndarray  # [bucket, K] float32
    layout: list[_Leaf]
    treedef: Any

    def rows(self, start: int, end: int) -> tuple[dict[str, np.ndarray], Any]:
        """`(outputs, carry0)` of rows start..end as views (no copy)."""
        block = self.array[start:end]
        n = end - start
        leaves = [
            block[:, leaf.start : leaf.start + leaf.width].view(leaf.dtype).reshape(n, *leaf.shape)
            for leaf in self.layout
        ]
        return jax.tree.unflatten(self.treedef, leaves)


class Inference:
    """Acting for up to `max_batch` slots at once out of `capacity`."""

    def __init__(
        self,
        policy_step: PolicyStep,
        initial_carry: Callable[[int], Any],
        capacity: int,
        max_batch: int,
        slot_constants: Any = (),
        seed: int = 0,
    ) -> None:
        """`slot_constants`: per-slot arrays ([capacity + 1, ...] leaves, e.g. epsilons) that
        `policy_step` receives for the batch's slots; `seed` seeds the acting PRNG key."""

        def step(params, carries, constants, slots, inputs, key):  # noqa: ANN001, ANN202
            carry0 = jax.tree.map(lambda x: x[slots], carries)
            mine = jax.tree.map(lambda x: x[slots], constants)
            carry1, outputs = policy_step(params, carry0, inputs, mine, key)
            carries = jax.tree.map(lambda x, n: x.at[slots].set(n), carries, carry1)
            return carries, (outputs, carry0)

        def infer(param_leaves, carries, constants, slots, input_values, key):  # noqa: ANN001, ANN202
            params = jax.tree.unflatten(self._params_treedef, param_leaves)
            inputs = dict(zip(self._input_names, input_values, strict=True))
            key, step_key = jax.random.split(key)
            carries, result = step(params, carries, constants, slots, inputs, step_key)
            return carries, key, _pack(result)

        self.capacity = capacity
        self._step = step
        self._infer = jax.jit(infer, donate_argnums=(1, 5), compiler_options=NETWORK_COMPILE)
        # One spare slot (index `capacity`) absorbs the padding rows of a batch.
        # (An LSTM's zero carry may hold one array twice: copy, as each leaf is donated.)
        self.carries = jax.tree.map(lambda x: jnp.array(x, copy=True), initial_carry(capacity + 1))
        self.constants = jax.device_put(slot_constants)
        self.key = jax.random.PRNGKey(seed)
        self.buckets = buckets(max_batch)
        self._layout: tuple[list[_Leaf], Any] | None = None
        self._input_names: tuple[str, ...] = ()  # the inputs' keys, fixed by the first call
        self._input_keys: frozenset[str] = frozenset()  # the same, for the per-call check
        self._params_treedef: Any = None
        self._flat_params: tuple[Any, tuple] = (None, ())  # (params, their leaves)

    def bucket(self, n: int) -> int:
        for m in self.buckets:
            if m >= n:
                return m
        return n

    def act(self, params: Any, slots: np.ndarray, inputs: dict) -> Packed:
        """`(outputs, carry0)` for `len(slots)` envs, packed (`Packed.rows`): per-env arrays,
        carry0 the state each env acted from. Rows are padded to a bucket size (is_first there,
        so padding never reads a real carry)."""
        n = len(slots)
        pad = self.bucket(n) - n
        if pad:
            slots = np.concatenate([slots, np.full(pad, self.capacity, slots.dtype)])
            fill = lambda x, v: np.concatenate([x, np.full((pad, *x.shape[1:]), v, x.dtype)])
            inputs = {k: fill(x, 1 if k == "is_first" else 0) for k, x in inputs.items()}
        if self._layout is None:
            self._layout = self._result_layout(params, slots, inputs)
            self._input_names = tuple(inputs)
            self._input_keys = frozenset(inputs)
        if inputs.keys() != self._input_keys:
            raise ValueError(f"inputs {sorted(inputs)}, expected {sorted(self._input_names)}")
        self.carries, self.key, packed = self._infer(
            self._param_leaves(params),
            self.carries,
            self.constants,
            slots,
            tuple(inputs[name] for name in self._input_names),
            self.key,
        )
        return Packed(np.asarray(packed), *self._layout)

    def _param_leaves(self, params: Any) -> tuple:
        """`params`' leaves, flattened once per parameters object (one per published
        version); every version must have the first one's structure."""
        cached, leaves = self._flat_params
        if params is not cached:
            flat, treedef = jax.tree.flatten(params)
            if self._params_treedef is None:
                self._params_treedef = treedef
            elif treedef != self._params_treedef:
                raise ValueError(
                    f"parameters changed structure: {treedef} where {self._params_treedef} was "
                    "compiled"
                )
            leaves = tuple(flat)
            self._flat_params = (params, leaves)
        return leaves

    def _result_layout(self, params: Any, slots: np.ndarray, inputs: dict) -> tuple:
        args = (params, self.carries, self.constants, slots, inputs, self.key)
        _, result = jax.eval_shape(self._step, *args)
        return _layout(result)

    def warm_up(self, params: Any, example_inputs: Callable[[int], dict]) -> None:
        """Compile every bucket size before serving (a compile mid-run would hold up every
        batch behind it); `example_inputs(m)` gives inputs for m envs."""
        for m in self.buckets:
            slots = np.full(m, self.capacity, np.int32)
            self.act(params, slots, example_inputs(m))
