"""Shared test settings: CPU-only (unless the caller sets JAX_PLATFORMS, as benchmarks/gpu.sh
does to run the physics tests on a GPU), each xdist worker on its own share of the CPUs, one XLA
compilation cache per test session, a bound on what a worker keeps compiled, fewer full garbage
collections, and the `slow` learning tests scheduled first.

Each xdist worker runs on its own CPUs (worker i of n on every n-th CPU it may use), and the
processes a test starts (bridge servers and actors, `accelrl` runs) inherit them. XLA:CPU's
thread pools in two processes on two shared cores spend their time handing work across cores;
pinned, the same tests ran measurably faster on the 2-core host (2026-12-08, interleaved runs):
four physics files in 175 and 162 s against 203 and 193 s (user CPU 14% lower), the bridge
tests in 146 s against 163 s, the train, envs, agents, render and benchmark tests in 328 s
against about 339 s; the whole suite in 1108 s against 1269 s an hour before.

The cache starts empty for every session (each test still compiles for real the first time);
later identical programs reuse it: a training step rebuilt for resume or evaluation, and the
same step compiled again by the other xdist worker or by an `accelrl` subprocess (they inherit
the directory through JAX_COMPILATION_CACHE_DIR). The process that creates it removes it; a
JAX_COMPILATION_CACHE_DIR already set by the caller is used as it is.

Every executable XLA:CPU keeps loaded holds hundreds to thousands of memory mappings (measured:
~1,600 for Ant's step, ~3,000 for its gradient), and JAX keeps every program a test compiled
while its function lives. A worker that ran a few hundred physics tests reached Linux's
vm.max_map_count (65,530): LLVM's next mmap failed ("LLVM compilation error: Cannot allocate
memory") and the worker died with a segfault while unwinding that error. So after a test that
leaves the process past half the limit, the compiled programs are dropped; the tests that
follow reload theirs from the session cache.

A worker's heap grows to 3-5 GB (compiled programs, traced jaxprs, MuJoCo models), and tracing
makes millions of short-lived objects, so with CPython's default thresholds a worker ran 62-85
full collections of about 0.5 s each through the suite: 35-38 s, of 42-46 s in all collections
(measured with gc.callbacks, 2026-12-08). With the third threshold at 100 (default 10) it ran
16-20 of them, 11-12 s, and the same peak memory; young generations are collected as before, and
the mapping bound below still collects fully when it drops programs.

Tests compile as users' programs do, with XLA's full optimization. XLA's backend level 0
(JAX_DISABLE_MOST_OPTIMIZATIONS) would cut a physics test's compile by a third to a half, but
jaxlib 0.10.2 miscompiles there: the constraint solver's Newton loop, whose Cholesky is a
LAPACK call, carried a wrong state out of its first iteration (docs/design.md, "Test suite").
"""

import atexit
import gc
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _pin_xdist_worker() -> None:
    """Worker i of n keeps every n-th of the CPUs it may use; before JAX starts its threads,
    which inherit it. Nothing where there are fewer CPUs than workers or no affinity call."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if not worker.startswith("gw") or count < 2 or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= count:
        os.sched_setaffinity(0, cpus[int(worker[2:]) % count :: count])


_pin_xdist_worker()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="accelrl-xla-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache

import jax  # noqa: E402

import physics  # noqa: E402,F401  (its XLA:CPU flags must precede any computation)

gc.set_threshold(*gc.get_threshold()[:2], 100)


def _mapping_budget() -> int | None:
    """Half of Linux's vm.max_map_count; None where there is no such limit to read."""
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text()) // 2
    except (OSError, ValueError):
        return None


_BUDGET = _mapping_budget()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Runs the `slow` learning tests first (in collection order otherwise): they take tens
    of seconds to minutes each on a 2-core CI host, and collected last (train/ sorts last) one
    of them left the other xdist worker idle at the end of the session."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _bounded_compiled_programs() -> Iterator[None]:
    """Drops JAX's compiled programs after a test that leaves more than half of
    vm.max_map_count mapped (see the module docstring)."""
    yield
    if _BUDGET is None:
        return
    with open("/proc/self/maps") as maps:
        if sum(1 for _ in maps) > _BUDGET:
            jax.clear_caches()
            gc.collect()


@pytest.fixture
def x64() -> Iterator[None]:
    """jax_enable_x64 for the test, process-wide (a training run compiles in a second thread,
    which the thread-local ``jax.enable_x64`` context would not reach). JAX's caches are
    dropped before and after: JAX 0.10.2 otherwise reuses a program traced under one setting
    for the same function traced under the other, and a numpy constant then fails to lower
    ("operand type mismatch", tensor<3xf32> against tensor<3xf64>; box-box's int32 edge table
    against i64 after a float32 test of box-box) in the test that comes second."""
    jax.clear_caches()
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", False)
        jax.clear_caches()
