"""Shared helpers for the benchmarks: machine/version metadata, result files, event reader.

Every result is written twice: `results/<name>.json` (everything, for machines) and
`results/<name>.md` (the tables, for people). A payload is a dict; the keys this module
renders into markdown are `title`, `tables` (list of {title, columns, rows, note}) and
`notes` (list of strings). Everything else is kept in the JSON only.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import struct
import subprocess
import sys
import time
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
# ACCELRL_BENCH_RESULTS redirects every result (gpu.sh's CPU dry run keeps the real ones intact)
RESULTS_DIR = Path(os.environ.get("ACCELRL_BENCH_RESULTS", BENCH_DIR / "results"))

_PACKAGES = ["jax", "jaxlib", "flax", "optax", "chex", "rlax", "numpy"]


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages (other work on the machine skews wall-clock figures)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "--no-optional-locks", *args],  # read-only: never rewrites the index
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """Where and with what a result was measured."""
    import jax

    devices = jax.devices()
    try:
        usable_cores = len(os.sched_getaffinity(0))
    except AttributeError:
        usable_cores = os.cpu_count()
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "usable_cores": usable_cores,
        "device_kind": devices[0].device_kind,
        "device_platform": devices[0].platform,
        "device_count": len(devices),
        "python": sys.version.split()[0],
        "versions": {name: _version(name) for name in _PACKAGES},
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": None if status is None else bool(status),
        "load_average": load_average(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:  # NaN
            return "—"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def markdown_table(columns: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(name: str, payload: dict[str, Any]) -> str:
    meta = payload.get("meta", {})
    versions = meta.get("versions", {})
    out = [f"## {payload.get('title', name)}", ""]
    if meta:
        out.append(
            f"_{meta.get('date')} · {meta.get('cpu_model')} ({meta.get('usable_cores')} cores) · "
            f"{meta.get('device_count')}× {meta.get('device_kind')} · python {meta.get('python')}"
            f" · jax {versions.get('jax')} · commit {str(meta.get('git_commit'))[:10]}"
            f"{' (dirty)' if meta.get('git_dirty') else ''} · load average at start "
            f"{meta.get('load_average')}, at end {payload.get('load_average_end')}_"
        )
        out.append("")
    for table in payload.get("tables", []):
        if table.get("title"):
            out += [f"### {table['title']}", ""]
        out += [markdown_table(table["columns"], table["rows"]), ""]
        if table.get("note"):
            out += [table["note"], ""]
    notes = payload.get("notes", [])
    if notes:
        out += ["Notes:", ""] + [f"- {note}" for note in notes] + [""]
    return "\n".join(out)


def write_result(
    name: str, payload: dict[str, Any], results_dir: Path = RESULTS_DIR
) -> tuple[Path, Path]:
    """Write `<results_dir>/<name>.json` and `.md` (default benchmarks/results/); adds `meta`
    if missing.

    Results measured on an accelerator get the platform as a suffix (`physics_gpu.json`), so
    a GPU run (benchmarks/gpu.sh) never overwrites the CPU figures of the same benchmark.
    """
    payload = dict(payload)
    payload.setdefault("meta", machine_info())
    payload.setdefault("load_average_end", load_average())
    platform_name = payload["meta"].get("device_platform", "cpu")
    if platform_name != "cpu" and not name.endswith(f"_{platform_name}"):
        name = f"{name}_{platform_name}"
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = results_dir / f"{name}.json", results_dir / f"{name}.md"
    json_path.write_text(json.dumps(payload, indent=2, default=_json_default) + "\n")
    md_path.write_text(render_markdown(name, payload))
    write_summary(results_dir)
    return json_path, md_path


STATUS_FILE = "bench_status.json"
"""The last `make bench` run's outcome per benchmark, kept for SUMMARY.md."""


