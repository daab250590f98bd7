"""Physics engine throughput: Ant env steps/s with contacts and joint limits, against MuJoCo C.

An env step is 5 substeps of 0.01 s (gymnasium's Ant frame_skip with the XML timestep) with
random controls in the ctrl range (fixed per world), so the legs hit the floor and the joint
limits: every substep runs collision of all 13 candidate geom pairs (25 contact slots), the 16
joint-limit rows and the fixed-count Newton constraint solver on the 8 deepest contacts (as the
locomotion envs load it; Ant has at most ~6 active, so this equals solving all 25). For each
batch size: compile time (wall and CPU) of the jitted, vmapped 5-substep step, and steady-state
env steps/s (best of --repeats blocks of at least --min-seconds). MuJoCo C is a single-thread
mj_step loop on the same model with the same integrator (Euler), pyramidal cone and its default
Newton solver, with the same kind of controls, so both sides do the same work. Brax's and MJX's
ant run as peers when the optional ``peers`` extra is importable; otherwise the JSON records
why they were skipped.
Writes results/physics.{json,md} and a log-log plot results/physics.png.
"""

from __future__ import annotations

import argparse
import os
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
from common import (
    RESULTS_DIR,
    load_average,
    machine_info,
    print_table,
    timer,
    write_result,
)

import physics

N_SUBSTEPS = 5
MAX_CONTACTS = 8  # the deepest contacts solved per substep, as the locomotion envs do


def ant_path() -> str:
    import gymnasium

    return os.path.join(os.path.dirname(gymnasium.__file__), "envs/mujoco/assets/ant.xml")


def bench_engine(batch: int, repeats: int, min_seconds: float) -> dict[str, Any]:
    sys_ = physics.load_mjcf(ant_path(), max_contacts=MAX_CONTACTS)
    states = jax.vmap(lambda _: physics.init(sys_))(jnp.arange(batch))
    lo, hi = sys_.actuator_ctrlrange[:, 0], sys_.actuator_ctrlrange[:, 1]
    ctrl = jax.random.uniform(jax.random.PRNGKey(0), (batch, sys_.nu), minval=lo, maxval=hi)
    step = jax.jit(jax.vmap(lambda s, u: physics.step(sys_, s, u, n_substeps=N_SUBSTEPS)))
    with timer() as compile_t:
        compiled = step.lower(states, ctrl).compile()
    states = jax.block_until_ready(compiled(states, ctrl))
    best = 0.0
    for _ in range(repeats):
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < min_seconds:
            # synchronous: queueing many async calls hung XLA:CPU (all threads idle in a
            # futex wait, main thread in the executable's in-flight semaphore) at batch >= 512
            states = jax.block_until_ready(compiled(states, ctrl))
            n += 1
        best = max(best, n * batch / (time.perf_counter() - start))
    finite = bool(jnp.all(jnp.isfinite(states.q)))
    return {
        "batch": batch,
        "compile_wall_s": compile_t["wall"],
        "compile_cpu_s": compile_t["cpu"],
        "steps_per_s": best,
        "finite": finite,
    }


def bench_mujoco(seconds: float) -> dict[str, Any]:
    import mujoco

    m = mujoco.MjModel.from_xml_path(ant_path())
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    d.ctrl[:] = rng.uniform(m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1])
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(N_SUBSTEPS):
            mujoco.mj_step(m, d)
        n += 1
    return {"steps_per_s": n / (time.perf_counter() - start), "version": mujoco.__version__}


def peer_status() -> dict[str, str]:
    """Why each optional peer (Brax, MJX) was not measured; empty when all are importable."""
    skipped = {}
    for name, module in (("brax", "brax"), ("mjx", "mujoco.mjx")):
        try:
            __import__(module)
        except ImportError as err:
            skipped[name] = f"not importable ({err}); install the optional 'peers' extra"
    return skipped


def plot(results: list[dict[str, Any]], mujoco_sps: float, path: Path) -> Path | None:
    """Log-log plot of env steps/s against batch, MuJoCo C as a horizontal line."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    batches = [r["batch"] for r in results]
    ax.plot(batches, [r["steps_per_s"] for r in results], "o-", label="physics/ (JAX, CPU)")
    ax.axhline(mujoco_sps, color="gray", ls="--", label="MuJoCo C, 1 thread")
    ax.axhline(50_000, color="red", ls=":", label="target at batch 2048")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="batch (worlds)",
        ylabel="Ant env steps/s",
        title="Ant, 5 substeps of 0.01 s per env step",
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: batch 1 and 64")
    parser.add_argument("--batches", type=int, nargs="+")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--min-seconds", type=float)
    args = parser.parse_args(argv)
    batches = args.batches or ([1, 64] if args.quick else [1, 64, 512, 2048, 8192])
    repeats = args.repeats or (1 if args.quick else 3)
    min_seconds = args.min_seconds or (0.2 if args.quick else 1.0)
    skipped_peers = peer_status()
    meta = machine_info()
    print(f"physics: {meta['cpu_model']}, {meta['usable_cores']} cores, load {load_average()}")
    rows, results = [], []
    for batch in batches:
        r = bench_engine(batch, repeats, min_seconds)
        results.append(r)
        rows.append(
            [
                batch,
                round(r["compile_wall_s"], 1),
                round(r["compile_cpu_s"], 1),
                round(r["steps_per_s"]),
            ]
        )
        print_table(["batch", "compile s", "compile CPU s", "env steps/s"], rows[-1:])
    ref = bench_mujoco(min_seconds * repeats)
    rows.append(["MuJoCo C (1 thread)", None, None, round(ref["steps_per_s"])])
    columns = ["batch", "compile s (wall)", "compile s (CPU)", "Ant env steps/s"]
    print_table(columns, rows)
    name = "physics_quick" if args.quick else "physics"
    write_result(
        name,
        {
            "title": "Physics: Ant with contacts and joint limits, "
            "5 substeps of 0.01 s per env step",
            "tables": [
                {
                    "title": "Throughput",
                    "columns": columns,
                    "rows": rows,
                    "note": "contacts and joint limits on both sides; random controls in range",
                }
            ],
            "engine": results,
            "mujoco": ref,
            "peers_skipped": skipped_peers,
            "load_average_start": meta.get("load_average"),
            "load_average_end": load_average(),
            "notes": [
                "XLA:CPU runs with its concurrency-optimized scheduler off (physics/xla_cpu.py); "
                "with it, batches >= 512 deadlocked (jax 0.10.2)",
                *(f"{k}: {v}" for k, v in skipped_peers.items()),
            ],
        },
    )
    png = plot(results, ref["steps_per_s"], RESULTS_DIR / f"{name}.png")
    print(f"plot: {png}" if png else "plot: matplotlib not installed, skipped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
