"""The whole fused training step on Ant: training env steps/s against batch size, with compile.

    .venv/bin/python benchmarks/ant_training.py                     # CPU: 16, 64, 256 envs
    .venv/bin/python benchmarks/ant_training.py --batches 4096 16384
    .venv/bin/python benchmarks/ant_training.py --quick             # smoke: 16 envs, short blocks

Training SPS is physics + acting + V-trace learning: the compiled chunk of preset `ant_vtrace`
(one iteration of `num_envs x unroll_length` steps per call, `num_minibatches` lowered where it
would not divide) timed in steady state. Beside it, env-only SPS: the same env stack stepped
with random actions in the same number of steps per call, so the ratio is the share of the
training time spent stepping the env. Both are measured in interleaved blocks with
`fused_loop.bench_config`. When the optional `peers` extra is importable, Brax's PPO
trainer runs on Brax's ant at each batch size in the same process (Brax's Ant settings:
unroll 5, 4 epochs, 32 minibatches where they divide) and is reported as accelrl / Brax;
otherwise the JSON and markdown record why it was skipped.

Writes results/ant_training.{json,md} (`_gpu` suffix on a GPU, `ant_training_quick.*` with
--quick), rewritten after every batch so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    # The repo root first: its `physics` package, not benchmarks/physics.py (the envs import it).
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
from common import machine_info, print_table, write_result
from fused_loop import bench_config, divisor_at_most

from accelrl.config import TrainConfig, apply_overrides
from configs import load_preset

PRESET = "ant_vtrace"


def batch_config(num_envs: int) -> TrainConfig:
    """The Ant preset at `num_envs` envs, one iteration per chunk."""
    base = load_preset(PRESET)
    minibatches = divisor_at_most(num_envs, base.agent.num_minibatches)
    overrides = [f"env.num_envs={num_envs}", f"agent.num_minibatches={minibatches}"]
    return apply_overrides(base, [*overrides, "iterations_per_chunk=1"])


def brax_skip_reason() -> str | None:
    """Why Brax's PPO cannot run here, or None when it can."""
    try:
        import brax.envs  # noqa: F401
        import brax.training.agents.ppo.train  # noqa: F401
    except ImportError as error:
        return (
            f"Brax PPO not importable ({error}): the optional 'peers' extra is not installed "
            f"(Brax 0.14.2's trainers need jax < 0.10; this environment has jax "
            f"{jax.__version__})"
        )
    return None


