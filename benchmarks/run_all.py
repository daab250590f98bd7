"""Run every benchmark in benchmarks/ and collect their markdown into results/SUMMARY.md.

    .venv/bin/python benchmarks/run_all.py            # what `make bench` runs
    .venv/bin/python benchmarks/run_all.py --quick    # smoke: passes --quick to each
    .venv/bin/python benchmarks/run_all.py --summary  # only rewrite results/SUMMARY.md

A benchmark is any `benchmarks/*.py` (other than common.py, peers.py and this file) that defines a
top-level `main()`. Each runs in its own subprocess, so one failing does not stop the rest;
the exit status is non-zero if any failed.
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import json
import subprocess
import sys
import time
from pathlib import Path

from common import BENCH_DIR, RESULTS_DIR, STATUS_FILE, write_summary

# peers.py is not a benchmark of its own: physics.py and ant_training.py run it in the peers venv.
SKIP = {"common.py", "run_all.py", "peers.py"}


def discover() -> list[Path]:
    """benchmarks/*.py with a top-level `def main`, found without importing them."""
    found = []
    for path in sorted(BENCH_DIR.glob("*.py")):
        if path.name in SKIP or path.name.startswith("_"):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            found.append(path)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    parser.add_argument("names", nargs="*", help="only these benchmarks (file stems)")
    parser.add_argument(
        "--summary",
        action="store_true",
        help="run nothing: rewrite results/SUMMARY.md (e.g. after unpacking gpu.sh's results)",
    )
    args = parser.parse_args(argv)
    if args.summary:
        print(f"wrote {write_summary(RESULTS_DIR, args.quick)}")
        return 0
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    scripts = [p for p in discover() if not args.names or p.stem in args.names]
    outcomes = []
    for script in scripts:
        print(f"=== {script.stem}", flush=True)
        started = time.perf_counter()
        command = [sys.executable, str(script)] + (["--quick"] if args.quick else [])
        code = subprocess.run(command, cwd=BENCH_DIR.parent).returncode
        seconds = time.perf_counter() - started
        outcomes.append((script.stem, code, seconds))
        print(
            f"=== {script.stem}: {'ok' if code == 0 else f'exit {code}'} in {seconds:.0f} s",
            flush=True,
        )
    if not args.quick:  # a smoke run does not replace the last full run's status table
        date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        status = {"date": date, "outcomes": outcomes}
        (RESULTS_DIR / STATUS_FILE).write_text(json.dumps(status) + "\n")
    summary = write_summary(RESULTS_DIR, args.quick)
    print(f"wrote {summary}")
    return 0 if all(code == 0 for _, code, _ in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
