"""Shared test settings: CPU-only, and one XLA compilation cache per test session.

The cache starts empty for every session (each test still compiles for real the first time);
tests that rebuild an identical training step (resume, evaluation) then reuse it.
"""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

import physics  # noqa: E402,F401  (its XLA:CPU flags must precede any computation)

if jax.config.jax_compilation_cache_dir is None:
    _cache = tempfile.mkdtemp(prefix="accelrl-xla-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    jax.config.update("jax_compilation_cache_dir", _cache)
