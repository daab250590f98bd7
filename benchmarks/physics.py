"""Physics engine throughput: Ant env steps/s with contacts and joint limits, against MuJoCo C.

An env step is 5 substeps of 0.01 s (gymnasium's Ant frame_skip with the XML timestep) with
random controls in the ctrl range (fixed per world), so the legs hit the floor and the joint
limits: every substep runs collision of all 13 candidate geom pairs (25 contact slots), the 16
joint-limit rows and the fixed-count Newton constraint solver on the 8 deepest contacts (as the
locomotion envs load it; Ant has at most ~6 active, so this equals solving all 25). For each
batch size: compile time (wall and CPU) of the jitted, vmapped 5-substep step, and steady-state
env steps/s (best of --repeats blocks of at least --min-seconds). MuJoCo C is a single-thread
mj_step loop on the same model with the same integrator (Euler), pyramidal cone and its default
Newton solver, with the same kind of controls, so both sides do the same work. At each batch,
in the same run, Brax's ant env step (its `generalized` pipeline and its own ant model, 5
substeps) and MJX stepping gymnasium's ant (Euler, 5 `mjx.step` calls) run as peers in the
`make peers` interpreter (benchmarks/peers.py); without it the JSON records why they were
skipped. Brax's figure is a whole env step (observation and reward included), ours and MJX's
are physics only.
Writes results/physics.{json,md} and a log-log plot results/physics.png.
"""

from __future__ import annotations

import argparse
import dataclasses
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
    load_average,
    machine_info,
    print_table,
    run_peer,
    timer,
    write_result,
)

import physics

N_SUBSTEPS = 5
MAX_CONTACTS = 8  # the deepest contacts solved per substep, as the locomotion envs do
NEWTON_STEPS = 4  # Newton steps per constraint solve, as the locomotion envs do


def ant_path() -> str:
    import gymnasium

    return os.path.join(os.path.dirname(gymnasium.__file__), "envs/mujoco/assets/ant.xml")


def ant_step(
    batch: int, hessian_form: str = "broadcast"
) -> tuple[Any, physics.State, jax.Array, dict[str, float]]:
    """The compiled, vmapped Ant env step (5 substeps), its initial states, random controls in
    range (fixed per world) and its compile time {wall, cpu}."""
    sys_ = physics.load_mjcf(
        ant_path(),
        max_contacts=MAX_CONTACTS,
        newton_steps=NEWTON_STEPS,
        hessian_form=hessian_form,
    )
    # gymnasium's XML asks for RK4 (four forward evaluations a substep); the Ant env and the
    # MuJoCo and MJX sides here integrate with Euler
    sys_ = dataclasses.replace(sys_, integrator="Euler")
    states = jax.jit(jax.vmap(lambda _: physics.init(sys_)))(jnp.arange(batch))
    lo, hi = sys_.actuator_ctrlrange[:, 0], sys_.actuator_ctrlrange[:, 1]
    ctrl = jax.random.uniform(jax.random.PRNGKey(0), (batch, sys_.nu), minval=lo, maxval=hi)
    step = jax.jit(jax.vmap(lambda s, u: physics.step(sys_, s, u, n_substeps=N_SUBSTEPS)))
    with timer() as compile_t:
        compiled = step.lower(states, ctrl).compile()
    return compiled, states, ctrl, compile_t


def bench_engine(batch: int, repeats: int, min_seconds: float) -> dict[str, Any]:
    compiled, states, ctrl, compile_t = ant_step(batch)
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


PEERS = ("brax", "mjx")


def bench_peers(batches: list[int], seconds: float) -> dict[str, dict[str, Any]]:
    """Brax's and MJX's ant steps/s at `batches`, each engine in one peers subprocess:
    {engine: {"by_batch": {batch: result}}} or {engine: {"error": why}}."""
    out: dict[str, dict[str, Any]] = {}
    for engine in PEERS:
        print(f"peer {engine} ...", flush=True)
        args = ["step", "--engine", engine, "--batches", *map(str, batches)]
        result = run_peer(
            [*args, "--seconds", str(seconds), "--mjcf", ant_path()],
            timeout=300 + 180 * len(batches),
        )
        if "batches" in result:
            result["by_batch"] = {r["batch"]: r for r in result.pop("batches")}
        out[engine] = result
    return out


