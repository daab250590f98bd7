"""Every benchmark script starts as `make bench` runs it (`python benchmarks/NAME.py`).

Run as a script, Python puts benchmarks/ first on sys.path, where physics.py would shadow the
physics package; `--help` imports everything a script needs, so an import-order slip fails here
rather than hours later in `make bench` or benchmarks/gpu.sh.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from run_all import discover  # noqa: E402

SCRIPTS = discover()


def test_every_benchmark_is_found():
    assert {"physics.py", "fused_loop.py", "bridge.py", "r2d2.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_starts(script, tmp_path):
    out = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "usage:" in out.stdout
