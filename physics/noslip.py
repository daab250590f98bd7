"""MuJoCo's noslip post-processor (``<option noslip_iterations>``): friction without creep.

The main solve leaves soft constraints: a regularizer R lets a contact slip slowly under a
steady tangential load. After it, MuJoCo's mj_solNoSlip runs Gauss-Seidel sweeps over the
friction rows alone on the hard problem (A = J M^-1 J^T, R taken out), keeping every other
force (normals, limits, equalities) as solved. Each sweep visits, in MuJoCo's row order:

- each dry-friction row (a dof's, then a tendon's frictionloss): its 1-D minimum, clipped to
  +-frictionloss;
- each contact with friction. Pyramidal cone: each pair of opposing edges (n + mu_j d_j,
  n - mu_j d_j) is re-split with their sum, the normal force, kept. Elliptic cone: the friction
  forces minimize the cost within the ellipse sum (f_j / mu_j)^2 <= f_n^2 of the fixed normal
  force, by MuJoCo's small QCQP (Newton on the multiplier, 20 steps).

A block's update that would raise the cost is undone (MuJoCo's costChange test). MuJoCo stops
early once a sweep improves the scaled cost by less than noslip_tolerance; here every sweep
runs (``noslip_iterations`` of them), as the main solver's Newton steps do, so a converged
result agrees to that tolerance. Everything is fixed-size and branch-free: directions a
contact lacks (its condim) are left as they are by masks.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from physics import linalg

MINVAL = 1e-15  # mjMINVAL
_MINDIAG = 1e-10  # MuJoCo's floor on the diagonal of a block, and its QCQP thresholds
_QCQP_STEPS = 20  # mju_QCQP's Newton steps on the multiplier


class FrictionRows(NamedTuple):
    """Where the friction rows sit among the solve's rows (all rows: unit rows first)."""

    dry: np.ndarray  # [ndry] static row indices of dry-friction rows, in MuJoCo's order
    frictionloss: jax.Array  # [ndry] their force bounds
    contact_start: int  # first row of the contacts' block (rows_per_contact each)
    rows_per_contact: int
    elliptic: bool  # rows are normal + friction (elliptic) or opposing edge pairs (pyramidal)
    mu: jax.Array  # [ncon, dims] friction coefficient of each direction
    # [ncon, dims] bool: the contact has that direction (its condim). An elliptic update
    # leaves the others out; a pyramid's edge pair is skipped: a frictionless contact's edges
    # are copies of its normal row, and only the first may carry its force. (An inactive
    # contact has no force, and no update gives it one.)
    has: jax.Array


