"""Ellipsoid contacts (against spheres, capsules, ellipsoids, cylinders, boxes, meshes and
height-field prisms) by support functions, as MuJoCo's convex collider reports them.

MuJoCo collides an ellipsoid with GJK (apart) and EPA (overlapping): one contact, at the
minimum translation distance, midway between the two witness points. The same in a fixed
number of branch-free operations:

1. **The distance as an optimum over directions.** For convex geoms A (geom1) and B, the
   separation along a unit n, ``s(n) = -h_A(n) - h_B(-n)`` (h: the support function), is at
   most their signed distance, and its largest value over n IS the signed distance, apart or
   overlapping (then the minimum translation distance). Any direction is thus a safe lower
   bound; the best of several is kept.
2. **Newton's method on the sphere of directions.** The gradient of s is the difference of
   the two support points, its Hessian the geoms' curvature radii (the ellipsoid's keeps the
   tangent Hessian positive; a box or mesh adds none). Twelve Riemannian Newton steps, their
   2x2 tangent Hessian kept positive, each turn bounded and backtracked (an unrolled line
   search), start from the centres' direction and from the best of the candidate
   directions: the partner's face normals (a cylinder's caps) and the ellipsoid's axes.
   Where the optimum sits at a face normal of the partner (an ellipsoid resting on a box
   face), that candidate is already exact. Where a box, mesh, capsule or cylinder makes the
   support function kink (an edge, the capsule's ends), the steps run on its log-sum-exp
   smoothing, its width shrinking step by step from 0.3 to 1e-4 of the geoms' size; every
   iterate is scored on the exact separation.
3. **The contact point** is the ellipsoid's support point moved half the distance along the
   normal: the ellipsoid is strictly convex, so its witness is unique (the partner's may be a
   whole face).

Normals point from geom1 to geom2 (MuJoCo orders pairs by type: sphere, capsule < ellipsoid <
cylinder, box, mesh; a height field comes first).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from physics.collision import ELLIPSOID_PARTNERS, Contact, _normalize, _stack, make_frame
from physics.mesh import Hull
from physics.polytope import Polytope
from physics.system import (
    GEOM_BOX,
    GEOM_CAPSULE,
    GEOM_CYLINDER,
    GEOM_ELLIPSOID,
    GEOM_MESH,
    GEOM_SPHERE,
)

_NEWTON_STEPS = 12  # per start; quadratic near the optimum of two smooth geoms
_TAU_FIRST, _TAU_LAST = 0.3, 1e-4  # the smoothing's first and last length, relative to size
_F_TOL = 1e-6  # f within this (relative to size) of the best counts as equal
_MAX_TURN = 0.5  # radians a Newton step may turn the direction
_SHORT_TURN = 1e-3  # radians below which a step skips the line search
_CURVATURE_FLOOR = 1e-4  # the tangent Hessian's least eigenvalue, relative to the geoms' size
_STEP_FRACTIONS = np.array([1.0, 0.5, 0.25, 0.1, 0.0])  # of a Newton step tried
_POLYTOPE = -1  # kind of a convex polytope given by its vertices (box, mesh, prism)
_X = np.array([1.0, 0.0, 0.0])


class Shape(NamedTuple):
    """A convex geom in the world frame, for its support function."""

    kind: int  # static: GEOM_SPHERE, GEOM_CAPSULE, GEOM_ELLIPSOID, GEOM_CYLINDER or _POLYTOPE
    pos: jax.Array  # [3] centre (a point inside)
    mat: jax.Array  # [3, 3] columns: the local axes
    size: jax.Array  # [3] MuJoCo size (unused for polytopes)
    verts: jax.Array | None = None  # [v, 3] a polytope's vertices
    normals: jax.Array | None = None  # [f, 3] a polytope's outward face normals

    @classmethod
    def of(
        cls, kind: int, pos: jax.Array, mat: jax.Array, size: jax.Array, hull: Hull | None = None
    ) -> Shape:
        """The geom of MuJoCo type ``kind`` (``hull``: a mesh's convex hull, its frame)."""
        if kind in (GEOM_BOX, GEOM_MESH):
            p = Polytope.box(pos, mat, size) if kind == GEOM_BOX else Polytope.of(pos, mat, hull)
            return cls.polytope(p.verts, p.normals, pos)
        return cls(kind, pos, mat, size)

    @classmethod
    def polytope(cls, verts: jax.Array, normals: jax.Array, centre: jax.Array) -> Shape:
        return cls(_POLYTOPE, centre, jnp.eye(3), jnp.zeros(3), verts, normals)

    def moved(self, offset: jax.Array) -> Shape:
        """The same geom, coordinates taken from ``offset``."""
        verts = None if self.verts is None else self.verts - offset
        return self._replace(pos=self.pos - offset, verts=verts)

    @property
    def extent(self) -> jax.Array:
        """A length of the geom's scale (sizes the curvature floor)."""
        if self.kind == _POLYTOPE:
            return jnp.max(jnp.abs(self.verts - self.pos))
        return jnp.max(self.size[:2]) if self.kind != GEOM_ELLIPSOID else jnp.max(self.size)

    def face_directions(self) -> jax.Array:
        """[f, 3] outward directions where the geom touches with a flat face (may be [0, 3])."""
        if self.kind == _POLYTOPE:
            return self.normals
        if self.kind == GEOM_CYLINDER:
            return jnp.stack([self.mat[:, 2], -self.mat[:, 2]])
        if self.kind == GEOM_ELLIPSOID:
            return jnp.concatenate([self.mat.T, -self.mat.T])
        return jnp.zeros((0, 3))


def support(shape: Shape, n: jax.Array) -> jax.Array:
    """The geom's farthest point along unit n (one of them where a face or edge is)."""
    if shape.kind == _POLYTOPE:
        return shape.verts[jnp.argmax(shape.verts @ n)]
    if shape.kind in (GEOM_SPHERE, GEOM_ELLIPSOID):  # smooth: their smoothing is exact
        return _smoothed(shape, n, jnp.ones((), n.dtype))[1]
    mat, size = shape.mat, shape.size
    m = mat.T @ n  # the direction in the geom's frame
    end = jnp.where(m[2] >= 0, 1.0, -1.0) * size[1] * mat[:, 2]
    if shape.kind == GEOM_CAPSULE:
        return shape.pos + end + size[0] * n
    rho = jnp.sqrt(jnp.maximum(m[0] ** 2 + m[1] ** 2, 1e-30))  # cylinder: a rim point
    return shape.pos + end + size[0] * mat @ jnp.array([m[0], m[1], 0.0]) / rho


def _smoothed(shape: Shape, n: jax.Array, tau: jax.Array) -> tuple[jax.Array, ...]:
    """(value, gradient, Hessian [3, 3]) at n of the support function smoothed over ``tau``
    (a length): a polytope's vertices (and a capsule's or cylinder's two ends) by log-sum-exp,
    a cylinder's rim as the disk support r sqrt(|m_xy|^2 + (tau/r)^2). The ellipsoid and the
    sphere are smooth already."""
    mat, size = shape.mat, shape.size
    centre = jnp.dot(n, shape.pos)
    if shape.kind == _POLYTOPE:
        verts = shape.verts - shape.pos
        logits = verts @ n / tau
        w = jax.nn.softmax(logits)
        mean = w @ verts
        hess = ((verts.T * w) @ verts - jnp.outer(mean, mean)) / tau
        return centre + tau * jax.nn.logsumexp(logits), shape.pos + mean, hess
    m = mat.T @ n
    if shape.kind == GEOM_SPHERE:
        value, point = centre + size[0], shape.pos + size[0] * n
        return value, point, size[0] * (jnp.eye(3) - jnp.outer(n, n))
    if shape.kind == GEOM_ELLIPSOID:
        a2m = size**2 * m
        q = jnp.sqrt(jnp.maximum(jnp.dot(m, a2m), 1e-30))  # |diag(size) m|
        hess = (jnp.diag(size**2) - jnp.outer(a2m, a2m) / q**2) / q
        return centre + q, shape.pos + mat @ (a2m / q), mat @ hess @ mat.T
    # capsule and cylinder: two ends at +-size[1] along z, smoothed like a polytope's
    z = size[1] * m[2] / tau
    t = jnp.tanh(z)
    axis = mat[:, 2]
    value = centre + tau * (jnp.logaddexp(z, -z))
    point = shape.pos + t * size[1] * axis
    hess = (size[1] ** 2 / tau) * (1.0 - t**2) * jnp.outer(axis, axis)
    if shape.kind == GEOM_CAPSULE:
        sphere = size[0] * (jnp.eye(3) - jnp.outer(n, n))
        return value + size[0], point + size[0] * n, hess + sphere
    r = size[0]
    mxy = jnp.array([m[0], m[1], 0.0])
    sigma = jnp.sqrt(m[0] ** 2 + m[1] ** 2 + (tau / r) ** 2)
    disk = r * (jnp.diag(jnp.array([1.0, 1.0, 0.0])) / sigma - jnp.outer(mxy, mxy) / sigma**3)
    return value + r * sigma, point + r * mat @ mxy / sigma, hess + mat @ disk @ mat.T


def _gap(a: Shape, b: Shape, n: jax.Array) -> jax.Array:
    """f(n) = h_a(n) + h_b(-n) = -s(n): minus the separation along n (a to b)."""
    return jnp.dot(n, support(a, n) - support(b, -n))


def _newton(
    a: Shape, b: Shape, n: jax.Array, taus: jax.Array, floor: jax.Array, tol: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(least f, its direction) over Riemannian Newton steps on the unit sphere from n, each
    on the support functions smoothed over the next of ``taus`` (shrinking)."""

    def smoothed_gap(n: jax.Array, tau: jax.Array) -> jax.Array:
        return _smoothed(a, n, tau)[0] + _smoothed(b, -n, tau)[0]

    def step(carry: tuple, tau: jax.Array) -> tuple:
        n, best_f, best_n = carry
        _, pa, ha = _smoothed(a, n, tau)
        _, pb, hb = _smoothed(b, -n, tau)
        x = pa - pb  # the smoothed f's gradient
        t = make_frame(n)[1:]  # [2, 3] tangent basis
        g = t @ x
        k = t @ (ha + hb) @ t.T - jnp.dot(n, x) * jnp.eye(2)  # the Riemannian Hessian
        half_gap = 0.5 * (k[0, 0] - k[1, 1])
        least = 0.5 * (k[0, 0] + k[1, 1]) - jnp.sqrt(half_gap**2 + k[0, 1] ** 2 + 1e-30)
        k = k + jnp.maximum(floor - least, 0.0) * jnp.eye(2)
        det = k[0, 0] * k[1, 1] - k[0, 1] ** 2
        v = -jnp.array([k[1, 1] * g[0] - k[0, 1] * g[1], k[0, 0] * g[1] - k[0, 1] * g[0]]) / det
        turn = jnp.sqrt(jnp.dot(v, v) + 1e-30)
        v = (v * jnp.minimum(1.0, _MAX_TURN / turn)) @ t
        # a backtracking line search, unrolled: the best of the shortened steps (and of none)
        # (a short step is taken whole: there float32 rounding would rank the tries at random)
        tries = jax.vmap(lambda s: _normalize(n + s * v, n))(_STEP_FRACTIONS)
        pick = jnp.argmin(jax.vmap(lambda m: smoothed_gap(m, tau))(tries))
        n = tries[jnp.where(turn < _SHORT_TURN, 0, pick)]
        f = _gap(a, b, n)  # the exact f: every direction's value is a safe bound
        better = f < best_f
        return (n, jnp.where(better, f, best_f), jnp.where(better, n, best_n)), None

    (n, best_f, best_n), _ = jax.lax.scan(step, (n, _gap(a, b, n), n), taus)
    # f is flat at its optimum, so float32 rounding ranks directions near it at random: the
    # last iterate (where Newton's gradient vanishes) stands unless it is clearly worse
    f = _gap(a, b, n)
    last = f <= best_f + tol
    return jnp.where(last, f, best_f), jnp.where(last, n, best_n)


def signed_distance(a: Shape, b: Shape) -> tuple[jax.Array, jax.Array]:
    """(signed distance, unit normal from a to b) of two convex geoms, one of them smooth."""
    centre = _normalize(b.pos - a.pos, _X)
    # candidates: the centres' direction, each flat face of either geom facing the other
    # (an outward direction of a, or minus one of b), and the ellipsoid's axes
    candidates = jnp.concatenate([centre[None], a.face_directions(), -b.face_directions()])
    f = jax.vmap(lambda n: _gap(a, b, n))(candidates)
    best = jnp.argmin(f)
    scale = jnp.maximum(a.extent, b.extent)
    taus = scale * np.geomspace(_TAU_FIRST, _TAU_LAST, _NEWTON_STEPS)
    starts = jnp.stack([centre, candidates[best]])
    fs, ns = jax.vmap(lambda n: _newton(a, b, n, taus, _CURVATURE_FLOOR * scale, _F_TOL * scale))(
        starts
    )
    i = jnp.argmin(fs)
    return -fs[i], ns[i]


def contact_point(a: Shape, b: Shape, dist: jax.Array, n: jax.Array) -> jax.Array:
    """Midway between the surfaces: the ellipsoid's witness moved half the distance along n."""
    if a.kind == GEOM_ELLIPSOID:
        return support(a, n) + 0.5 * dist * n
    return support(b, -n) - 0.5 * dist * n


def collide_ellipsoid(
    type1: int,
    type2: int,
    pos1: jax.Array,
    mat1: jax.Array,
    size1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    size2: jax.Array,
    hull1: Hull | None = None,
    hull2: Hull | None = None,
) -> Contact:
    """One contact of an ellipsoid and a geom of ``PARTNERS`` (type1 <= type2)."""
    if GEOM_ELLIPSOID not in (type1, type2) or {type1, type2} - {*ELLIPSOID_PARTNERS}:
        raise ValueError(f"not an ellipsoid pair of supported types: ({type1}, {type2})")
    # about geom1's centre: far from the world's origin, float32 would round the small gaps
    a = Shape.of(type1, jnp.zeros(3), mat1, size1, hull1)
    b = Shape.of(type2, pos2, mat2, size2, hull2).moved(pos1)
    dist, n = signed_distance(a, b)
    return _stack(dist[None], pos1 + contact_point(a, b, dist, n)[None], n[None])
