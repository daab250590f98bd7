"""MuJoCo soft constraints: impedance, reference acceleration, regularizer and a fixed-step solver.

MuJoCo turns each constraint row i (Jacobian row J_i, position r_i = efc_pos - margin,
velocity v_i = J_i qvel) into a soft constraint with impedance d_i = d(r_i) in (0, 1),
regularizer R_i = (1 - d_i) / d_i * A_ii (A_ii an approximation of (J M^-1 J^T)_ii) and
reference acceleration aref_i = -b v_i - k d_i r_i. The constrained acceleration minimizes the
convex primal cost (MuJoCo's "Newton" solver problem)

    f(qacc) = 1/2 (qacc - qacc_smooth)^T M (qacc - qacc_smooth)
              + sum_i 1/2 D_i min(J_i qacc - aref_i, 0)^2,      D_i = 1 / R_i,

for inequality rows (joint limits, frictionless contacts and the edges of MuJoCo's default
pyramidal friction cone), and the row forces are efc_force_i = -D_i min(J_i qacc - aref_i, 0).
Friction-loss rows (dry friction on a dof, force bounded by +-frictionloss) add MuJoCo's Huber
cost instead: quadratic while |D_i jar_i| < frictionloss, linear beyond. Both are one rule: a
row's force is -D_i jar_i clipped to its bounds [lo_i, hi_i] ([0, inf) for inequalities,
[-f, f] for friction loss), and its cost is the integral of -force over jar.

:func:`solve` minimizes f with a FIXED number of Newton steps (H = M + J^T diag(D active) J,
a dense Cholesky solve, nv is small), each followed by an exact line search on the piecewise
quadratic 1-D cost, done in closed form by evaluating its derivative at every breakpoint
(O(nc^2), no loop). The cost is strictly convex, so the minimizer (and the forces) is the one
MuJoCo's iterative solvers converge to; fixed counts keep every world of a vmapped batch in
lockstep.
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from physics import linalg

MINIMP = 0.0001  # mjMINIMP: impedance is clamped to [MINIMP, MAXIMP]
MAXIMP = 0.9999  # mjMAXIMP
MINVAL = 1e-15  # mjMINVAL
DEFAULT_SOLREF = (0.02, 1.0)  # (timeconst, dampratio)
DEFAULT_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)  # (dmin, dmax, width, midpoint, power)
NEWTON_ITERATIONS = 6  # Newton steps of solve(); MuJoCo's optimum is reached in 3-4
HESSIAN_FORMS = ("broadcast", "matmul")
"""How a Newton step forms J^T D J for H: "broadcast", the rows' outer products summed (on a
2-core CPU XLA fuses that across worlds, and a matrix product was no faster), or "matmul", one
matrix product per world (a batched GEMM under vmap; the candidate on GPUs, where the broadcast
sum was the step's largest kernel). Both give the same H to float32 rounding."""


_T = TypeVar("_T")
Bounds = tuple[jax.Array, jax.Array]  # per-row force bounds (lo [n], hi [n]), lo <= 0 <= hi


def _jar_range(R: jax.Array, bounds: Bounds) -> tuple[jax.Array, jax.Array]:
    """(-hi R, -lo R): the jar range where a row's force -D jar is within its bounds.

    An infinite bound gives an infinite end without an inf * 0 in its derivatives (which
    would be NaN)."""
    lo, hi = bounds
    finite_hi, finite_lo = jnp.isfinite(hi), jnp.isfinite(lo)
    return (
        jnp.where(finite_hi, -jnp.where(finite_hi, hi, 0.0) * R, -jnp.inf),
        jnp.where(finite_lo, -jnp.where(finite_lo, lo, 0.0) * R, jnp.inf),
    )


def _clipped_jar(jar: jax.Array, R: jax.Array, bounds: Bounds | None) -> jax.Array:
    """jar clipped to the rows' unsaturated range: there the force is -D jar."""
    if bounds is None:
        return jnp.minimum(jar, 0.0)
    return jnp.clip(jar, *_jar_range(R, bounds))


def _unsaturated(jar: jax.Array, R: jax.Array, bounds: Bounds | None) -> jax.Array:
    """Rows whose force is -D jar (not at a bound): those that enter the Hessian."""
    if bounds is None:
        return jar < 0.0
    low, high = _jar_range(R, bounds)
    return (jar > low) & (jar < high)


def row_cost(jar: jax.Array, D: jax.Array, R: jax.Array, bounds: Bounds | None) -> jax.Array:
    """Sum of the rows' costs: 1/2 D y^2 + D y (jar - y), y = jar clipped (see the module)."""
    y = _clipped_jar(jar, R, bounds)
    return jnp.sum(D * y * (jar - 0.5 * y))


class Cones(NamedTuple):
    """Elliptic friction cones (MuJoCo's cone="elliptic"): the last (1 + d) n rows of J are n
    contacts' rows, the normal and d friction directions (tangents 1 and 2; torsional and
    rolling for condim 4 and 6), whose cost is MuJoCo's squared distance to the cone in the
    space U = (mu jar_n, f_1 jar_1, ..., f_d jar_d): zero inside the cone N >= mu T (N = U_n,
    T = |U_f|), quadratic 1/2 sum D jar^2 inside its dual (mu N + T <= 0), and
    1/2 Dm (N - mu T)^2 between, Dm = D_n / (mu^2 (1 + mu^2)). A direction with friction 0 is
    not part of the cone (a contact of lower condim). Slots with `on` False are frictionless:
    their normal row is an ordinary inequality and their friction rows carry nothing."""

    mu: jax.Array  # [n] sliding friction / sqrt(impratio) (MuJoCo's con->mu)
    friction: jax.Array  # [n, d] each friction direction's coefficient (0: not one)
    on: jax.Array  # [n] bool: frictional (condim > 1)


def _cone_geometry(jar3: jax.Array, cones: Cones) -> tuple:
    """(U [n, 1 + d], N, T, zones top/bottom/middle) of the cones' rows jar3 [n, 1 + d]."""
    scale = jnp.concatenate([cones.mu[:, None], cones.friction], axis=-1)
    u = scale * jar3
    n, t = u[:, 0], _norm(u[:, 1:])
    return scale, u, n, t, *_zones(n, t, cones.mu)


def _norm(x: jax.Array) -> jax.Array:
    """|x| over the last axis, with a finite gradient at 0."""
    x2 = jnp.sum(x * x, axis=-1)
    return jnp.where(x2 > 0.0, jnp.sqrt(jnp.where(x2 > 0.0, x2, 1.0)), 0.0)


def _zones(n: jax.Array, t: jax.Array, mu: jax.Array) -> tuple:
    """(top, bottom, middle): inside the cone N >= mu T (T = 0 and N >= 0 included), inside
    its dual mu N + T <= 0 (T = 0 and N < 0 included), between."""
    top = n >= mu * t
    bottom = ~top & (mu * n + t <= 0.0)
    return top, bottom, ~top & ~bottom


def _cone_mass(D3: jax.Array, cones: Cones) -> jax.Array:
    return D3[:, 0] / (cones.mu**2 * (1.0 + cones.mu**2))


def _unit_tangent(u: jax.Array, n: jax.Array, t: jax.Array, middle: jax.Array) -> tuple:
    """(e = U_t / T, r = N / T) between the zones (where T > 0), written so that nothing
    divides by a power of a tiny T (float32: T^3 underflows)."""
    ts = jnp.where(middle, t, 1.0)
    return u[:, 1:] / ts[:, None], n / ts


def cone_forces(jar3: jax.Array, D3: jax.Array, cones: Cones) -> jax.Array:
    """[n, 1 + d] row forces (normal, friction directions) of the cones at jar3, the cost's
    -d / d jar."""
    _, u, n, t, _, bottom, middle = _cone_geometry(jar3, cones)
    e, _ = _unit_tangent(u, n, t, middle)
    normal = -_cone_mass(D3, cones) * (n - cones.mu * t) * cones.mu
    tangent = -normal[:, None] * e * cones.friction
    between = jnp.concatenate([normal[:, None], tangent], axis=-1)
    force = jnp.where(bottom[:, None], -D3 * jar3, jnp.where(middle[:, None], between, 0.0))
    frictionless = jnp.zeros_like(jar3).at[:, 0].set(-D3[:, 0] * jnp.minimum(jar3[:, 0], 0.0))
    return jnp.where(cones.on[:, None], force, frictionless)


def cone_cost(jar3: jax.Array, D3: jax.Array, cones: Cones) -> jax.Array:
    """The cones' summed cost at jar3 [n, 3]."""
    _, _, n, t, _, bottom, middle = _cone_geometry(jar3, cones)
    s = n - cones.mu * t
    cost = jnp.where(
        bottom,
        0.5 * jnp.sum(D3 * jar3**2, axis=-1),
        jnp.where(middle, 0.5 * _cone_mass(D3, cones) * s * s, 0.0),
    )
    frictionless = 0.5 * D3[:, 0] * jnp.minimum(jar3[:, 0], 0.0) ** 2
    return jnp.sum(jnp.where(cones.on, cost, frictionless))


def cone_hessians(jar3: jax.Array, D3: jax.Array, cones: Cones) -> jax.Array:
    """[n, 1 + d, 1 + d] each cone's cost Hessian in jar (MuJoCo's contact H; PSD)."""
    scale, u, n, t, _, bottom, middle = _cone_geometry(jar3, cones)
    mu = cones.mu
    e, r = _unit_tangent(u, n, t, middle)
    corner = -mu[:, None] * e  # d2 / dN dU_t
    tangent = (mu * r)[:, None, None] * e[:, :, None] * e[:, None, :] + (mu * mu - mu * r)[
        :, None, None
    ] * jnp.eye(cones.friction.shape[-1])
    h_u = jnp.concatenate(
        [
            jnp.concatenate([jnp.ones_like(mu)[:, None, None], corner[:, None, :]], axis=2),
            jnp.concatenate([corner[:, :, None], tangent], axis=2),
        ],
        axis=1,
    )
    h_mid = _cone_mass(D3, cones)[:, None, None] * scale[:, :, None] * h_u * scale[:, None, :]
    h_quad = jax.vmap(jnp.diag)(D3)
    h = jnp.where(bottom[:, None, None], h_quad, jnp.where(middle[:, None, None], h_mid, 0.0))
    normal_only = (jnp.arange(D3.shape[-1]) == 0) * (jar3[:, :1] < 0.0)
    frictionless = jax.vmap(jnp.diag)(D3 * normal_only)
    return jnp.where(cones.on[:, None, None], h, frictionless)


class ConeLine(NamedTuple):
    """The cones' cost along jar3 + a jd3, prepared once per line so that each of a line
    search's many evaluations costs a few flops and one square root per cone: in U space
    N(a) = n + a dn and U_t(a) = u + a v; inside the dual cone the cost's slope is
    dual_g + a dual_h; frictionless slots keep their normal row (jar_n + a jd_n, D_n)."""

    n: jax.Array  # [c]
    dn: jax.Array  # [c]
    u: jax.Array  # [c, d]
    v: jax.Array  # [c, d]
    dual_c: jax.Array  # [c] 1/2 sum D jar^2
    dual_g: jax.Array  # [c] sum D jar jd
    dual_h: jax.Array  # [c] sum D jd^2
    jar_n: jax.Array  # [c]
    jd_n: jax.Array  # [c]
    D_n: jax.Array  # [c]
    mass: jax.Array  # [c] Dm
    mu: jax.Array  # [c]
    on: jax.Array  # [c] bool

    @classmethod
    def of(cls, jar3: jax.Array, jd3: jax.Array, D3: jax.Array, cones: Cones) -> ConeLine:
        scale = jnp.concatenate([cones.mu[:, None], cones.friction], axis=-1)
        u, v = scale * jar3, scale * jd3
        return cls(
            u[:, 0],
            v[:, 0],
            u[:, 1:],
            v[:, 1:],
            0.5 * jnp.sum(D3 * jar3 * jar3, axis=-1),
            jnp.sum(D3 * jar3 * jd3, axis=-1),
            jnp.sum(D3 * jd3 * jd3, axis=-1),
            jar3[:, 0],
            jd3[:, 0],
            D3[:, 0],
            _cone_mass(D3, cones),
            cones.mu,
            cones.on,
        )

    def derivatives(self, a: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(d cost / da, d2 cost / da2) at a: the zones as in :func:`_cone_geometry`."""
        mu, n = self.mu, self.n + a * self.dn
        ut = self.u + a * self.v
        t = _norm(ut)
        _, bottom, middle = _zones(n, t, mu)
        ts = jnp.where(middle, t, 1.0)  # (T > 0 between the zones; never a power of it)
        dt = jnp.sum(ut * self.v, axis=-1) / ts  # dT/da
        s = n - mu * t
        ds = self.dn - mu * dt
        # s T'' = (s / T) (|V_t|^2 - T'^2), s / T = N / T - mu
        s_ddt = (n / ts - mu) * (jnp.sum(self.v * self.v, axis=-1) - dt * dt)
        g = jnp.where(
            bottom,
            self.dual_g + a * self.dual_h,
            jnp.where(middle, self.mass * s * ds, 0.0),
        )
        h = jnp.where(
            bottom, self.dual_h, jnp.where(middle, self.mass * (ds * ds - mu * s_ddt), 0.0)
        )
        jn = self.jar_n + a * self.jd_n
        g = jnp.where(self.on, g, self.D_n * jnp.minimum(jn, 0.0) * self.jd_n)
        h = jnp.where(self.on, h, jnp.where(jn < 0.0, self.D_n * self.jd_n**2, 0.0))
        return jnp.sum(g), jnp.sum(h)

    def cost(self, a: jax.Array) -> jax.Array:
        """The cones' summed cost at a (:func:`cone_cost` along the line)."""
        mu, n = self.mu, self.n + a * self.dn
        t = _norm(self.u + a * self.v)
        _, bottom, middle = _zones(n, t, mu)
        s = n - mu * t
        cost = jnp.where(
            bottom,
            self.dual_c + a * (self.dual_g + 0.5 * a * self.dual_h),
            jnp.where(middle, 0.5 * self.mass * s * s, 0.0),
        )
        jn = jnp.minimum(self.jar_n + a * self.jd_n, 0.0)
        return jnp.sum(jnp.where(self.on, cost, 0.5 * self.D_n * jn * jn))

    def breaks(self) -> jax.Array:
        """[4 c] the a where a cone changes zone (N = mu T with N >= 0, mu N = -T with
        N <= 0: each a quadratic in a) or a frictionless slot's normal row turns, inf where
        none: phi' is smooth between them."""
        mu, n, dn = self.mu, self.n, self.dn
        uu, uv, vv = (
            jnp.sum(x * y, axis=-1)
            for x, y in ((self.u, self.u), (self.u, self.v), (self.v, self.v))
        )

        def roots(p: jax.Array, q: jax.Array, r: jax.Array, side: float) -> list[jax.Array]:
            """Roots of p a^2 + 2 q a + r = 0 where side N >= 0 (inf where none)."""
            disc = q * q - p * r
            k = -(q + jnp.where(q < 0.0, -1.0, 1.0) * jnp.sqrt(jnp.maximum(disc, 0.0)))
            out = []
            for num, den in ((k, p), (r, k)):
                ok = (disc >= 0.0) & (jnp.abs(den) > MINVAL) & self.on
                a = num / jnp.where(ok, den, 1.0)
                out.append(jnp.where(ok & (side * (n + a * dn) >= 0.0), a, jnp.inf))
            return out

        m2 = mu * mu
        top = roots(dn * dn - m2 * vv, n * dn - m2 * uv, n * n - m2 * uu, 1.0)
        bottom = roots(m2 * dn * dn - vv, m2 * n * dn - uv, m2 * n * n - uu, -1.0)
        nz = (jnp.abs(self.jd_n) > MINVAL) & ~self.on
        turn = jnp.where(nz, -self.jar_n / jnp.where(nz, self.jd_n, 1.0), jnp.inf)
        return jnp.concatenate(top + [jnp.where(self.on, bottom[0], turn), bottom[1]])


ConeRows = tuple[jax.Array, Cones]
"""(D3 [n, 1 + d], cones): the cone rows' D and the cones, split off the row-wise rows."""


def _cone_part(x: jax.Array, D3: jax.Array) -> jax.Array:
    """The cone rows of a full row vector x, as [n, 1 + d] (the cones' rows come last)."""
    return x[x.shape[0] - D3.size :].reshape(D3.shape)


def split_cones(D: jax.Array, cones: Cones | None) -> tuple[jax.Array, ConeRows | None]:
    """(D of the row-wise rows, cone rows zeroed; the cone rows) for `cones` (None: none)."""
    if cones is None:
        return D, None
    width = 1 + cones.friction.shape[-1]
    start = D.shape[0] - width * cones.mu.shape[0]
    return D.at[start:].set(0.0), (D[start:].reshape(-1, width), cones)


def _neg_forces(
    jar: jax.Array, D: jax.Array, R: jax.Array, bounds: Bounds | None, cone_rows: ConeRows | None
) -> jax.Array:
    """-efc_force at jar: row-wise rows -D jar clipped to bounds, then the cones' rows."""
    out = D * _clipped_jar(jar, R, bounds)
    if cone_rows is None:
        return out
    D3, cones = cone_rows
    return out.at[out.shape[0] - D3.size :].set(
        -cone_forces(_cone_part(jar, D3), D3, cones).ravel()
    )


def total_cost(
    jar: jax.Array, D: jax.Array, R: jax.Array, bounds: Bounds | None, cones: Cones | None
) -> jax.Array:
    """The constraint cost at jar: row-wise rows (row_cost) and cones (cone_cost)."""
    D, cone_rows = split_cones(D, cones)
    cost = row_cost(jar, D, R, bounds)
    if cone_rows is None:
        return cost
    D3, cones = cone_rows
    return cost + cone_cost(_cone_part(jar, D3), D3, cones)


class SolverResult(NamedTuple):
    """Output of :func:`solve`."""

    qacc: jax.Array  # [nv] constrained acceleration
    qfrc_constraint: jax.Array  # [nv] J^T efc_force
    efc_force: jax.Array  # [nc] row forces (>= 0; zero on masked rows)


def _descent_direction(H: jax.Array, grad: jax.Array) -> jax.Array:
    """The Newton direction -H^-1 grad, or the Jacobi one -grad / diag(H) where the Cholesky
    of H fails.

    H = M + J^T D J is positive definite, but float32 rounds its entries to about 1e-7 of the
    largest, which can exceed its smallest eigenvalue. Deep contacts (J^T D J ~ 5e5) on a mass
    matrix whose weakest direction is ~2e-3 (test_contacts_vs_mujoco's deep overlap) give an H
    of condition ~3e8, past float32's 1 / eps = 8e6: whether its Cholesky succeeds then depends
    on the compiler's rounding (it failed there when compiled at LLVM -O0, not at -O2), and a
    failed one made every later state NaN. The line search makes any descent direction a step
    downhill, and the next Newton steps (another active set) recover the quadratic rate.
    """
    newton = -linalg.cho_solve_primal(H, grad)
    return jnp.where(jnp.all(jnp.isfinite(newton)), newton, -grad / jnp.diagonal(H))


def impedance(pos: jax.Array, solimp: jax.Array) -> jax.Array:
    """Impedance d(r) in [MINIMP, MAXIMP], r = efc_pos - margin (any leading shape).

    Sigmoid from dmin at r = 0 to dmax at |r| >= width: y(x) = x^p / mid^(p-1) below the
    midpoint, 1 - (1 - x)^p / (1 - mid)^(p-1) above it, x = |r| / width, as MuJoCo's
    ``getimpedance``.
    """
    solimp = jnp.asarray(solimp)
    dmin = jnp.clip(solimp[..., 0], MINIMP, MAXIMP)
    dmax = jnp.clip(solimp[..., 1], MINIMP, MAXIMP)
    width = jnp.maximum(solimp[..., 2], MINVAL)
    mid = jnp.clip(solimp[..., 3], MINIMP, MAXIMP)
    power = jnp.maximum(solimp[..., 4], 1.0)
    x = jnp.clip(jnp.abs(pos) / width, 0.0, 1.0)  # clipped so unused branches stay finite
    lower = x**power / mid ** (power - 1.0)
    upper = 1.0 - (1.0 - x) ** power / (1.0 - mid) ** (power - 1.0)
    y = jnp.where(x <= mid, lower, upper)
    return dmin + y * (dmax - dmin)


def reference_acceleration(
    pos: jax.Array,
    vel: jax.Array,
    d: jax.Array,
    solref: jax.Array,
    solimp: jax.Array,
    timestep: jax.Array | float,
    refsafe: bool = True,
) -> jax.Array:
    """aref = -b vel - k d pos (pos = efc_pos - margin), MuJoCo's ``mj_makeImpedance``.

    Standard solref (timeconst > 0): k = 1 / (dmax^2 timeconst^2 dampratio^2),
    b = 2 / (dmax timeconst), with timeconst >= 2 timestep when ``refsafe`` (MuJoCo's
    default, flag mjDSBL_REFSAFE off). Direct solref (both <= 0): k = -solref0 / dmax^2,
    b = -solref1 / dmax.
    """
    solref, solimp = jnp.asarray(solref), jnp.asarray(solimp)
    dmax = jnp.clip(solimp[..., 1], MINIMP, MAXIMP)
    timeconst, dampratio = solref[..., 0], solref[..., 1]
    if refsafe:
        timeconst = jnp.where(timeconst > 0.0, jnp.maximum(timeconst, 2.0 * timestep), timeconst)
    standard = timeconst > 0.0
    tc = jnp.where(standard, timeconst, 1.0)
    dr = jnp.where(standard, dampratio, 1.0)
    k = jnp.where(standard, 1.0 / (dmax * dmax * tc * tc * dr * dr), -timeconst / (dmax * dmax))
    b = jnp.where(standard, 2.0 / (dmax * tc), -dampratio / dmax)
    return -b * vel - k * d * pos


def regularizer(diag_approx: jax.Array, d: jax.Array) -> jax.Array:
    """R = (1 - d) / d * A_ii (floored at MINVAL so D = 1 / R stays finite)."""
    return jnp.maximum((1.0 - d) / d * diag_approx, MINVAL)


def pyramid_jacobian(jn: jax.Array, jf: jax.Array, mu: jax.Array) -> jax.Array:
    """[2 d, nv] edge rows of MuJoCo's pyramidal cone with d friction directions.

    ``jn`` [nv] is the contact's normal row, ``jf`` [d, nv] its friction rows (the relative
    velocity of geom2 against geom1 along tangent 1 and 2; then the relative angular velocity
    about the normal, torsional, and about the tangents, rolling), ``mu`` [d] their friction
    coefficients. Row order as MuJoCo: n + mu_1 f_1, n - mu_1 f_1, n + mu_2 f_2, ...
    """
    edge = mu[:, None] * jf
    return jnp.stack([jn + edge, jn - edge], axis=1).reshape(-1, jn.shape[-1])


def pyramid_diag_approx(
    invweight: jax.Array, mu: jax.Array, impratio: jax.Array | float = 1.0, edges: int = 4
) -> jax.Array:
    """A_ii MuJoCo uses for every pyramid edge: 2 mu^2 (1 + mu^2) invweight / impratio, mu
    the sliding friction (for the torsional and rolling edges too, as MuJoCo 4.0).

    ``invweight`` is the sum of the two bodies' translational ``body_invweight0``
    (computed by MuJoCo at qpos0); with R = (1 - d) / d * A_ii this reproduces efc_R.
    """
    return jnp.broadcast_to(2.0 * mu * mu * (1.0 + mu * mu) * invweight / impratio, (edges,))


def body_invweight0(M: jax.Array, jacp: jax.Array, jacr: jax.Array) -> jax.Array:
    """[nbody, 2] MuJoCo's body_invweight0: mean diagonal (translation, rotation) of J M^-1 J^T.

    ``jacp``/``jacr`` [nbody, 3, nv] are the bodies' translational/rotational Jacobians at
    their centres of mass, evaluated (like M) at qpos0 when the model is built. Bodies
    without dofs (the world) get 0.
    """
    Minv = jnp.linalg.inv(M)
    trans = jnp.einsum("bin,nm,bim->b", jacp, Minv, jacp) / 3.0
    rot = jnp.einsum("bin,nm,bim->b", jacr, Minv, jacr) / 3.0
    return jnp.stack([trans, rot], axis=-1)


def dof_invweight0(M: jax.Array, group: jax.Array, ngroup: int) -> jax.Array:
    """[nv] MuJoCo's dof_invweight0: diag(M^-1) averaged over ``group`` [nv] of dof ids.

    Groups as MuJoCo: a free joint's 3 translational and 3 rotational dofs, a ball joint's
    3 dofs, every hinge/slide dof alone. Used as A_ii of joint-limit rows.
    """
    diag = jnp.diag(jnp.linalg.inv(M))
    total = jax.ops.segment_sum(diag, group, ngroup)
    count = jax.ops.segment_sum(jnp.ones_like(diag), group, ngroup)
    return (total / count)[group]


def pyramid_force(efc_force: jax.Array, mu: jax.Array) -> jax.Array:
    """Contact force [1 + d] in the contact frame (normal, then along each friction
    direction) from the 2 d edge forces, ``mu`` [d] the directions' friction."""
    pairs = efc_force.reshape(-1, 2)
    return jnp.concatenate([jnp.sum(efc_force)[None], mu * (pairs[:, 0] - pairs[:, 1])])


def soft_rows(
    pos: jax.Array,
    vel: jax.Array,
    diag_approx: jax.Array,
    solref: jax.Array,
    solimp: jax.Array,
    timestep: jax.Array | float,
    impedance_pos: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """(aref, R) of constraint rows from pos - margin, J qvel and A_ii; the impedance comes
    from `impedance_pos` where given (a connect's gap norm), else from pos."""
    d = impedance(pos if impedance_pos is None else impedance_pos, solimp)
    return reference_acceleration(pos, vel, d, solref, solimp, timestep), regularizer(
        diag_approx, d
    )


class _Line(NamedTuple):
    """The 1-D cost phi(a) = f(qacc + a step) of a line search, through its derivative:
    phi'(a) = dMr + a dMd + sum_i D_i y_i(a) jd_i, y_i the row's jar_i + a jd_i clipped to
    where its force is unbounded (piecewise linear and increasing in a), plus the cones'
    (their D zero here)."""

    jar: jax.Array
    jd: jax.Array
    D: jax.Array
    R: jax.Array
    bounds: Bounds | None
    dMr: jax.Array
    dMd: jax.Array
    cones: ConeLine | None = None

    @classmethod
    def of(
        cls,
        jar: jax.Array,
        jd: jax.Array,
        D: jax.Array,
        R: jax.Array,
        bounds: Bounds | None,
        dMr: jax.Array,
        dMd: jax.Array,
        cone_rows: ConeRows | None,
    ) -> _Line:
        """The line along jd from jar; with cones, its row-wise part covers only the rows
        before theirs (a line search evaluates it many times)."""
        if cone_rows is None:
            return cls(jar, jd, D, R, bounds, dMr, dMd)
        D3, cones = cone_rows
        k = jar.shape[0] - D3.size
        rows = None if bounds is None else (bounds[0][:k], bounds[1][:k])
        cone_line = ConeLine.of(_cone_part(jar, D3), _cone_part(jd, D3), D3, cones)
        return cls(jar[:k], jd[:k], D[:k], R[:k], rows, dMr, dMd, cone_line)

    def derivatives(self, a: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(phi'(a), phi''(a)), the second on the linear piece holding a (with cones: their
        exact curvature at a)."""
        j = self.jar + a * self.jd
        act = jnp.where(_unsaturated(j, self.R, self.bounds), self.D, 0.0)
        g = (
            self.dMr
            + a * self.dMd
            + jnp.sum(self.D * _clipped_jar(j, self.R, self.bounds) * self.jd)
        )
        h = self.dMd + jnp.sum(act * self.jd * self.jd)
        if self.cones is not None:
            cg, ch = self.cones.derivatives(a)
            g, h = g + cg, h + ch
        return g, h

    def cost(self, a: jax.Array) -> jax.Array:
        """phi(a) up to a constant of the line (the Gauss term at a = 0): what comparing its
        points needs."""
        cost = a * (self.dMr + 0.5 * a * self.dMd)
        cost = cost + row_cost(self.jar + a * self.jd, self.D, self.R, self.bounds)
        return cost if self.cones is None else cost + self.cones.cost(a)

    def row_breaks(self) -> jax.Array:
        """The a >= 0 where a row-wise row's force reaches a bound (0 where none): where
        phi' changes slope."""
        jar, jd, R, bounds = self.jar, self.jd, self.R, self.bounds
        nz = (jnp.abs(jd) > MINVAL) & (self.D > 0.0)
        edges = [jnp.zeros_like(jar)] if bounds is None else list(_jar_range(R, bounds))
        return jnp.concatenate(
            [
                jnp.where(
                    nz & jnp.isfinite(e),
                    jnp.maximum(
                        (jnp.where(jnp.isfinite(e), e, 0.0) - jar) / jnp.where(nz, jd, 1.0), 0.0
                    ),
                    0.0,
                )
                for e in edges
            ]
        )


def _line_search(line: _Line) -> jax.Array:
    """Exact minimizer a >= 0 of phi along a descent direction.

    phi' changes slope where a row's force reaches a bound. Evaluating phi' at all of these
    breakpoints brackets the root between consecutive ones, where phi' is linear and its root
    exact.
    """
    line = line._replace(dMd=jnp.maximum(line.dMd, MINVAL))
    breaks = line.row_breaks()
    g = jax.vmap(lambda a: line.derivatives(a)[0])(breaks)
    lo = jnp.max(jnp.where(g <= 0.0, breaks, 0.0))
    hi = jnp.min(jnp.where(g > 0.0, breaks, jnp.inf))
    probe = jnp.where(jnp.isfinite(hi), 0.5 * (lo + hi), lo + 1.0)  # inside (lo, hi)
    g_probe, slope = line.derivatives(probe)  # phi' is linear on (lo, hi)
    return jnp.maximum(probe - g_probe / slope, 0.0)


def _line_search_newton(line: _Line, steps: int = 6, start: float = 0.0) -> jax.Array:
    """Minimizer a >= 0 of phi along a descent direction in O(nc) per step (not O(nc^2)).

    Safeguarded 1-D Newton on the piecewise linear, increasing phi'(a): each step jumps to the
    root of phi' on the current linear piece (exact once the piece holding the root is hit),
    falling back to bisection of the bracket [lo, hi] (phi'(lo) <= 0 < phi'(hi)), from a =
    `start`.
    """
    line = line._replace(dMd=jnp.maximum(line.dMd, MINVAL))

    def body(_: int, carry: tuple) -> tuple:
        a, lo, hi = carry
        g, h = line.derivatives(a)
        lo = jnp.where(g <= 0.0, jnp.maximum(lo, a), lo)
        hi = jnp.where(g > 0.0, jnp.minimum(hi, a), hi)
        nxt = a - g / h
        inside = (nxt >= lo) & (nxt <= hi)
        bisect = jnp.where(jnp.isfinite(hi), 0.5 * (lo + hi), 2.0 * lo + 1.0)
        return jnp.where(inside, nxt, bisect), lo, hi

    zero = jnp.zeros_like(line.dMr)
    a, lo, hi = jax.lax.fori_loop(
        0, steps, body, (zero + start, zero, jnp.full_like(line.dMr, jnp.inf)), unroll=True
    )
    return jnp.clip(a, lo, hi)


def _line_search_cone(line: _Line, iterations: int = 3) -> jax.Array:
    """The line search with elliptic cones: a bracketed search of phi' = 0 that evaluates
    several points at once.

    phi' is smooth between breakpoints, where a cone changes zone or a row's force meets a
    bound (:meth:`ConeLine.breaks`, :meth:`_Line.row_breaks`), and its slope jumps there, by
    orders of magnitude with a large impratio. Newton steps alone then creep or overshoot:
    on Menagerie's a1 (impratio 100) landing, ten of them from the full Newton step a = 1
    stopped at a cost 70 above the line's minimum, and the solve took 13 outer steps where
    MuJoCo's takes 3. So from a = 0 and a = 1, each iteration evaluates six points of the
    bracket [lo, hi] (phi'(lo) <= 0 < phi'(hi)) at once: Newton's from each end, the chord's
    root, the breakpoints next to each end and a split (a sixteenth of the bracket from 0,
    else its geometric or plain middle). Newton's is exact on a linear piece, the
    breakpoints step onto the next piece, and the split shrinks a bracket of many pieces; a
    last round takes Newton's points from both ends. The evaluated point with the smallest
    |phi'| is returned. While phi'(hi) is unknown the points reach beyond lo: Newton's, the
    breakpoints after lo and the last one, 2 lo + 1. In all 22 evaluations, about the cost of
    the ten sequential Newton steps this replaced, as each costs a few flops per cone.
    """
    line = line._replace(dMd=jnp.maximum(line.dMd, MINVAL))
    at = jax.vmap(line.derivatives)
    breaks = line.row_breaks()
    if line.cones is not None:
        breaks = jnp.concatenate([jnp.where(breaks > 0.0, breaks, jnp.inf), line.cones.breaks()])

    def update(b: _Bracket, a: jax.Array) -> _Bracket:
        g, h = at(a)
        below = g <= 0.0
        i = jnp.argmax(jnp.where(below, a, -jnp.inf))
        j = jnp.argmin(jnp.where(below, jnp.inf, a))
        new_lo = below[i] & (a[i] >= b.lo)
        new_hi = ~below[j] & (a[j] < b.hi)
        k = jnp.argmin(jnp.abs(g))
        closer = jnp.abs(g[k]) < b.g_best
        return _Bracket(
            jnp.where(new_lo, a[i], b.lo),
            jnp.where(new_lo, g[i], b.g_lo),
            jnp.where(new_lo, h[i], b.h_lo),
            jnp.where(new_hi, a[j], b.hi),
            jnp.where(new_hi, g[j], b.g_hi),
            jnp.where(new_hi, h[j], b.h_hi),
            jnp.where(closer, a[k], b.best),
            jnp.where(closer, jnp.abs(g[k]), b.g_best),
        )

    def body(_: int, b: _Bracket) -> _Bracket:
        lo, hi, from_lo = b.lo, b.hi, b.from_lo()
        after_lo = jnp.min(jnp.where(breaks > lo, breaks, jnp.inf))
        before_hi = jnp.max(jnp.where(breaks < hi, breaks, -jnp.inf))
        bounded = jnp.isfinite(hi)
        width = jnp.where(bounded, hi - lo, 0.0)
        split = jnp.where(
            lo > 0.0, jnp.where(hi > 4.0 * lo, jnp.sqrt(lo * hi), lo + 0.5 * width), hi / 16.0
        )
        inside = jnp.stack(
            [
                from_lo,
                b.from_hi(),
                lo - b.g_lo * width / jnp.where(bounded, b.g_hi - b.g_lo, 1.0),
                jnp.where(bounded, split, 0.0),
                after_lo,
                before_hi,
            ]
        )
        beyond = jnp.stack(
            [from_lo, lo + 4.0 * (from_lo - lo), after_lo, before_hi, 2.0 * lo + 1.0, 8.0 * lo]
        )
        beyond = jnp.where(jnp.isfinite(beyond), beyond, 2.0 * lo + 1.0)
        return update(b, jnp.where(bounded, jnp.clip(inside, lo, hi), beyond))

    zero = jnp.zeros_like(line.dMr)
    inf = jnp.full_like(line.dMr, jnp.inf)
    start = _Bracket(zero, zero, inf, inf, inf, inf, zero, inf)  # from_lo = lo at first
    b = update(start, jnp.stack([zero, zero + 1.0]))
    b = jax.lax.fori_loop(0, iterations, body, b, unroll=True)
    return update(b, jnp.clip(jnp.stack([b.from_lo(), b.from_hi()]), b.lo, b.hi)).best


class _Bracket(NamedTuple):
    """A cone line search's bracket [lo, hi] of phi' = 0 (phi'(lo) <= 0 < phi'(hi), hi inf
    while none is known) with phi' and phi'' at its ends, and the evaluated point of smallest
    |phi'| so far."""

    lo: jax.Array
    g_lo: jax.Array
    h_lo: jax.Array
    hi: jax.Array
    g_hi: jax.Array
    h_hi: jax.Array
    best: jax.Array
    g_best: jax.Array

    def from_lo(self) -> jax.Array:
        """Newton's point from lo."""
        return self.lo - self.g_lo / self.h_lo

    def from_hi(self) -> jax.Array:
        """Newton's point from hi (hi itself while hi is inf)."""
        return self.hi - jnp.where(jnp.isfinite(self.hi), self.g_hi / self.h_hi, 0.0)


class MujocoSearch(NamedTuple):
    """MuJoCo's own line search and its limits: at most ``iterations`` evaluations of phi
    (<option ls_iterations>), stopping where |phi'| < ``tolerance`` |step| inertia (MuJoCo's
    tolerance * ls_tolerance, over its scale). MuJoCo's scale is the inverse inertia of what it
    solves: an island's trace of M, or with islands off (``inertia``) meaninertia * nv, the
    trace of M at qpos0."""

    iterations: int
    tolerance: float
    inertia: float | None = None  # None: the trace of M over the dofs searched


class _Point(NamedTuple):
    """An evaluated point of a line: a, phi(a) (:meth:`_Line.cost`), phi'(a), phi''(a)."""

    a: jax.Array
    cost: jax.Array
    g: jax.Array
    h: jax.Array

    def newton(self) -> jax.Array:
        return self.a - self.g / self.h


def _pick(c: jax.Array, x: _T, y: _T) -> _T:
    """x where c, else y, leaf by leaf (two points or two search states)."""
    return jax.tree.map(lambda u, v: jnp.where(c, u, v), x, y)


class _Search(NamedTuple):
    """The state of :func:`_line_search_mujoco` between its steps."""

    p1: _Point
    p2: _Point
    p1next: _Point
    p2next: _Point
    evals: jax.Array  # MuJoCo's LSiter
    bracketed: jax.Array  # bool: in the bracketed phase (else the one-sided one)
    done: jax.Array  # bool
    result: jax.Array


def _line_search_mujoco(line: _Line, gtol: jax.Array, limit: int) -> jax.Array:
    """MuJoCo's line search (CGsearch in engine_solver.c), evaluation for evaluation, as a
    fixed number of steps whose finished worlds stand still.

    From a = 0 a Newton step, then one-sided Newton steps until phi' changes sign, then a
    bracketed search that evaluates the bracket's middle and moves each end to the candidate
    (the middle, either end's Newton point) of smaller |phi'| on its side. It stops at the
    first point with |phi'| < gtol, or after ``limit`` evaluations with the bracket end of
    lowest cost. With few evaluations (MJX-tuned models ask for 4) that is often short of the
    minimum the exact searches find, and a Newton solve capped at MuJoCo's ``iterations``
    follows MuJoCo only if its search does too. This is MuJoCo 4.0.1's search (the version the
    parity tests pin); later sources also keep a = 0 where the first Newton point costs more.
    """
    line = line._replace(dMd=jnp.maximum(line.dMd, MINVAL))

    def at(a: jax.Array) -> _Point:
        return _Point(a, line.cost(a), *line.derivatives(a))

    def move(p: _Point, candidates: list[_Point]) -> tuple[_Point, jax.Array]:
        """MuJoCo's updateBracket: p moves to each candidate on its side of the root that is
        closer to it, in order."""
        moved = jnp.zeros((), bool)
        for c in candidates:
            closer = ((p.g < 0) & (c.g < 0) & (p.g < c.g)) | ((p.g > 0) & (c.g > 0) & (p.g > c.g))
            p, moved = _pick(closer, c, p), moved | closer
        return p, moved

    p0 = at(jnp.zeros_like(line.dMr))
    p1 = at(p0.newton())
    rightward = p1.g < 0  # MuJoCo's dir = +1
    false = jnp.zeros((), bool)
    start = _Search(p1, p1, p1, p1, jnp.asarray(2), false, jnp.abs(p1.g) < gtol, p1.a)

    def finish(s: _Search, stop: jax.Array, result: jax.Array) -> _Search:
        stop = stop & ~s.done
        return s._replace(done=s.done | stop, result=jnp.where(stop, result, s.result))

    def one_sided(s: _Search) -> _Search:
        """A step of the one-sided phase; on leaving it, the bracketed phase's first point.
        (Its first step always runs when evaluations are left: |phi'(p1)| >= gtol.)"""
        q = at(s.p1.newton())  # the next point either way
        going = jnp.where(rightward, s.p1.g <= -gtol, s.p1.g >= gtol) & (s.evals < limit)
        stepped = s._replace(p1=q, p2=s.p1, evals=s.evals + 1)
        stepped = finish(stepped, jnp.abs(q.g) < gtol, q.a)
        leaving = finish(s, s.evals >= limit, s.p1.a)
        entering = s._replace(p1next=q, p2next=s.p1, evals=s.evals + 1, bracketed=True)
        left = _pick(leaving.done, leaving, entering)
        return _pick(going, stepped, left)

    def best_end(s: _Search) -> jax.Array:
        """After the last evaluation: the bracket end of lowest cost if below phi(0), else 0."""
        first = (s.p1.cost <= s.p2.cost) & (s.p1.cost < p0.cost)
        second = (s.p2.cost <= s.p1.cost) & (s.p2.cost < p0.cost)
        return jnp.where(first, s.p1.a, jnp.where(second, s.p2.a, 0.0))

    def bracketed(s: _Search) -> _Search:
        """A step of the bracketed phase."""
        over = finish(s, s.evals >= limit, best_end(s))
        mid = at(0.5 * (s.p1.a + s.p2.a))
        candidates = [s.p1next, s.p2next, mid]
        converged = jnp.stack([jnp.abs(c.g) < gtol for c in candidates])
        costs = jnp.stack([c.cost for c in candidates])
        best = jnp.argmin(jnp.where(converged, costs, jnp.inf))  # first of equal costs
        alphas = jnp.stack([c.a for c in candidates])
        p1, moved1 = move(s.p1, candidates)
        p2, moved2 = move(s.p2, candidates)
        nexts = jax.vmap(at)(jnp.stack([p1.newton(), p2.newton()]))
        p1next = _pick(moved1, jax.tree.map(lambda x: x[0], nexts), s.p1next)
        p2next = _pick(moved2, jax.tree.map(lambda x: x[1], nexts), s.p2next)
        evals = s.evals + 1 + moved1.astype(s.evals.dtype) + moved2.astype(s.evals.dtype)
        stepped = s._replace(p1=p1, p2=p2, p1next=p1next, p2next=p2next, evals=evals)
        stepped = finish(stepped, ~moved1 & ~moved2, mid.a)
        stepped = _pick(converged.any(), finish(s, True, alphas[best]), stepped)
        return _pick(over.done, over, stepped)

    def body(_: int, s: _Search) -> _Search:
        return _pick(s.done, s, _pick(s.bracketed, bracketed(s), one_sided(s)))

    # Each step evaluates at least once or finishes; the start has evaluated twice.
    s = jax.lax.fori_loop(0, max(limit - 1, 1), body, start)
    unfinished = jnp.where(s.bracketed, best_end(s), s.p1.a)
    return jnp.where(s.done, s.result, unfinished)


class Islands(NamedTuple):
    """What MuJoCo's constraint islands are made of: kinematic trees joined by the active rows
    that touch them. MuJoCo solves each island on its own, with its own line search, and a
    Newton solve that stops short of the optimum (System.capped_solve) follows it only if each
    island takes its own step length too (the directions are the same: H is block-diagonal
    over islands)."""

    dof_tree: np.ndarray  # [nv] static: the tree of each dof (System.topology.dof_tree)
    row_trees: jax.Array  # [nrows, ntree] bool: the trees each row touches (unit rows first)

    def groups(self, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(the island of each dof, of each row) with the active rows ``mask``: islands are
        named by their lowest tree; a row that joins none (inactive) gets ntree."""
        labels = island_labels(self.row_trees, mask)
        joined = self.row_trees & mask[:, None]
        ntree = self.row_trees.shape[1]
        return labels[self.dof_tree], jnp.min(jnp.where(joined, labels[None, :], ntree), axis=1)


def island_labels(row_trees: jax.Array, mask: jax.Array) -> jax.Array:
    """[ntree] each tree's island, named by its lowest tree: trees joined by active rows
    (``mask``) share one, directly or through others (MuJoCo's mj_island flood fill, written
    as a fixed number of min-label sweeps: a sweep joins every row's trees)."""
    ntree = row_trees.shape[1]
    joins = row_trees & mask[:, None]

    def sweep(_: int, label: jax.Array) -> jax.Array:
        row_min = jnp.min(jnp.where(joins, label[None, :], ntree), axis=1)
        return jnp.minimum(label, jnp.min(jnp.where(joins, row_min[:, None], ntree), axis=0))

    return jax.lax.fori_loop(0, ntree - 1, sweep, jnp.arange(ntree))


UnitRows = tuple[np.ndarray, np.ndarray]  # (dof [nu], sign [nu]): rows sign * e_dof


def unit_matrix(unit_rows: UnitRows | None, nv: int) -> np.ndarray:
    """[nu, nv] the Jacobian of unit rows as a constant (empty for None)."""
    if unit_rows is None:
        return np.zeros((0, nv), np.float32)
    dof, sign = unit_rows
    e = np.zeros((len(dof), nv), np.float32)
    e[np.arange(len(dof)), dof] = sign
    return e


def row_values(J: jax.Array, unit_rows: UnitRows | None, x: jax.Array) -> jax.Array:
    """[nu + nc] J_full x: the unit rows (first), then the dense rows ``J`` [nc, nv]."""
    e = unit_matrix(unit_rows, x.shape[-1])
    return jnp.concatenate([jnp.asarray(e, x.dtype) @ x, J @ x])


def solve(
    M: jax.Array,
    qacc_smooth: jax.Array,
    J: jax.Array,
    aref: jax.Array,
    R: jax.Array,
    mask: jax.Array,
    qacc_init: jax.Array | None = None,
    iterations: int = NEWTON_ITERATIONS,
    line_search: str = "exact",
    unit_rows: UnitRows | None = None,
    bounds: Bounds | None = None,
    cones: Cones | None = None,
    hessian_form: str = "broadcast",
    mujoco_search: MujocoSearch | None = None,
    islands: Islands | None = None,
) -> SolverResult:
    """Constrained acceleration and row forces (fixed-count Newton, implicit derivatives).

    M [nv, nv] mass matrix, qacc_smooth [nv] = M^-1 (qfrc_smooth), J [nc, nv], aref [nc],
    R [nc], mask [nc] (False rows, e.g. contacts with dist >= margin, carry no force).
    ``qacc_init`` warm-starts (MuJoCo uses the previous step's qacc); default qacc_smooth.
    ``line_search``: "exact" (closed form, O(nc^2) per step) or "newton" (safeguarded 1-D
    Newton, O(nc) per step, exact once it lands on the root's linear piece).
    ``unit_rows`` (static numpy (dof, sign), e.g. joint limits) are rows sign * e_dof placed
    before those of ``J``: aref, R, mask and efc_force then cover them first; their products
    are a constant matrix product (shared by all worlds) and a diagonal term of H.
    ``bounds`` (lo, hi) per row bound its force (default: inequality rows, [0, inf)).
    ``cones``: the last rows are elliptic friction cones (:class:`Cones`); their Hessian
    blocks join H, and the line search is the 1-D Newton one.
    ``hessian_form``: how J^T D J is formed, one of ``HESSIAN_FORMS`` (same H, to rounding).
    ``mujoco_search``: use MuJoCo's own line search with these limits instead of
    ``line_search`` (:func:`_line_search_mujoco`), cones or not.
    ``islands``: search each of MuJoCo's islands along its own part of the step (the trees that
    no active row touches are islands of their own, as quadratic as MuJoCo's unconstrained
    dofs); None: one step length for all dofs.

    Each Newton step costs one J x, one J^T f, one J^T D J and a Cholesky of H: J qacc - aref
    and M (qacc - qacc_smooth) are carried and updated along the step, not recomputed.

    Derivatives (forward and reverse mode) are those of the minimizer, by the implicit function
    theorem on the optimality condition g(qacc, inputs) = grad f = 0: d qacc = -H^-1 dg, H the
    Hessian at the solution. They do not go through the Newton iterations: differentiating
    those cost a long compile and, at a constraint boundary, gave derivatives off by orders of
    magnitude. The warm start has no derivative (the minimizer does not depend on it). The
    row forces come from the jar the Newton steps carry, with its derivative from d qacc.
    """
    if hessian_form not in HESSIAN_FORMS:
        raise ValueError(f"hessian_form must be one of {HESSIAN_FORMS}, got {hessian_form!r}")
    if cones is not None:
        line_search = "cone"  # the cones' cost is not piecewise quadratic
    search = {"exact": _line_search, "newton": _line_search_newton, "cone": _line_search_cone}[
        line_search
    ]
    # a numpy constant: the custom_jvp functions below must not close over traced values
    e = unit_matrix(unit_rows, M.shape[-1]).astype(M.dtype)
    nu = e.shape[0]
    D, cone_rows = split_cones(jnp.where(mask, 1.0 / R, 0.0), cones)
    x0 = qacc_smooth if qacc_init is None else qacc_init
    ntree = 0 if islands is None else islands.row_trees.shape[1]

    def rows_t(J: jax.Array, f: jax.Array) -> jax.Array:  # J_full^T f
        return f[:nu] @ e + J.T @ f[nu:]

    def hessian(M, J, D, R, bounds, cone_rows, jar):  # noqa: ANN001, ANN202
        act = jnp.where(_unsaturated(jar, R, bounds), D, 0.0)
        if hessian_form == "matmul":
            jtdj = (J * act[nu:, None]).T @ J
        else:  # XLA:CPU fuses the product and its sum across worlds
            jtdj = jnp.sum(J[:, :, None] * (act[nu:, None, None] * J[:, None, :]), axis=0)
        h = M + jnp.diag(act[:nu] @ (e * e)) + jtdj
        if cone_rows is None:
            return h
        D3, cones = cone_rows
        jc = J[J.shape[0] - D3.size :].reshape(*D3.shape, J.shape[1])
        blocks = cone_hessians(_cone_part(jar, D3), D3, cones)
        return h + jnp.einsum("cin,cij,cjm->nm", jc, blocks, jc)

    def gradient(M, qacc_smooth, J, aref, D, R, bounds, cone_rows, qacc):  # noqa: ANN001, ANN202
        """grad f at qacc: zero at the minimizer."""
        jar = row_values(J, unit_rows, qacc) - aref
        return M @ (qacc - qacc_smooth) + rows_t(J, _neg_forces(jar, D, R, bounds, cone_rows))

    @jax.custom_jvp
    def minimize(M, qacc_smooth, J, aref, D, R, bounds, cone_rows, groups, x0):  # noqa: ANN001, ANN202
        """(qacc, jar) at the minimizer, jar = J_full qacc - aref as carried by the steps;
        ``groups``: (dof, row) islands, or None."""

        def step_length(line: _Line, step: jax.Array, inertia: jax.Array) -> jax.Array:
            if mujoco_search is None:
                return search(line)
            if mujoco_search.inertia is not None:
                inertia = mujoco_search.inertia
            gtol = mujoco_search.tolerance * jnp.linalg.norm(step) * inertia
            return _line_search_mujoco(line, gtol, mujoco_search.iterations)

        def island_lengths(jar, jd, step, resid, m_step):  # noqa: ANN001, ANN202
            """(per dof, per row) step lengths: each island's own search along its part."""
            dof_island, row_island = groups
            diag = jnp.diagonal(M)

            def one(k: jax.Array) -> jax.Array:
                on_dof, on_row = dof_island == k, row_island == k
                D_k = jnp.where(on_row, D, 0.0)
                cones_k = None
                if cone_rows is not None:
                    D3, cones = cone_rows
                    cones_k = (jnp.where(_cone_part(on_row, D3), D3, 0.0), cones)
                part = jnp.where(on_dof, step, 0.0)
                line = _Line.of(jar, jd, D_k, R, bounds, part @ resid, part @ m_step, cones_k)
                return step_length(line, part, jnp.sum(jnp.where(on_dof, diag, 0.0)))

            lengths = jax.vmap(one)(jnp.arange(ntree))
            in_any = row_island < ntree  # rows of no island: inactive, no force, no step
            row = jnp.where(in_any, lengths[jnp.minimum(row_island, ntree - 1)], 0.0)
            return lengths[dof_island], row

        def newton(_: int, carry: tuple) -> tuple:
            qacc, jar, resid = carry
            grad = resid + rows_t(J, _neg_forces(jar, D, R, bounds, cone_rows))
            step = _descent_direction(hessian(M, J, D, R, bounds, cone_rows, jar), grad)
            jd, m_step = row_values(J, unit_rows, step), M @ step
            if groups is None:
                line = _Line.of(jar, jd, D, R, bounds, step @ resid, step @ m_step, cone_rows)
                alpha = row_alpha = step_length(line, step, jnp.trace(M))
            else:  # M is block-diagonal over trees: M (alpha step) = alpha (M step)
                alpha, row_alpha = island_lengths(jar, jd, step, resid, m_step)
            return qacc + alpha * step, jar + row_alpha * jd, resid + alpha * m_step

        init = (x0, row_values(J, unit_rows, x0) - aref, M @ (x0 - qacc_smooth))
        qacc, jar, _ = jax.lax.fori_loop(0, iterations, newton, init)
        return qacc, jar

    @minimize.defjvp
    def minimize_jvp(primals: tuple, tangents: tuple) -> tuple[tuple, tuple]:
        qacc, jar = minimize(*primals)
        inputs, d_inputs = primals[:-2], tangents[:-2]
        _, dg = jax.jvp(lambda *a: gradient(*a, qacc), inputs, d_inputs)
        M, _, J, aref, D, R, bounds, cone_rows = inputs
        H = hessian(M, J, D, R, bounds, cone_rows, jar)
        d_qacc = -linalg.cho_solve(H, dg)
        _, d_jar = jax.jvp(
            lambda J, aref, qacc: row_values(J, unit_rows, qacc) - aref,
            (J, aref, qacc),
            (d_inputs[2], d_inputs[3], d_qacc),
        )
        return (qacc, jar), (d_qacc, d_jar)

    # no derivative through the islands: the minimizer does not depend on them
    groups = None if islands is None else islands.groups(mask)
    qacc, jar = minimize(M, qacc_smooth, J, aref, D, R, bounds, cone_rows, groups, x0)
    force = -_neg_forces(jar, D, R, bounds, cone_rows)
    return SolverResult(qacc, rows_t(J, force), force)
