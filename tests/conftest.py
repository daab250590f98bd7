"""Shared test settings: CPU-only, and one XLA compilation cache per test session.

The cache starts empty for every session (each test still compiles for real the first time);
later identical programs reuse it: a training step rebuilt for resume or evaluation, and the
same step compiled again by the other xdist worker or by an `accelrl` subprocess (they inherit
the directory through JAX_COMPILATION_CACHE_DIR). The process that creates it removes it; a
JAX_COMPILATION_CACHE_DIR already set by the caller is used as it is.
"""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="accelrl-xla-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache

import physics  # noqa: E402,F401  (its XLA:CPU flags must precede any computation)