def _cholesky(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(L, pivots) of a small SPD ``a`` [n, n] (n static, written out): a = L L^T, and the
    pivots MuJoCo's mju_cholFactor tests against its threshold (their product is det a)."""
    n = a.shape[0]
    L = jnp.zeros_like(a)
    pivots = []
    for j in range(n):
        pivot = a[j, j] - L[j, :j] @ L[j, :j]
        pivots.append(pivot)
        ljj = jnp.sqrt(jnp.maximum(pivot, _MINDIAG))
        L = L.at[j, j].set(ljj)
        for i in range(j + 1, n):
            L = L.at[i, j].set((a[i, j] - L[i, :j] @ L[j, :j]) / ljj)
    return L, jnp.stack(pivots)


def _cho_solve(L: jax.Array, b: jax.Array) -> jax.Array:
    n = L.shape[0]
    y = jnp.zeros_like(b)
    for i in range(n):
        y = y.at[i].set((b[i] - L[i, :i] @ y[:i]) / L[i, i])
    x = jnp.zeros_like(b)
    for i in reversed(range(n)):
        x = x.at[i].set((y[i] - L[i + 1 :, i] @ x[i + 1 :]) / L[i, i])
    return x


def qcqp(
    a: jax.Array, b: jax.Array, d: jax.Array, r: jax.Array, has: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """MuJoCo's mju_QCQP: x minimizing 1/2 x^T a x + x^T b subject to sum (x_i / d_i)^2 <=
    r^2, and whether the constraint binds. Directions outside ``has`` [n] are left out (x = 0
    there). Newton on the multiplier la of (a + la) x = -b, from la = 0, for up to 20 steps,
    stopping where x is inside or the step falls under 1e-10; a + la not positive definite
    (MuJoCo: the determinant under 1e-10 for 2 or 3 directions, a Cholesky pivot for more)
    gives x = 0, unconstrained."""
    own = jnp.sum(has)
    d = jnp.where(has, d, 1.0)
    mask = has[:, None] & has[None, :]
    a = jnp.where(mask, a * d[:, None] * d[None, :], jnp.eye(len(b), dtype=a.dtype))
    b = jnp.where(has, b * d, 0.0)
    dof = has.astype(a.dtype)

    def newton(_: int, carry: tuple) -> tuple:
        la, x, done, failed = carry
        L, pivots = _cholesky(a + la * jnp.diag(dof))
        fails = jnp.where(own <= 3, jnp.prod(pivots) < _MINDIAG, jnp.any(pivots < _MINDIAG))
        trial = -_cho_solve(L, b)
        excess = trial @ trial - r * r
        curvature = 2.0 * (trial @ _cho_solve(L, trial))
        delta = excess / jnp.where(curvature > 0, curvature, 1.0)
        stop = fails | (excess < _MINDIAG) | (delta < _MINDIAG)
        x = jnp.where(done, x, jnp.where(fails, 0.0, trial))
        failed = failed | (~done & fails)
        la = jnp.where(done | stop, la, la + delta)
        return la, x, done | stop, failed

    zero = jnp.zeros((), a.dtype)
    la, x, _, failed = jax.lax.fori_loop(
        0, _QCQP_STEPS, newton, (zero, jnp.zeros_like(b), jnp.array(False), jnp.array(False))
    )
    return x * d, (la != 0) & ~failed


def _accept(A: jax.Array, new: jax.Array, old: jax.Array, res: jax.Array) -> jax.Array:
    """``new``, or ``old`` where the change would raise the cost (MuJoCo's costChange)."""
    delta = new - old
    change = 0.5 * delta @ A @ delta + delta @ res
    return jnp.where(change > 1e-10, old, new)


def _block(A: jax.Array, start: jax.Array, n: int) -> jax.Array:
    """A[start:start+n, start:start+n] with its diagonal floored at 1e-10 (extractBlock)."""
    block = jax.lax.dynamic_slice(A, (start, start), (n, n))
    return jnp.where(jnp.eye(n, dtype=bool), jnp.maximum(block, _MINDIAG), block)


def noslip(
    A: jax.Array,
    b: jax.Array,
    force: jax.Array,
    rows: FrictionRows,
    iterations: int,
) -> jax.Array:
    """Row forces after ``iterations`` noslip sweeps from ``force`` [nc] (the main solve's).

    ``A`` [nc, nc] is J M^-1 J^T over all rows, ``b`` [nc] J qacc_smooth - aref, so a row
    block's residual is b + A force (MuJoCo's, with R subtracted)."""
    ncon, dims = rows.mu.shape
    k, start = rows.rows_per_contact, rows.contact_start
    dry = jnp.asarray(rows.dry, jnp.int32)

    def residual(f: jax.Array, r: jax.Array, n: int) -> jax.Array:  # rows r .. r + n - 1
        return (
            jax.lax.dynamic_slice(b, (r,), (n,))
            + jax.lax.dynamic_slice(A, (r, 0), (n, A.shape[1])) @ f
        )

    def dry_row(i: int, f: jax.Array) -> jax.Array:
        r = dry[i]
        res = b[r] + A[r] @ f
        new = f[r] - res / jnp.maximum(A[r, r], MINVAL)
        return f.at[r].set(jnp.clip(new, -rows.frictionloss[i], rows.frictionloss[i]))

    def edge_pairs(c: int, f: jax.Array) -> jax.Array:
        for j in range(dims):
            r = start + c * k + 2 * j
            Ac = _block(A, r, 2)
            res = residual(f, r, 2)
            old = jax.lax.dynamic_slice(f, (r,), (2,))
            bc = res - Ac @ old
            mid = 0.5 * (old[0] + old[1])
            k1 = Ac[0, 0] + Ac[1, 1] - Ac[0, 1] - Ac[1, 0]
            k0 = mid * (Ac[0, 0] - Ac[1, 1]) + bc[0] - bc[1]
            y = -k0 / jnp.where(k1 < MINVAL, 1.0, k1)
            y = jnp.where(k1 < MINVAL, 0.0, jnp.clip(y, -mid, mid))
            new = _accept(Ac, jnp.stack([mid + y, mid - y]), old, res)
            new = jnp.where(rows.has[c, j], new, old)
            f = jax.lax.dynamic_update_slice(f, new, (r,))
        return f

    def cone(c: int, f: jax.Array) -> jax.Array:
        r = start + c * k + 1  # the friction rows; the normal force sits just before
        Ac = _block(A, r, dims)
        res = residual(f, r, dims)
        old = jax.lax.dynamic_slice(f, (r,), (dims,))
        normal = f[r - 1]
        has = rows.has[c]
        mu = jnp.where(has, rows.mu[c], 1.0)
        x, binds = qcqp(Ac, res - Ac @ old, mu, normal, has)
        # on the ellipse: put x exactly on it (the QCQP's multiplier is approximate)
        pushed = normal >= MINVAL  # else no friction (MuJoCo's guard)
        binds = binds & pushed
        scale = normal * normal / jnp.maximum(jnp.sum((x / mu) ** 2), MINVAL)
        x = jnp.where(binds, x * jnp.sqrt(jnp.where(binds, scale, 1.0)), x)
        x = jnp.where(pushed, x, 0.0)
        return jax.lax.dynamic_update_slice(f, _accept(Ac, x, old, res), (r,))

    def sweep(_: int, f: jax.Array) -> jax.Array:
        if len(rows.dry):
            f = jax.lax.fori_loop(0, len(rows.dry), dry_row, f)
        if ncon and dims:
            f = jax.lax.fori_loop(0, ncon, cone if rows.elliptic else edge_pairs, f)
        return f

    return jax.lax.fori_loop(0, iterations, sweep, force)


def delassus(M: jax.Array, J: jax.Array) -> jax.Array:
    """J M^-1 J^T [nc, nc] for one world (dense: nv is small)."""
    return J @ linalg.cho_solve(M, J.T)
