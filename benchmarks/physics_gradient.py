"""Differentiable physics: the cost of a gradient through an Ant rollout, against the rollout.

Trajectory optimisation's basic call: the gradient of a final-state loss with respect to an
open-loop control sequence [N, 8], through N env steps of the Ant env's model and settings
(accelrl.envs.locomotion.Ant: 5 substeps of 0.01 s, contacts and joint limits, the deepest 8
contacts solved with 4 Newton steps). For each
(batch, N): compile time of the jitted, vmapped gradient, its steady-state wall time per call,
the same for the forward rollout alone, and their ratio (reverse mode's overhead). The
constraint solve is differentiated implicitly (physics/constraints.py), so the backward pass
holds one Cholesky solve per substep rather than the Newton iterations.
Writes results/physics_gradient.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import jax.numpy as jnp
import numpy as np
from common import load_average, machine_info, print_table, timer, write_result

import physics
from accelrl.envs.locomotion.ant import Ant


def best_seconds(f: Any, args: tuple, repeats: int) -> float:
    """Fastest of `repeats` timed calls (after compile), blocking on the result."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - start)
    return float(best)


def bench(batch: int, steps: int, repeats: int) -> dict[str, Any]:
    env = Ant()
    sys_ = env.sys

    def rollout(controls: jax.Array) -> jax.Array:
        def env_step(state: physics.State, ctrl: jax.Array) -> tuple[physics.State, None]:
            return physics.step(sys_, state, ctrl, n_substeps=env.frame_skip), None

        final, _ = jax.lax.scan(env_step, physics.init(sys_), controls)
        return jnp.sum(final.q[:2]) + 0.1 * jnp.sum(final.qd)  # torso x, y and the speeds

    forward = jax.jit(jax.vmap(rollout))
    gradient = jax.jit(jax.vmap(jax.grad(rollout)))
    rng = np.random.default_rng(0)
    controls = jnp.asarray(rng.uniform(-1, 1, (batch, steps, sys_.nu)), jnp.float32)
    with timer() as forward_compile:
        jax.block_until_ready(forward(controls))
    with timer() as gradient_compile:
        grads = jax.block_until_ready(gradient(controls))
    forward_s = best_seconds(forward, (controls,), repeats)
    gradient_s = best_seconds(gradient, (controls,), repeats)
    return {
        "batch": batch,
        "env_steps": steps,
        "forward_compile_s": forward_compile["wall"],
        "gradient_compile_s": gradient_compile["wall"],
        "forward_s": forward_s,
        "gradient_s": gradient_s,
        "gradient_finite": bool(np.all(np.isfinite(np.asarray(grads)))),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: batch 1, 10 steps")
    parser.add_argument("--batches", type=int, nargs="+")
    parser.add_argument("--steps", type=int, help="env steps per rollout (default 100)")
    parser.add_argument("--repeats", type=int)
    args = parser.parse_args(argv)
    batches = args.batches or ([1] if args.quick else [1, 16, 64])
    steps = args.steps or (10 if args.quick else 100)
    repeats = args.repeats or (1 if args.quick else 3)
    meta = machine_info()
    print(f"physics gradient: {meta['cpu_model']}, load {load_average()}", flush=True)
    results = []
    for batch in batches:
        r = bench(batch, steps, repeats)
        results.append(r)
        print(f"batch {batch}: gradient {r['gradient_s']:.3f} s per call", flush=True)
    columns = [
        "batch",
        "env steps",
        "forward compile s",
        "gradient compile s",
        "forward s",
        "gradient s",
        "gradient / forward",
        "gradient env steps/s",
        "finite",
    ]
    rows = [
        [
            r["batch"],
            r["env_steps"],
            round(r["forward_compile_s"], 1),
            round(r["gradient_compile_s"], 1),
            r["forward_s"],
            r["gradient_s"],
            r["gradient_s"] / r["forward_s"],
            round(r["batch"] * r["env_steps"] / r["gradient_s"]),
            r["gradient_finite"],
        ]
        for r in results
    ]
    print_table(columns, rows)
    write_result(
        "physics_gradient_quick" if args.quick else "physics_gradient",
        {
            "title": "Differentiable physics: gradient of an Ant rollout's final state "
            "with respect to its control sequence",
            "tables": [
                {
                    "title": "Gradient against forward rollout",
                    "columns": columns,
                    "rows": rows,
                    "note": "jax.grad of sum(torso x, y) + 0.1 sum(qvel) after N env steps "
                    "(5 substeps of 0.01 s each) with respect to the [N, 8] controls, "
                    "vmapped over the batch; best of the timed calls after compile.",
                }
            ],
            "results": results,
            "load_average_start": meta.get("load_average"),
            "load_average_end": load_average(),
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
