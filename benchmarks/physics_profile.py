"""Where the Ant physics step spends its time: a jax.profiler trace, summed per device op.

Runs the same jitted, vmapped 5-substep Ant step as benchmarks/physics.py at one batch size,
traces --calls calls of it, and sums the trace's complete events per name for each traced
process (on a GPU: its kernels and library calls per stream; on the CPU: XLA's thunks). Prints
the top --top of each with their share of its events, and writes
results/physics_profile.{json,md}. This is how candidates for speed-ups are found; the figures
are for reading, not targets.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import importlib.util

import jax
from common import print_table, write_result

from physics.constraints import HESSIAN_FORMS

# benchmarks/physics.py by path: the name `physics` is the engine package
_spec = importlib.util.spec_from_file_location(
    "physics_bench", Path(__file__).with_name("physics.py")
)
physics_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(physics_bench)


def summarize(trace_file: Path, top: int) -> dict[str, Any]:
    """Per traced process: total microseconds and count of each complete event name."""
    with gzip.open(trace_file, "rt") as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    process = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for e in events:
        if e.get("ph") == "X":
            where = process.get(e["pid"], str(e["pid"]))
            totals[where][e["name"]] += float(e.get("dur", 0.0))
            counts[where][e["name"]] += 1
    return {
        where: {
            "total_us": sum(t.values()),
            "top": [
                {"name": n, "us": us, "count": counts[where][n]} for n, us in t.most_common(top)
            ],
        }
        for where, t in totals.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="smoke run: batch 64, 2 calls")
    parser.add_argument(
        "--hessian-form",
        choices=HESSIAN_FORMS,
        default=HESSIAN_FORMS[0],
        help="how the solver forms J^T D J (load_mjcf's hessian_form); another than the default "
        "writes physics_profile_<form>",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.calls = 64, 2

    compiled, states, ctrl, _ = physics_bench.ant_step(args.batch, args.hessian_form)
    for _ in range(2):
        states = jax.block_until_ready(compiled(states, ctrl))
    with tempfile.TemporaryDirectory() as log_dir:
        start = time.perf_counter()
        jax.profiler.start_trace(log_dir, create_perfetto_trace=True)
        for _ in range(args.calls):
            states = jax.block_until_ready(compiled(states, ctrl))
        jax.profiler.stop_trace()
        wall_us = (time.perf_counter() - start) * 1e6
        (trace_file,) = Path(log_dir).rglob("perfetto_trace.json.gz")
        processes = summarize(trace_file, args.top)
    columns = ["event", "ms", "count", "share"]
    tables = [
        {
            "title": f"{where}: {summary['total_us'] / 1e3:.1f} ms in events",
            "columns": columns,
            "rows": [
                [
                    e["name"][:90],
                    round(e["us"] / 1e3, 2),
                    e["count"],
                    f"{e['us'] / summary['total_us']:.1%}",
                ]
                for e in summary["top"]
            ],
        }
        for where, summary in processes.items()
    ]
    for table in tables:
        print(f"\n{table['title']}")
        print_table(table["columns"], table["rows"])
    env_steps_per_s = args.calls * args.batch / (wall_us / 1e6)
    print(f"\n{env_steps_per_s:,.0f} Ant env steps/s while traced")
    name = "physics_profile" + (
        "" if args.hessian_form == HESSIAN_FORMS[0] else f"_{args.hessian_form}"
    )
    write_result(
        f"{name}_quick" if args.quick else name,
        {
            "title": f"Where Ant's physics step spends its time ({args.batch:,} worlds, "
            f"J^T D J by {args.hessian_form})",
            "batch": args.batch,
            "hessian_form": args.hessian_form,
            "calls": args.calls,
            "traced_wall_us": wall_us,
            "env_steps_per_s_traced": env_steps_per_s,
            "processes": processes,
            "tables": tables,
            "notes": [
                f"{args.calls} calls of the vmapped {physics_bench.N_SUBSTEPS}-substep step, "
                "traced with jax.profiler; events summed by name per traced process; share = "
                "of that process's summed events. A device's kernels run one after another, "
                "so their shares add up; host events nest, so theirs overlap.",
                f"tracing slows the host: {env_steps_per_s:,.0f} env steps/s while traced "
                "(benchmarks/physics.py has the untraced figure)",
            ],
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
