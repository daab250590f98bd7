"""Solves with the small symmetric positive-definite matrices of one world (the mass matrix,
M + damping, the constraint Hessian H = M + J^T D J), picked per backend and batch size.

Two implementations give the same x (to float32 rounding):

- the library's: jax.scipy.linalg's Cholesky and two triangular solves, which are LAPACK
  calls on the CPU and cuSOLVER/cuBLAS batched kernels on a GPU;
- written out: the factor and both substitutions entry by entry, a few hundred scalar
  operations per world for Ant's 14x14, which XLA fuses into the surrounding elementwise
  kernels.

On one H200, Ant's step at 65,536 worlds spent 28% of its GPU time in potrf and trsm kernels;
written out, the step ran 24% faster. On a 2-core CPU the written-out Newton solve made Ant's
step faster from 256 worlds up (+8% at 256, +30% at 2048, +70% at 8192) and slower below
(-8% at 64, -23% at 16, 2.2x slower for one world), because XLA:CPU runs each small fusion
of a scalar program as its own task. Hence:

- :func:`cho_solve` (differentiable): the library's on the CPU, written out elsewhere;
- :func:`cho_solve_primal` (for solves no derivative passes through, such as the Newton
  steps inside the constraint solver's custom_jvp): also written out on the CPU when vmapped
  over at least ``CPU_UNROLL_MIN_BATCH`` worlds.

:func:`inverse_like_mujoco` (numpy, at load time) inverts M as MuJoCo's compiler does, so a
singular M gives MuJoCo's huge, finite constants instead of an error.

Matrices above ``UNROLL_MAX`` rows always take the library's (the written-out program grows
as n^3, and its compile time with it). The backend is JAX's default one when the solve is
traced (what jit compiles for unless told otherwise): choosing then, rather than per lowering
with lax.platform_dependent, keeps the other implementation out of the traced program, whose
derivative otherwise made gradient tests compile 25-65% longer. Both give the same x, so a
program compiled for another backend only runs slower.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

UNROLL_MAX = 32  # largest n written out (n^3 / 6 multiply-adds in the factor)
CPU_UNROLL_MIN_BATCH = 256  # smallest vmapped batch for which the CPU takes the written-out solve
MINVAL = 1e-15  # MuJoCo's mjMINVAL


def cho_solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """x with a x = b, for one world's symmetric positive-definite ``a`` [n, n] and ``b`` [n]
    or [n, k]; batches come through vmap.

    Where the Cholesky factor of ``a`` fails (float32 rounding made it indefinite) the result
    holds NaN, as jax.scipy.linalg.cho_solve's does, so callers test it with isfinite.
    """
    if a.shape[-1] > UNROLL_MAX or jax.default_backend() == "cpu":
        return _library(a, b)
    return _unrolled(a, b)


@jax.custom_batching.custom_vmap
def cho_solve_primal(a: jax.Array, b: jax.Array) -> jax.Array:
    """:func:`cho_solve` that, vmapped over at least ``CPU_UNROLL_MIN_BATCH`` worlds, takes the
    written-out solve on the CPU too. Not differentiable in reverse mode (custom_vmap is not):
    use it where no derivative passes through."""
    return cho_solve(a, b)


@cho_solve_primal.def_vmap
def _cho_solve_primal_vmap(
    axis_size: int, in_batched: list[bool], a: jax.Array, b: jax.Array
) -> tuple[jax.Array, bool]:
    a, b = (
        x if batched else jnp.broadcast_to(x, (axis_size, *x.shape))
        for x, batched in zip((a, b), in_batched, strict=True)
    )
    if axis_size >= CPU_UNROLL_MIN_BATCH and a.shape[-1] <= UNROLL_MAX:
        return jax.vmap(_unrolled)(a, b), True
    return jax.vmap(cho_solve)(a, b), True


def _library(a: jax.Array, b: jax.Array) -> jax.Array:
    return jsl.cho_solve(jsl.cho_factor(a, lower=True), b)


def _unrolled(a: jax.Array, b: jax.Array) -> jax.Array:
    """Cholesky a = L L^T and the two substitutions, one scalar (or row of ``b``) at a time.
    Reads the lower triangle of ``a``."""
    n = a.shape[-1]
    if n == 0:  # a world without dofs
        return b
    low: list[list[jax.Array]] = [[] for _ in range(n)]  # low[i][j] = L_ij, j <= i
    inv_diag = []
    for j in range(n):
        s = a[j, j]
        for k in range(j):
            s = s - low[j][k] * low[j][k]
        d = jnp.sqrt(s)  # NaN where rounding made a indefinite
        inv_diag.append(1.0 / d)
        low[j].append(d)
        for i in range(j + 1, n):
            s = a[i, j]
            for k in range(j):
                s = s - low[i][k] * low[j][k]
            low[i].append(s * inv_diag[j])
    y: list[jax.Array] = []
    for i in range(n):  # L y = b
        s = b[i]
        for k in range(i):
            s = s - low[i][k] * y[k]
        y.append(s * inv_diag[i])
    x: list[jax.Array] = y.copy()
    for i in reversed(range(n)):  # L^T x = y
        s = y[i]
        for k in range(i + 1, n):
            s = s - low[k][i] * x[k]
        x[i] = s * inv_diag[i]
    return jnp.stack(x)


def inverse_like_mujoco(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M^-1, pivot / diagonal per dof) from M = L^T D L, factored from the last dof back as
    MuJoCo's mj_factorI does; a pivot below MINVAL becomes MINVAL there (MuJoCo warns of a
    singular inertia and goes on), so a singular M gives huge, finite values, as MuJoCo's."""
    a = np.array(m, np.float64)
    n = len(a)
    diag = np.diag(a).copy()
    for k in range(n - 1, -1, -1):
        a[k, k] = max(a[k, k], MINVAL)
        lk = a[k, :k] / a[k, k]
        a[:k, :k] -= np.outer(lk, a[k, :k])
        a[k, :k] = lk
    pivots = np.diag(a).copy()
    unit_lower = np.tril(a, -1) + np.eye(n)
    l_inv = np.linalg.inv(unit_lower)  # unit triangular: always invertible
    ratio = pivots / np.maximum(diag, MINVAL)
    return l_inv @ (l_inv.T / pivots[:, None]), ratio
