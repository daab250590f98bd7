"""Shared test settings: CPU-only, and one XLA compilation cache per test session.

The cache starts empty for every session (each test still compiles for real the first time);
tests that rebuild an identical training step (resume, evaluation) then reuse it.
"""

import os
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

if jax.config.jax_compilation_cache_dir is None:
    jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="accelrl-xla-"))
