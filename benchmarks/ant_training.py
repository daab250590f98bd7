"""The whole fused training step on Ant: training env steps/s against batch size, with compile.

    .venv/bin/python benchmarks/ant_training.py                     # CPU: 16, 64, 256 envs
    .venv/bin/python benchmarks/ant_training.py --batches 4096 16384
    .venv/bin/python benchmarks/ant_training.py --quick             # smoke: 16 envs, short blocks

Training SPS is physics + acting + V-trace learning: the compiled chunk of preset `ant_vtrace`
(one iteration of `num_envs x unroll_length` steps per call, `num_minibatches` lowered where it
would not divide) timed in steady state. Beside it, env-only SPS: the same env stack stepped
with random actions in the same number of steps per call, so the ratio is the share of the
training time spent stepping the env. Both are measured in interleaved blocks with
`fused_loop.bench_config`. In the same run, Brax's PPO trainer runs on Brax's ant at each batch
size (Brax's Ant settings: unroll 5, 4 epochs, 32 minibatches where they divide), in the
`make peers` interpreter (benchmarks/peers.py, since Brax's trainers need jax < 0.10), and is
reported as accelrl / Brax; without that interpreter the JSON and markdown say why not.

Writes results/ant_training.{json,md} (`_gpu` suffix on a GPU, `ant_training_quick.*` with
--quick), rewritten after every batch so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    # The repo root first: its `physics` package, not benchmarks/physics.py (the envs import it).
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
from common import machine_info, peer_python, print_table, run_peer, write_result
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


def bench_brax_ppo(num_envs: int, env_steps_per_epoch: int) -> dict[str, Any]:
    """Brax's PPO on its ant at `num_envs` (benchmarks/peers.py in the peers interpreter)."""
    args = ["ppo", "--num-envs", str(num_envs), "--env-steps-per-epoch", str(env_steps_per_epoch)]
    return run_peer(args, timeout=1800)


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
    _, skipped = peer_python()
    errors = [r["brax_ppo"]["error"] for r in results if "error" in r.get("brax_ppo", {})]
    notes = [f"Brax PPO not measured: {e}" for e in ([skipped] if skipped else errors)]
    versions = next(
        (r["brax_ppo"]["versions"] for r in results if "versions" in r.get("brax_ppo", {})), None
    )
    if versions:
        notes.append(
            f"Brax PPO ({versions}) in its own interpreter after accelrl's measurement, same "
            "machine and run; its SPS is Brax's training/sps of the best epoch after the "
            "second (the first two compiled on CPU), evaluations excluded. Brax minibatches "
            "per update, by envs: "
            + ", ".join(
                f"{r['num_envs']}: {r['brax_ppo']['num_minibatches']}"
                for r in results
                if "num_minibatches" in r.get("brax_ppo", {})
            )
            + " (Brax's 32 where they divide the envs, else 1)."
        )
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
        if peer_python()[0]:
            print(f"Brax PPO at {num_envs} envs ...", flush=True)
            r["brax_ppo"] = bench_brax_ppo(num_envs, int(r["train"]["sps_best"] * args.min_seconds))
        results.append(r)
        print_table(COLUMNS, [table_row(r)])
        json_path = write(results, args, meta)  # after every batch: a cut-short run keeps them
    print(f"wrote {json_path} and {json_path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