def bench_brax_ppo(num_envs: int, env_steps_per_epoch: int) -> dict[str, Any]:
    """Brax's PPO on its ant at `num_envs`: SPS of the training epochs after the first (which
    includes compile), as Brax reports them (`training/sps`, evaluations excluded)."""
    from brax import envs
    from brax.training.agents.ppo import train as ppo

    minibatches = 32 if num_envs % 32 == 0 else 1
    unroll = 5
    steps_per_update = num_envs * unroll  # batch_size * num_minibatches = num_envs
    updates_per_epoch = max(1, env_steps_per_epoch // steps_per_update)
    epochs = []

    def progress(step: int, metrics: dict[str, Any]) -> None:
        if "training/sps" in metrics:
            epochs.append({"env_steps": int(step), "sps": float(metrics["training/sps"])})

    started = time.perf_counter()
    ppo.train(
        environment=envs.get_environment("ant"),
        num_timesteps=3 * updates_per_epoch * steps_per_update,
        num_evals=4,  # an initial evaluation, then 3 training epochs
        episode_length=1000,
        num_envs=num_envs,
        batch_size=num_envs // minibatches,
        num_minibatches=minibatches,
        unroll_length=unroll,
        num_updates_per_batch=4,
        normalize_observations=True,
        reward_scaling=10.0,
        discounting=0.97,
        learning_rate=3e-4,
        entropy_cost=1e-2,
        num_eval_envs=16,
        seed=0,
        progress_fn=progress,
    )
    later = [e["sps"] for e in epochs[1:]]
    return {
        "num_envs": num_envs,
        "num_minibatches": minibatches,
        "epochs": epochs,
        "sps_best": max(later) if later else None,
        "wall_s": time.perf_counter() - started,
    }


COLUMNS = [
    "envs",
    "steps/call",
    "compile s (wall)",
    "compile s (CPU)",
    "train SPS",
    "env-only SPS",
    "train / env-only",
    "train SPS/CPU-s",
    "Brax PPO SPS",
    "accelrl / Brax",
    "load",
]


def table_row(r: dict[str, Any]) -> list[Any]:
    brax_sps = r.get("brax_ppo", {}).get("sps_best")
    return [
        r["num_envs"],
        r["env_steps_per_chunk"],
        r["compile_wall_s"],
        r["compile_cpu_s"],
        r["train"]["sps_best"],
        r["env_only"]["sps_best"],
        r["ratio_best"],
        r["train"]["sps_per_cpu_second_best"],
        brax_sps,
        r["train"]["sps_best"] / brax_sps if brax_sps else None,
        r["load_average"][0] if r["load_average"] else None,
    ]


def write(results: list[dict[str, Any]], args: argparse.Namespace, meta: dict[str, Any]) -> Path:
    """Write the JSON and markdown of the batches measured so far."""
    skipped = brax_skip_reason()
    notes = [skipped] if skipped else []
    notes.append(
        f"{PRESET} at each batch: unroll {results[0]['unroll_length']}, 4 epochs, one iteration "
        f"per call; SPS = env steps per wall second, best of {args.repeats} interleaved blocks "
        f"of >= {args.min_seconds:g} s after compile and a warm-up call; SPS/CPU-s = per CPU "
        "second of this process (less sensitive to other load). compile = the fused chunk "
        "alone (set-up and the env-only rollout's compile are in the JSON)."
    )
    json_path, _ = write_result(
        "ant_training_quick" if args.quick else "ant_training",
        {
            "title": "Fused training step on Ant: training SPS against batch size"
            + (" (quick)" if args.quick else ""),
            "meta": meta,
            "args": vars(args),
            "batches": results,
            "brax_ppo_skipped": skipped,
            "tables": [
                {"title": "Throughput", "columns": COLUMNS, "rows": [table_row(r) for r in results]}
            ],
            "notes": notes + args.notes,
        },
    )
    return json_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 16 envs, short blocks")
    parser.add_argument("--batches", type=int, nargs="+", help="num_envs values")
    parser.add_argument("--repeats", type=int, help="interleaved timing blocks per batch")
    parser.add_argument("--min-seconds", type=float, help="minimum wall time of one block")
    parser.add_argument("--note", dest="notes", action="append", default=[], help="for the .md")
    args = parser.parse_args(argv)
    on_cpu = jax.devices()[0].platform == "cpu"
    default_batches = [16, 64, 256] if on_cpu else [1024, 4096, 16384]
    args.batches = args.batches or ([16] if args.quick else default_batches)
    args.repeats = args.repeats or (1 if args.quick else 2)
    args.min_seconds = args.min_seconds or (0.5 if args.quick else 3.0)
    if any(b < 1 for b in args.batches):
        parser.error(f"--batches must be positive, got {args.batches}")
    meta = machine_info()
    print(f"ant_training: {meta['cpu_model']}, {meta['device_count']}x {meta['device_kind']}")
    results = []
    for num_envs in args.batches:
        print(f"batch {num_envs} envs ...", flush=True)
        r, _ = bench_config(batch_config(num_envs), args.repeats, args.min_seconds)
        if brax_skip_reason() is None:
            per_epoch = int(r["train"]["sps_best"] * args.min_seconds)
            try:
                r["brax_ppo"] = bench_brax_ppo(num_envs, per_epoch)
            except Exception as error:  # a peer's failure is recorded, not fatal
                r["brax_ppo"] = {"error": f"{type(error).__name__}: {error}"}
        results.append(r)
        print_table(COLUMNS, [table_row(r)])
        json_path = write(results, args, meta)  # after every batch: a cut-short run keeps them
    print(f"wrote {json_path} and {json_path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
