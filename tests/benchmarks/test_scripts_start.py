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


@pytest.mark.parametrize(
    "command, option",
    [
        ("ppo", "--num-envs"),
        ("step", "--engine"),
        ("cartpole", "--lengths"),
        ("ppo_cartpole", "--seeds"),
    ],
)
def test_peers_script_starts_without_the_peers_installed(tmp_path, command, option):
    """benchmarks/peers.py runs in the peers venv (`make peers`); its --help needs nothing."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "peers.py"), command, "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and option in out.stdout, out.stderr[-3000:]


def test_a_failing_peer_is_reported_not_raised(monkeypatch, tmp_path):
    """A peer interpreter without Brax: the benchmark gets {"error": ...} naming the cause."""
    import common

    # this interpreter, with a `brax` that cannot be imported first on its path
    (tmp_path / "stubs" / "brax").mkdir(parents=True)
    (tmp_path / "stubs" / "brax" / "__init__.py").write_text("raise ImportError('no brax')\n")
    python = tmp_path / "python-without-brax"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "stubs"} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    monkeypatch.setenv("ACCELRL_PEERS_PYTHON", str(python))
    result = common.run_peer(["step", "--engine", "brax", "--batches", "1"], timeout=120)
    assert "error" in result and "brax" in result["error"], result


def test_no_peer_interpreter_says_how_to_get_one(monkeypatch, tmp_path):
    import common

    monkeypatch.delenv("ACCELRL_PEERS_PYTHON", raising=False)
    monkeypatch.setattr(common, "PEERS_VENV_PYTHON", tmp_path / "missing" / "python")
    assert common.run_peer(["ppo"], timeout=10) == {"error": common.peer_python()[1]}
    assert "make peers" in common.peer_python()[1]
