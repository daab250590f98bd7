"""R2D2 in the fused step: replay sampling cost vs capacity, and training throughput.

    .venv/bin/python benchmarks/r2d2.py           # full run
    .venv/bin/python benchmarks/r2d2.py --quick   # fewer configurations (CPU smoke run)

Writes benchmarks/results/r2d2.json and .md (r2d2_quick.* with --quick).

1. Replay operations alone: one prioritised sample of `batch` items plus the priority update
   of those items (the work of one learner update on the replay), jitted and looped on the
   device, at 1e4..1e6 items; beside it a linear-time baseline (cumulative sum over all
   priorities + searchsorted) doing the same job. The sum tree's cost follows log(capacity).
2. The whole fused R2D2 step on CartPole (preset cartpole_r2d2) at replay capacities of
   1e4..1e6 stored transitions (capacity in sequences x sequence length) and two batch sizes:
   env steps/s and learner updates/s after compile, and the replay's bytes on the device.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    # the repo root before benchmarks/, whose physics.py would shadow the physics package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import jax.numpy as jnp
from common import load_average, machine_info, print_table, write_result

from accelrl import replay
from accelrl.config import apply_overrides
from accelrl.fused import make_fused_trainer
from accelrl.fused_r2d2 import updates_per_iteration
from configs import load_preset


def _best_time(fn, *args, repeats: int = 3) -> float:
    jax.block_until_ready(fn(*args))  # compile + warm up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best


def replay_ops(capacities: list[int], batch: int, loops: int) -> list[list]:
    """Microseconds per (sample + priority update) for the sum tree and a linear baseline."""
    rows = []
    alpha = 0.9
    for capacity in capacities:
        state = replay.init({"i": jnp.zeros((), jnp.int32)}, capacity)
        priorities = jax.random.uniform(jax.random.PRNGKey(0), (capacity,), minval=0.1)
        state = state._replace(
            tree=replay.set_tree_values(state.tree, jnp.arange(capacity), priorities**alpha),
            size=jnp.asarray(capacity, jnp.int32),
        )

        @jax.jit
        def tree_loop(state: replay.ReplayState, key: jax.Array) -> replay.ReplayState:
            def body(i: int, state: replay.ReplayState) -> replay.ReplayState:
                index, _, _ = replay.sample(state, jax.random.fold_in(key, i), batch)
                new = jax.random.uniform(jax.random.fold_in(key, -i), (batch,), minval=0.1)
                return replay.update_priorities(state, index, new, alpha)

            return jax.lax.fori_loop(0, loops, body, state)

        @jax.jit
        def linear_loop(p: jax.Array, key: jax.Array) -> jax.Array:
            def body(i: int, p: jax.Array) -> jax.Array:
                cumsum = jnp.cumsum(p)
                u = jax.random.uniform(jax.random.fold_in(key, i), (batch,)) * cumsum[-1]
                index = jnp.searchsorted(cumsum, u)
                new = jax.random.uniform(jax.random.fold_in(key, -i), (batch,), minval=0.1)
                return p.at[index].set(new**alpha)

            return jax.lax.fori_loop(0, loops, body, p)

        key = jax.random.PRNGKey(1)
        tree_us = _best_time(tree_loop, state, key) / loops * 1e6
        linear_us = _best_time(linear_loop, priorities**alpha, key) / loops * 1e6
        rows.append([capacity, batch, tree_us, linear_us])
        print_table(["items", "batch", "sum tree us/op", "linear us/op"], [rows[-1]])
    return rows


def fused_throughput(
    transitions: list[int], batches: list[int], chunks: int, extra: list[str]
) -> list[list]:
    rows = []
    base = load_preset("cartpole_r2d2")
    length = base.r2d2.burn_in + base.r2d2.trace_length
    for capacity_steps in transitions:
        for batch in batches:
            sequences = max(capacity_steps // length, base.env.num_envs)
            config = apply_overrides(
                base,
                [
                    f"r2d2.replay_capacity={sequences}",
                    f"r2d2.batch_size={batch}",
                    f"r2d2.replay_ratio={batch * 2 / base.env.num_envs}",  # 2 updates/iter
                    f"r2d2.min_replay_size={min(batch, sequences)}",
                    *extra,
                ],
            )
            trainer = make_fused_trainer(config)
            state = trainer.init(jax.random.PRNGKey(0))
            replay_bytes = replay.nbytes(state.replay)
            start = time.perf_counter()
            run_chunk = trainer.compile_chunk(state)
            compile_s = time.perf_counter() - start
            state, _ = run_chunk(state)  # past the minimum fill
            jax.block_until_ready(state)
            best = float("inf")
            for _ in range(chunks):
                start = time.perf_counter()
                state, metrics = run_chunk(state)
                jax.block_until_ready(state)
                best = min(best, time.perf_counter() - start)
            iterations = config.iterations_per_chunk
            updates = updates_per_iteration(config) * iterations
            row = [
                capacity_steps,
                sequences,
                batch,
                replay_bytes / 2**20,
                compile_s,
                trainer.steps_per_chunk / best,
                updates / best,
                float(jax.device_get(metrics.losses["loss"])),
            ]
            rows.append(row)
            print_table(COLUMNS, [row])
    return rows


COLUMNS = [
    "stored transitions",
    "sequences",
    "batch",
    "replay MiB",
    "compile s",
    "env steps/s",
    "updates/s",
    "loss",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--replay-only", action="store_true", help="skip the fused-step table")
    args = parser.parse_args()
    meta = machine_info()
    if args.quick:
        capacities, loops = [10_000, 100_000, 1_000_000], 50
        transitions, batches, chunks = [10_000, 1_000_000], [32], 2
    else:
        capacities, loops = [10_000, 30_000, 100_000, 300_000, 1_000_000], 200
        transitions, batches, chunks = [10_000, 100_000, 1_000_000], [32, 64], 3
    ops = replay_ops(capacities, batch=64, loops=loops)
    fused = [] if args.replay_only else fused_throughput(transitions, batches, chunks, extra=[])
    payload = {
        "title": "R2D2: replay sampling vs capacity, fused-step throughput (CartPole)",
        "meta": meta,
        "quick": args.quick,
        "tables": [
            {
                "title": "Replay: one prioritised sample of 64 + priority update",
                "columns": ["items", "batch", "sum tree us/op", "linear us/op"],
                "rows": ops,
                "note": "Sum tree: O(batch * log capacity); linear: cumsum over every priority.",
            },
            {
                "title": "Fused R2D2 step, cartpole_r2d2 (8 envs x 4 steps, 2 updates/iteration)",
                "columns": COLUMNS,
                "rows": fused,
                "note": "Stored transitions = sequences x (burn-in + trace) = sequences x 24; "
                "best of a few chunks after compile and one warm-up chunk.",
            },
        ],
        "notes": [f"load average at end: {load_average()}"],
    }
    name = "r2d2_quick" if args.quick else "r2d2"
    json_path, _ = write_result(name + ("_replay" if args.replay_only else ""), payload)
    print(f"wrote {json_path}")


if __name__ == "__main__":
    main()
