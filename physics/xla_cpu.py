"""XLA:CPU settings that batched physics needs, applied before JAX starts its backend.

- The concurrency-optimized thunk scheduler off: with it, XLA:CPU (seen with jax 0.10.2)
  deadlocks on the vmapped substep from batch ~512 up. The program compiles, then a call
  never returns while every XLA thread waits idle (independent work such as the damping
  factorization and the constraint solve's loop scheduled side by side); with the default
  scheduler the same program runs.
- The older fusion emitters (`xla_cpu_use_fusion_emitters=false`): on this code they compile
  faster and map less memory than the MLIR ones that jax 0.10.2 uses by default, and when
  chosen they also ran faster (no longer clearly: see the 2026-12-08 figures). Measured on 2
  cores: Ant's 5-substep step compiles in 4.6 s (7.1 s) and runs 5.6k env steps/s at batch 2048
  (4.6k); the fused Ant training chunk at 64 envs compiles in 12.5 s
  (17.4 s) and trains 3.5k steps/s (3.0k); a loaded executable holds about 1,200 memory
  mappings (1,600), about 1,100 (3,000) for its gradient. Measured again on 2026-12-08 (AMD
  EPYC host, the engine as it is now): the step compiles in 4.0 s (6.7 s) at batch 2048 and
  runs 11.4k env steps/s there (10.8k), but 6.7k at batch 64 (8.0k); the fused Ant chunk at
  64 envs compiles in 9.2 s (11.2 s) and trains 5.5k steps/s (6.0k). One run each.

XLA reads XLA_FLAGS once, when the first backend starts, so importing `physics` (whose first
import is this module) applies them. XLA aborts the process on a flag it does not know, and
jaxlib 0.11 removed the fusion-emitter switch (its MLIR emitters are the only ones), so each
flag is added only for the jaxlib versions that have it.

`LOAD_TIME_COMPILE` gives a program that runs once per model its quickest compile, and
`NETWORK_COMPILE` a program that is a neural network with no physics the MLIR emitters back.

Importing `physics` also warns when JAX_DISABLE_MOST_OPTIMIZATIONS is set: at XLA's backend
level 0, with these flags and jaxlib 0.10.2, the constraint solver's Newton loop is miscompiled
(measured: correct at level 0 only with the MLIR emitters or the concurrency-optimized
scheduler, which the flags above turn off for the reasons given).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import warnings

_ACCELERATOR_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin", "libtpu")
_OLDER_EMITTERS = "--xla_cpu_use_fusion_emitters=false"

# each flag with the first jaxlib (major, minor) whose XLA no longer knows it, or None
_FLAGS_UNTIL: tuple[tuple[str, tuple[int, int] | None], ...] = (
    ("--xla_cpu_enable_concurrency_optimized_scheduler=false", None),
    (_OLDER_EMITTERS, (0, 11)),
)


def cpu_xla_flags(jaxlib_version: str) -> tuple[str, ...]:
    """The flags of this module that the XLA of ``jaxlib_version`` accepts."""
    found = re.match(r"(\d+)\.(\d+)", jaxlib_version)
    version = (int(found[1]), int(found[2])) if found else (0, 0)
    return tuple(flag for flag, until in _FLAGS_UNTIL if until is None or version < until)


def _jaxlib_version() -> str:
    try:
        return importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        return "0"


CPU_XLA_FLAGS = cpu_xla_flags(_jaxlib_version())


def accelerator_available() -> bool:
    """Whether JAX will run on a GPU/TPU, judged without starting a backend.

    From JAX_PLATFORMS when it is set, else from an installed CUDA/ROCm/TPU plugin.
    """
    platforms = os.environ.get("JAX_PLATFORMS", "").strip()
    if platforms:
        return any(p.strip() not in ("", "cpu") for p in platforms.split(","))
    return any(importlib.util.find_spec(name) is not None for name in _ACCELERATOR_PLUGINS)


def add_cpu_xla_flags(environ: os._Environ | dict = os.environ) -> tuple[str, ...]:
    """Appends CPU_XLA_FLAGS to XLA_FLAGS when JAX will run on the CPU (other backends' XLA
    builds are not known to accept them), leaving any value the user set for them; returns
    the flags it added."""
    if accelerator_available():
        return ()
    flags = environ.get("XLA_FLAGS", "")
    missing = [f for f in CPU_XLA_FLAGS if f.split("=")[0] not in flags]
    if missing:
        environ["XLA_FLAGS"] = " ".join([flags, *missing]).strip()
    return tuple(missing)


def network_compile(added: tuple[str, ...]) -> dict[str, bool] | None:
    """jax.jit ``compiler_options`` for a program that is a neural network alone, given the
    flags `add_cpu_xla_flags` added: XLA:CPU's MLIR fusion emitters back, where this module chose
    the older ones for the whole process (None where it did not: on an accelerator, with jaxlib
    0.11 or later, or when XLA_FLAGS already said which).

    The older emitters are for physics. In a network they run an activation that reads a
    matrix product's result (tanh, silu, sigmoid; not relu) several times slower: measured on 2
    cores with jaxlib 0.10.2, tanh of a [8192, 256] product costs 4.4 ms on top of the product
    (0.6 ms with the MLIR emitters, and 0.5 ms for tanh of an input array with either). The
    bridge's tanh-MLP V-trace update (CartPole preset) takes 2.5 ms instead of 5.2, its acting
    38 us instead of 53 for 64 envs, the LSTM R2D2 update 3.5 ms instead of 4.0; the Nature CNN
    (relu) ran the same within noise."""
    return {"xla_cpu_use_fusion_emitters": True} if _OLDER_EMITTERS in added else None


LOAD_TIME_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
"""jax.jit ``compiler_options`` for XLA:CPU's quickest compile, for the program run once per
model load (the constants at qpos0, physics.contact). Measured on 2 cores, humanoid's compiles
in 0.22 s instead of 0.58 s (ant: 0.20 s, 0.46 s), within float32 rounding (5e-7) of the
optimized program's results. Never for the step: level 0 miscompiles the constraint solver
(below), which no load-time program contains. Top-level jits only: JAX refuses the options on
a jit nested in another trace, as jit_when_eager's helpers can be."""


_TRUE = ("1", "true", "t", "yes", "y", "on")  # what JAX's bool_env reads as true


def warn_level_zero(environ: os._Environ | dict = os.environ) -> None:
    """Warns when JAX_DISABLE_MOST_OPTIMIZATIONS asks XLA:CPU for its backend optimization
    level 0: there jaxlib 0.10.2 miscompiles the constraint solver's Newton loop (its LAPACK
    Cholesky inside a fori_loop leaves the first iteration's carry wrong), so contact and limit
    forces come out wrong without any error (docs/design.md, "Test suite")."""
    if accelerator_available():
        return
    if environ.get("JAX_DISABLE_MOST_OPTIMIZATIONS", "").strip().lower() in _TRUE:
        warnings.warn(
            "JAX_DISABLE_MOST_OPTIMIZATIONS is set: XLA:CPU at optimization level 0 "
            "miscompiles physics' constraint solver (seen with jaxlib 0.10.2; contact and "
            "limit forces come out wrong); unset it to simulate",
            RuntimeWarning,
            stacklevel=2,
        )


NETWORK_COMPILE = network_compile(add_cpu_xla_flags())
"""`network_compile` for this process: the bridge's acting, learner updates and evaluation, and
the training chunks of envs without physics (accelrl/fused.py)."""
warn_level_zero()