def write_summary(results_dir: Path = RESULTS_DIR, quick: bool = False) -> Path:
    """`<results_dir>/SUMMARY.md`: the last `make bench` run's status table (if any) and every
    `<name>.md` there (`<name>_quick.md` too when `quick`).

    Every `write_result` rewrites it, so it never shows figures older than its sections'
    files after a single benchmark is rerun.
    """
    results_dir = Path(results_dir)
    lines = ["# Benchmark results", ""]
    lines += [
        "Written by each benchmark run (`benchmarks/common.py`); each section below is one "
        "`results/*.md`. See benchmarks/README.md for what each benchmark measures.",
        "",
    ]
    status = results_dir / STATUS_FILE
    if status.exists():
        last = json.loads(status.read_text())
        lines += [f"Last `make bench` ({last['date']}):", ""]
        lines += ["| benchmark | status | wall s |", "|---|---|---|"]
        for name, code, seconds in last["outcomes"]:
            state = "ok" if code == 0 else f"FAILED (exit {code})"
            lines.append(f"| {name} | {state} | {seconds:.0f} |")
        lines.append("")
    for md in sorted(results_dir.glob("*.md")):
        if md.name == "SUMMARY.md" or (md.stem.endswith("_quick") and not quick):
            continue
        lines += [f"<!-- {md.name} -->", md.read_text().rstrip(), ""]
    path = results_dir / "SUMMARY.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _json_default(value: Any) -> Any:
    try:
        return value.item()  # numpy / jax scalars
    except AttributeError:
        return str(value)


def print_table(columns: list[str], rows: list[list[Any]]) -> None:
    print(markdown_table(columns, rows), flush=True)


@contextmanager
def timer():
    """Yields a dict filled on exit with `wall` (perf_counter) and `cpu` (process_time) seconds.

    CPU time of this process is much less sensitive than wall time to other jobs on a shared
    machine (it still counts XLA's helper threads, so it can exceed wall time on several cores).
    """
    result: dict[str, float] = {}
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield result
    finally:
        result["wall"] = time.perf_counter() - wall
        result["cpu"] = time.process_time() - cpu


def read_scalars(run_dir: Path) -> dict[str, list[tuple[int, float, float]]]:
    """{tag: [(step, value, wall_time), ...]} from every TensorBoard event file in run_dir.

    Reads the TFRecord framing directly (as tests/train/test_run_outputs.py does), so it needs
    only tensorboardX's protobufs, not TensorFlow or TensorBoard.
    """
    from tensorboardX.proto import event_pb2

    scalars: dict[str, list[tuple[int, float, float]]] = {}
    for path in sorted(Path(run_dir).glob("events.out.tfevents.*")):
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            record = data[offset + 12 : offset + 12 + length]
            offset += 12 + length + 4
            event = event_pb2.Event.FromString(record)
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append(
                    (event.step, value.simple_value, event.wall_time)
                )
    return scalars


# ----------------------------------------------------------------------------------------------
# Peers (Brax, MJX, gymnax) run by benchmarks/peers.py in their own interpreter

PEERS_VENV_PYTHON = REPO_ROOT / ".venv-peers" / "bin" / "python"


def peer_python() -> tuple[str | None, str | None]:
    """(interpreter for benchmarks/peers.py, None), or (None, why there is none).

    $ACCELRL_PEERS_PYTHON first, then `make peers`'s .venv-peers. Brax 0.14.2's trainers need
    jax < 0.10, so the peers live beside accelrl's venv, not in it.
    """
    chosen = os.environ.get("ACCELRL_PEERS_PYTHON")
    if chosen:
        return chosen, None
    if PEERS_VENV_PYTHON.exists():
        return str(PEERS_VENV_PYTHON), None
    return None, (
        "no peers interpreter: run `make peers` (builds .venv-peers with Brax 0.14.2, MJX, gymnax "
        "and jax < 0.10, which Brax's trainers need) or set ACCELRL_PEERS_PYTHON"
    )


def run_peer(args: list[str], timeout: float) -> dict[str, Any]:
    """benchmarks/peers.py ARGS in the peers interpreter: its JSON result, or {"error": why}.

    A peer's failure is recorded in the result, never fatal to the benchmark around it.
    """
    python, missing = peer_python()
    if python is None:
        return {"error": missing}
    try:
        out = subprocess.run(
            [python, str(BENCH_DIR / "peers.py"), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONPATH": ""},
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"error": f"{type(error).__name__}: {error}"}
    lines = out.stdout.strip().splitlines()
    if out.returncode == 0 and lines:
        try:
            return json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    return {"error": f"exit {out.returncode}: {(out.stderr or out.stdout).strip()[-1500:]}"}