def _peer_sps(peers: dict[str, dict[str, Any]], engine: str, batch: int) -> float | None:
    found = peers[engine].get("by_batch", {}).get(batch)
    return found["steps_per_s"] if found else None


def plot(
    results: list[dict[str, Any]],
    mujoco_sps: float,
    peers: dict[str, dict[str, Any]],
    path: Path,
) -> Path | None:
    """Log-log plot of env steps/s against batch, with the peers measured and MuJoCo C as a
    horizontal line."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    batches = [r["batch"] for r in results]
    ax.plot(batches, [r["steps_per_s"] for r in results], "o-", label="accelrl physics/")
    for engine, label in (("brax", "Brax generalized (env step)"), ("mjx", "MJX")):
        measured = sorted(peers[engine].get("by_batch", {}).items())
        if measured:
            ax.plot(
                [b for b, _ in measured],
                [r["steps_per_s"] for _, r in measured],
                "s--",
                label=label,
            )
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
    meta = machine_info()
    print(f"physics: {meta['cpu_model']}, {meta['usable_cores']} cores, load {load_average()}")
    results = []
    for batch in batches:
        r = bench_engine(batch, repeats, min_seconds)
        results.append(r)
        print(f"batch {batch}: {r['steps_per_s']:,.0f} env steps/s", flush=True)
    ref = bench_mujoco(min_seconds * repeats)
    peers = bench_peers(batches, min_seconds * repeats)
    rows = []
    for r in results:
        brax, mjx = (_peer_sps(peers, e, r["batch"]) for e in PEERS)
        sps = r["steps_per_s"]
        rows.append(
            [
                r["batch"],
                round(r["compile_wall_s"], 1),
                round(r["compile_cpu_s"], 1),
                round(sps),
                round(brax) if brax else None,
                round(mjx) if mjx else None,
                sps / brax if brax else None,
                sps / mjx if mjx else None,
            ]
        )
    rows.append(["MuJoCo C (1 thread)", None, None, round(ref["steps_per_s"]), *[None] * 4])
    columns = [
        "batch",
        "compile s (wall)",
        "compile s (CPU)",
        "Ant env steps/s",
        "Brax ant steps/s",
        "MJX ant steps/s",
        "accelrl / Brax",
        "accelrl / MJX",
    ]
    print_table(columns, rows)
    name = "physics_quick" if args.quick else "physics"
    peer_notes = [f"{e}: {peers[e]['error']}" for e in PEERS if "error" in peers[e]]
    versions = {e: peers[e].get("versions") for e in PEERS if "versions" in peers[e]}
    json_path, _ = write_result(
        name,
        {
            "title": "Physics: Ant with contacts and joint limits, "
            "5 substeps of 0.01 s per env step",
            "tables": [
                {
                    "title": "Throughput",
                    "columns": columns,
                    "rows": rows,
                    "note": "contacts and joint limits on all sides; random controls in range, "
                    "fixed per world. Brax: its ant env's whole step (generalized pipeline, its "
                    "own model; observation and reward included). MJX: gymnasium's ant, Euler, "
                    "5 mjx.step calls. Peers run in their own interpreter (make peers), "
                    "after accelrl, in the same run.",
                }
            ],
            "engine": results,
            "mujoco": ref,
            "peers": peers,
            "load_average_start": meta.get("load_average"),
            "load_average_end": load_average(),
            "notes": [
                "XLA:CPU runs with its concurrency-optimized scheduler off (physics/xla_cpu.py); "
                "with it, batches >= 512 deadlocked (jax 0.10.2)",
                *(f"peer versions: {e} {v}" for e, v in versions.items()),
                *peer_notes,
            ],
        },
    )
    # beside the JSON, so a GPU run's plot gets its `_gpu` suffix too
    png = plot(results, ref["steps_per_s"], peers, json_path.with_suffix(".png"))
    print(f"plot: {png}" if png else "plot: matplotlib not installed, skipped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
