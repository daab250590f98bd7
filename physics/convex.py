"""Cylinder-box and cylinder-cylinder contacts, as MuJoCo 4.0's convex collider reports them.

MuJoCo collides these pairs with GJK/EPA (the minimum translation distance) and, where the
surfaces meet flat, clips the two touching faces against each other for several points. The
same in a fixed number of branch-free operations:

1. **Signed distance and normal by separating axes.** Both shapes are centrally symmetric, so
   the signed distance (negative: penetration depth) is the largest, over unit n, of
   ``|n . (c2 - c1)| - ext1(n) - ext2(n)``, ``ext`` being a shape's half-width along n. Every
   n gives a lower bound; the largest is reached at a direction that one pair of features
   (box face, edge or corner; cylinder cap, side or rim) defines, so evaluating each such
   direction gives the exact value. Two have no closed form (a rim against a box edge or
   another rim, a rim against a side): a grid and golden-section search find them.
2. **Touching features.** Along the normal each geom touches with a face (a box face; a cap
   as MuJoCo's polygon of 16 rim points), an edge (a box edge; the side's line) or a point.
   A face counts within 5.13 degrees of the contact plane (cos 0.996) and an edge within
   5.09 degrees of it (sin 0.0888): MuJoCo 4.0.1's tolerances, found by bisection (a cap
   tilted on a box turns from 4 points to 1 at 5.1264 degrees; a box's edge or a cylinder's
   side on a box or a mesh, and a capsule on a mesh or a cap, from 2 points to 1 at 5.0946
   degrees).
3. **Clipping in the contact plane.** The contact points are each feature's vertices inside
   the other and the crossings of their edges, each with its distance measured along the
   normal. Of those within the margin up to 4 are kept: the deepest, the farthest from it,
   then each time the one adding the most area. Where none exists (a point against an edge)
   and between two edges (crossed or parallel) there is one contact at the separating axis's
   witness point, as MuJoCo reports there.

Normals point from geom1 to geom2, geom1 being the cylinder (MuJoCo orders pairs by type).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from physics.collision import (
    FAR,
    Contact,
    _capsule_ends,
    _golden_min,
    _normalize,
    _safe_norm,
    _segment_segment,
    make_frame,
)
from physics.system import GEOM_BOX, GEOM_CYLINDER

CONVEX_CONTACTS = 4  # slots per pair (MuJoCo keeps at most 4 of a face-face clip)
CAPSULE_CYLINDER_CONTACTS = 2  # a capsule's line clipped to a cap
_CAP_POINTS = 16  # a cap as MuJoCo's polygon of 16 rim points
_FACE_COS = 0.996  # a face touches flat within 5.13 degrees of the contact plane (MuJoCo's)
_EDGE_SIN = 0.0888  # an edge lies along a face within 5.09 degrees of it (MuJoCo's)
_PARALLEL = 1e-4  # |sin| below which a segment lies level with a side (float32 rounding)
_GRID = 16  # samples of a rim angle before golden-section refinement
_GOLDEN_ITERS = 16  # the grid's bracket of 0.39 rad shrinks to 2e-4 rad
_POLISH = 24  # pattern-search steps on the best candidate normal
_AREA_TOL = 1e-10  # squared lengths (m^2) below which points count as coincident or collinear
_FLAT = 1e-5  # a third or fourth point closer than this (relative) to the others adds nothing
_X, _Y = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
_CORNER_SIGNS = np.array([[(b >> k & 1) * 2.0 - 1.0 for k in range(3)] for b in range(8)])
_FACE_SIGNS = np.array([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])  # around a face


def _extent(kind: int, mat: jax.Array, size: jax.Array, n: jax.Array) -> jax.Array:
    """[m] half-width of a box or cylinder along each unit direction of n [m, 3]."""
    local = n @ mat
    if kind == GEOM_BOX:
        return jnp.abs(local) @ size
    return size[1] * jnp.abs(local[:, 2]) + size[0] * _safe_norm(local[:, :2])


# ------------------------------------------------------------------- separating axes


def _perp(w: jax.Array, axis: jax.Array) -> jax.Array:
    """The part of w [..., 3] perpendicular to the unit axis."""
    return w - (w @ axis)[..., None] * axis


def _circle_point(centre: jax.Array, axis: jax.Array, radius: jax.Array, p: jax.Array) -> jax.Array:
    """The point of a circle closest to p (a point on the axis gets a fixed rim point)."""
    other = jnp.where(jnp.abs(axis[0]) < 0.9, _X, _Y)
    return centre + radius * _normalize(
        _perp(p - centre, axis), _normalize(jnp.cross(axis, other), _X)
    )


def _rims(pos: jax.Array, mat: jax.Array, size: jax.Array) -> jax.Array:
    """[2, 3] centres of a cylinder's two caps (top first): its axis segment's ends."""
    bottom, top = _capsule_ends(pos, mat, size)
    return jnp.stack([top, bottom])


def _search(f: Callable[[jax.Array], jax.Array]) -> jax.Array:
    """argmin of f over an angle in [0, pi) (f has period pi): the best of a grid, refined by
    golden section between its neighbours."""
    step = np.pi / _GRID
    grid = jnp.arange(_GRID) * step
    lo = grid[jnp.argmin(jax.vmap(f)(grid))] - step
    return lo + 2 * step * _golden_min(lambda s: f(lo + 2 * step * s), lo.dtype, _GOLDEN_ITERS)


def _tangent(mat: jax.Array, theta: jax.Array) -> jax.Array:
    """The rim tangent of a cylinder (frame mat) at angle theta."""
    return -jnp.sin(theta) * mat[:, 0] + jnp.cos(theta) * mat[:, 1]


class _Gap(NamedTuple):
    """The separation of two centrally symmetric shapes along unit directions n [m, 3]:
    ``|n . (c2 - c1)| - ext1(n) - ext2(n)``; every n gives a lower bound of the signed
    distance and the largest equals it."""

    kind2: int
    pos1: jax.Array
    mat1: jax.Array
    size1: jax.Array
    pos2: jax.Array
    mat2: jax.Array
    size2: jax.Array

    def __call__(self, n: jax.Array) -> jax.Array:
        return (
            jnp.abs(n @ (self.pos2 - self.pos1))
            - _extent(GEOM_CYLINDER, self.mat1, self.size1, n)
            - _extent(self.kind2, self.mat2, self.size2, n)
        )

    def polish(self, n: jax.Array) -> jax.Array:
        """n moved uphill by a fixed pattern search on the sphere (it only ever improves): a
        smooth optimum near the best candidate (two rims) is reached, not just approached."""

        def step(_: int, carry: tuple) -> tuple:
            n, h, best = carry
            frame = make_frame(n)
            trial = _normalize(n + h * jnp.concatenate([frame[1:], -frame[1:]]), _X)
            gaps = self(trial)
            k = jnp.argmax(gaps)
            better = gaps[k] > best
            return (
                jnp.where(better, trial[k], n),
                jnp.where(better, h, 0.5 * h),
                jnp.maximum(gaps[k], best),
            )

        h0 = jnp.asarray(0.05, n.dtype)
        return jax.lax.fori_loop(0, _POLISH, step, (n, h0, self(n[None])[0]))[0]


def best_across(
    gap: Callable[[jax.Array], jax.Array], edge: jax.Array, mat: jax.Array
) -> jax.Array:
    """The direction perpendicular to ``edge`` and to a rim tangent of the cylinder with frame
    ``mat`` (the normals a rim has against an edge or a side) where ``gap`` (of unit
    directions [m, 3]) is largest."""
    family = lambda t: _normalize(jnp.cross(edge, _tangent(mat, t)), _X)  # noqa: E731
    return family(_search(lambda t: -gap(family(t)[None])[0]))


def _cylinder_box_axes(gap: _Gap) -> jax.Array:
    """Candidate normals [34, 3] of a cylinder (1) against a box (2)."""
    p1, m1, s1, p2, m2, s2 = gap.pos1, gap.mat1, gap.size1, gap.pos2, gap.mat2, gap.size2
    axis = m1[:, 2]
    corners = p2 + (_CORNER_SIGNS * s2) @ m2.T  # [8, 3]
    rims = _rims(p1, m1, s1)
    near = jax.vmap(lambda c: jax.vmap(lambda v: _circle_point(c, axis, s1[0], v))(corners))(rims)
    return jnp.concatenate(
        [
            m2.T,  # box faces
            axis[None],  # caps
            jnp.cross(axis, m2.T),  # the side against a box edge
            _perp(corners - p1, axis),  # the side against a corner
            (corners[None] - near).reshape(-1, 3),  # a rim against a corner
            jax.vmap(lambda e: best_across(gap, e, m1))(m2.T),  # a rim against an edge
        ]
    )


def _cylinder_cylinder_axes(gap: _Gap) -> jax.Array:
    """Candidate normals [11, 3] of two cylinders."""
    p1, m1, s1, p2, m2, s2 = gap.pos1, gap.mat1, gap.size1, gap.pos2, gap.mat2, gap.size2
    a1, a2 = m1[:, 2], m2[:, 2]

    def rim_to_rim(c1: jax.Array, c2: jax.Array) -> jax.Array:
        """Between the closest points of two rims (polished to the optimum afterwards)."""
        point = lambda t: c1 + s1[0] * jnp.cross(_tangent(m1, t), a1)  # noqa: E731
        between = lambda p: p - _circle_point(c2, a2, s2[0], p)  # noqa: E731
        t = 2 * _search(lambda t: jnp.sum(between(point(2 * t)) ** 2))
        return between(point(t))

    rims1, rims2 = _rims(p1, m1, s1), _rims(p2, m2, s2)
    rim_rim = jax.vmap(lambda c1: jax.vmap(lambda c2: rim_to_rim(c1, c2))(rims2))(rims1)
    delta = p2 - p1
    return jnp.concatenate(
        [
            jnp.stack(
                [
                    a1,  # cap 1
                    a2,  # cap 2
                    jnp.cross(a1, a2),  # side against side, skew
                    _perp(delta, a1),  # side against side, parallel
                    _perp(delta, a2),
                    best_across(gap, a2, m1),  # rim 1 against side 2
                    best_across(gap, a1, m2),  # rim 2 against side 1
                ]
            ),
            rim_rim.reshape(-1, 3),  # rim against rim
        ]
    )


def _cylinder_segment_axes(gap: _Gap, ends: jax.Array) -> jax.Array:
    """Candidate normals [9, 3] of a cylinder (1) against a segment with ends [2, 3] (geom 2,
    a cylinder of radius 0): every pair of features but a rim against the segment has its
    normal in closed form."""
    p1, m1, s1 = gap.pos1, gap.mat1, gap.size1
    axis = m1[:, 2]
    near = jax.vmap(lambda c: jax.vmap(lambda e: _circle_point(c, axis, s1[0], e))(ends))(
        _rims(p1, m1, s1)
    )
    along = ends[1] - ends[0]
    return jnp.concatenate(
        [
            axis[None],  # a cap
            jnp.cross(axis, along)[None],  # the side against the segment, skew
            _perp(ends - p1, axis),  # the side against an end (or a parallel segment)
            (ends[None] - near).reshape(-1, 3),  # a rim against an end
            _rim_across_segment(gap, along)[None],  # a rim against the segment
        ]
    )


def _rim_across_segment(gap: _Gap, along: jax.Array) -> jax.Array:
    """:func:`best_across` for a segment (geom 2, of direction ``along``), in the cylinder's
    frame and on scalars: the normal n(theta) across the segment and the rim's tangent at
    theta is (-uz c, -uz s, w) / sqrt(uz^2 + w^2) there, w = ux c + uy s, and the segment
    has no extent along it, so the gap is a ratio of a few products (the general search
    works on 3-vectors, which CPUs vectorise badly: 5x slower here)."""
    m1, size = gap.mat1, gap.size1
    u = m1.T @ along
    delta = m1.T @ (gap.pos2 - gap.pos1)

    def neg_gap(theta: jax.Array) -> jax.Array:
        c, s = jnp.cos(theta), jnp.sin(theta)
        w = u[0] * c + u[1] * s
        centre = jnp.abs(-u[2] * (delta[0] * c + delta[1] * s) + delta[2] * w)
        ext = size[1] * jnp.abs(w) + size[0] * jnp.abs(u[2])
        return (ext - centre) / jnp.sqrt(jnp.maximum(u[2] ** 2 + w**2, 1e-30))

    theta = _search(neg_gap)
    c, s = jnp.cos(theta), jnp.sin(theta)
    return m1 @ jnp.stack([-u[2] * c, -u[2] * s, u[0] * c + u[1] * s])


def separating_axis(
    kind2: int,
    pos1: jax.Array,
    mat1: jax.Array,
    size1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    size2: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """(signed distance, unit normal cylinder -> geom2) of a cylinder and a box or cylinder."""
    gap = _Gap(kind2, pos1, mat1, size1, pos2, mat2, size2)
    axes_of = _cylinder_box_axes if kind2 == GEOM_BOX else _cylinder_cylinder_axes
    n = _normalize(axes_of(gap), _X)
    n = n[jnp.argmax(gap(n))]
    if kind2 == GEOM_CYLINDER:  # two rims meet at a smooth optimum no candidate lands on
        n = gap.polish(n)
    n = jnp.where(n @ (pos2 - pos1) < 0.0, -n, n)
    return gap(n[None])[0], n


# ------------------------------------------------------------------- touching features


class Feature(NamedTuple):
    """What a geom touches with along a direction: a polygon of ``count`` vertices (4 or 16:
    a face; 2: an edge; 1: a point), padded to a fixed length, and the face's normal."""

    verts: jax.Array  # [4 (box) or 16 (cylinder), 3] world
    count: jax.Array  # [] int
    normal: jax.Array  # [3] world (meaningful for faces)


def _padded(points: jax.Array, length: int) -> jax.Array:
    return jnp.concatenate([points, jnp.repeat(points[:1], length - len(points), 0)])


def _box_feature(pos: jax.Array, mat: jax.Array, size: jax.Array, d: jax.Array) -> Feature:
    local = mat.T @ d
    mag = jnp.abs(local)
    sign = jnp.where(local >= 0.0, 1.0, -1.0)
    k, free = jnp.argmax(mag), jnp.argmin(mag)
    axis_k = jax.nn.one_hot(k, 3, dtype=d.dtype)
    u = jax.nn.one_hot((k + 1) % 3, 3, dtype=d.dtype) * size
    v = jax.nn.one_hot((k + 2) % 3, 3, dtype=d.dtype) * size
    face = axis_k * sign * size + _FACE_SIGNS[:, :1] * u + _FACE_SIGNS[:, 1:] * v
    free_axis = jax.nn.one_hot(free, 3, dtype=d.dtype)
    along = free_axis * size
    corner = sign * size
    middle = corner * (1.0 - free_axis)
    edge = jnp.stack([middle + along, middle - along])
    is_face = mag[k] >= _FACE_COS
    is_edge = ~is_face & (mag[free] < _EDGE_SIN)
    verts = jnp.where(is_face, face, jnp.where(is_edge, _padded(edge, 4), corner))
    count = jnp.where(is_face, 4, jnp.where(is_edge, 2, 1))
    return Feature(pos + verts @ mat.T, count, mat @ (axis_k * sign))


def _cylinder_feature(pos: jax.Array, mat: jax.Array, size: jax.Array, d: jax.Array) -> Feature:
    radius, half = size[0], size[1]
    local = mat.T @ d
    up = jnp.where(local[2] >= 0.0, 1.0, -1.0)
    cap = jnp.array([0.0, 0.0, 1.0]) * up * half
    radial = _normalize(local.at[2].set(0.0), _X) * radius
    theta = 2 * np.pi * np.arange(_CAP_POINTS) / _CAP_POINTS
    ring = cap + radius * np.stack([np.cos(theta), np.sin(theta), 0 * theta], -1)
    line = radial + jnp.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]]) * half
    is_face = jnp.abs(local[2]) >= _FACE_COS
    is_edge = jnp.abs(local[2]) < _EDGE_SIN
    verts = jnp.where(is_face, ring, jnp.where(is_edge, _padded(line, _CAP_POINTS), cap + radial))
    count = jnp.where(is_face, _CAP_POINTS, jnp.where(is_edge, 2, 1))
    return Feature(pos + verts @ mat.T, count, mat[:, 2] * up)


# ------------------------------------------------------------------- clipping


def _cross2(a: jax.Array, b: jax.Array) -> jax.Array:
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _edges(f: Feature) -> tuple[jax.Array, jax.Array]:
    """(index of each vertex's successor, whether vertex i starts a real edge)."""
    i = jnp.arange(len(f.verts))
    nxt = jnp.where(i + 1 < f.count, i + 1, 0)
    real = jnp.where(f.count >= 3, i < f.count, (f.count == 2) & (i == 0))
    return nxt, real


def _inside(q: jax.Array, poly: jax.Array, f: Feature) -> jax.Array:
    """[m] whether 2-D points q [m, 2] lie in the feature's polygon poly [k, 2] (a face)."""
    nxt, real = _edges(f)
    edge = poly[nxt] - poly
    area = jnp.sum(jnp.where(real, _cross2(poly, poly[nxt]), 0.0))
    side = jnp.sign(area) * _cross2(edge[None], q[:, None] - poly[None])  # [m, k]
    return (f.count >= 3) & (jnp.abs(area) > _AREA_TOL) & jnp.all(~real | (side >= -1e-9), -1)


def _depth_to(face: Feature, points: jax.Array, n: jax.Array) -> jax.Array:
    """[m] distance along n from points to the plane of a face (positive: the face is ahead)."""
    den = n @ face.normal
    return (face.verts[0] - points) @ face.normal / jnp.where(jnp.abs(den) > 1e-6, den, 1.0)


class _Clip(NamedTuple):
    """Candidate contacts of two features: f1's vertices in f2's face, f2's in f1's, then the
    crossings of an edge of each (row-major over f1's and f2's edges)."""

    dist: jax.Array  # [m] along the normal
    plane: jax.Array  # [m, 2] position in the contact plane
    valid: jax.Array  # [m]
    s: jax.Array  # [k1, k2] a crossing's parameter along f1's edge
    t: jax.Array  # [k1, k2] and along f2's

    def position(self, f1: Feature, f2: Feature, n: jax.Array, i: jax.Array) -> jax.Array:
        """World position of candidate i, midway between the surfaces."""
        k1, k2 = len(f1.verts), len(f2.verts)
        nxt1, nxt2 = _edges(f1)[0], _edges(f2)[0]
        e, o = jnp.divmod(jnp.maximum(i - k1 - k2, 0), k2)
        a = f1.verts[e] + self.s[e, o] * (f1.verts[nxt1[e]] - f1.verts[e])
        b = f2.verts[o] + self.t[e, o] * (f2.verts[nxt2[o]] - f2.verts[o])
        half = 0.5 * self.dist[i] * n
        own1 = f1.verts[jnp.minimum(i, k1 - 1)] + half
        own2 = f2.verts[jnp.clip(i - k1, 0, k2 - 1)] - half
        return jnp.where(i < k1, own1, jnp.where(i < k1 + k2, own2, 0.5 * (a + b)))


def _clip(f1: Feature, f2: Feature, n: jax.Array, frame: jax.Array) -> _Clip:
    """The candidate contacts of two features (positions are made for the kept ones only)."""
    basis = frame[1:].T  # [3, 2] the contact plane
    q1, q2 = f1.verts @ basis, f2.verts @ basis
    h1, h2 = f1.verts @ n, f2.verts @ n  # heights along the normal
    used1 = jnp.arange(len(f1.verts)) < f1.count
    used2 = jnp.arange(len(f2.verts)) < f2.count
    # vertices of one feature inside the other's face
    in2 = used1 & _inside(q1, q2, f2)
    d1 = _depth_to(f2, f1.verts, n)
    in1 = used2 & _inside(q2, q1, f1)
    d2 = -_depth_to(f1, f2.verts, n)
    # crossings of an edge of each
    nxt1, real1 = _edges(f1)
    nxt2, real2 = _edges(f2)
    e1, e2 = q1[nxt1] - q1, q2[nxt2] - q2
    den = _cross2(e1[:, None], e2[None])  # [k1, k2]
    rel = q2[None] - q1[:, None]
    ok = jnp.abs(den) > 1e-9 * _safe_norm(e1)[:, None] * _safe_norm(e2)[None]
    safe = jnp.where(ok, den, 1.0)
    s, t = _cross2(rel, e2[None]) / safe, _cross2(rel, e1[:, None]) / safe
    cross = ok & real1[:, None] & real2[None] & (s >= 0) & (s <= 1) & (t >= 0) & (t <= 1)
    dc = (h2 + t * (h2[nxt2] - h2)) - (h1[:, None] + s * (h1[nxt1] - h1)[:, None])
    at = (q1[:, None] + s[..., None] * e1[:, None]).reshape(-1, 2)
    return _Clip(
        jnp.concatenate([d1, d2, dc.ravel()]),
        jnp.concatenate([q1, q2, at]),
        jnp.concatenate([in2, in1, cross.ravel()]),
        s,
        t,
    )


def _select(dist: jax.Array, plane: jax.Array, eligible: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Indices [4] of the contacts kept and whether each slot is used: the deepest, the
    farthest from it, the most triangle area, then the most area added to that triangle."""
    i1 = jnp.argmin(jnp.where(eligible, dist, jnp.inf))
    x1 = plane[i1]
    spread = jnp.where(eligible, jnp.sum((plane - x1) ** 2, -1), -1.0)
    i2 = jnp.argmax(spread)
    x2 = plane[i2]
    area = jnp.where(eligible, jnp.abs(_cross2(x2 - x1, plane - x1)), -1.0)
    i3 = jnp.argmax(area)
    x3 = plane[i3]
    turn = jnp.sign(_cross2(x2 - x1, x3 - x1))
    added = sum(
        jnp.maximum(-turn * _cross2(b - a, plane - a), 0.0)
        for a, b in ((x1, x2), (x2, x3), (x3, x1))
    )
    i4 = jnp.argmax(jnp.where(eligible, added, -1.0))
    used1 = jnp.any(eligible)
    used2 = used1 & (spread[i2] > _AREA_TOL)  # rounding (float32, fused products) of areas
    used3 = used2 & (area[i3] > jnp.maximum(_AREA_TOL, _FLAT * spread[i2]))  # grows with size
    used4 = used3 & (added[i4] > jnp.maximum(_AREA_TOL, _FLAT * area[i3]))
    return jnp.stack([i1, i2, i3, i4]), jnp.stack([used1, used2, used3, used4])


def _distinct(
    dist: jax.Array, plane: jax.Array, eligible: jax.Array, slots: int
) -> tuple[jax.Array, jax.Array]:
    """Indices [slots] of the distinct eligible points (used slots first) and whether each slot
    is used; a point within 1e-5 of an earlier one in the contact plane is the same point."""
    x, y = plane[:, 0], plane[:, 1]  # apart: a trailing axis of 2 vectorises badly on CPUs
    near = (x[:, None] - x[None]) ** 2 + (y[:, None] - y[None]) ** 2 < _AREA_TOL
    earlier = np.tril(np.ones(near.shape, bool), -1)
    keep = eligible & ~jnp.any(near & earlier & eligible[None], axis=1)
    (idx,) = jnp.nonzero(keep, size=slots, fill_value=0)
    return idx, jnp.arange(slots) < jnp.sum(keep)


def _witness(f1: Feature, f2: Feature, dist: jax.Array, n: jax.Array) -> jax.Array:
    """Position of the single contact at the separating axis: midway from the point feature
    (or, between two edges, their closest points)."""
    s, t = _segment_segment(f1.verts[0], f1.verts[1], f2.verts[0], f2.verts[1])
    a = f1.verts[0] + s * (f1.verts[1] - f1.verts[0])
    b = f2.verts[0] + t * (f2.verts[1] - f2.verts[0])
    return jnp.where(
        f2.count == 1,
        f2.verts[0] - 0.5 * dist * n,
        jnp.where(f1.count == 1, f1.verts[0] + 0.5 * dist * n, 0.5 * (a + b)),
    )


def collide_cylinder(
    kind2: int,
    pos1: jax.Array,
    mat1: jax.Array,
    size1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    size2: jax.Array,
    margin: jax.Array | float = 0.0,
) -> Contact:
    """A cylinder (geom1) against a box or cylinder of type ``kind2``: 4 slots, as MuJoCo 4.0's
    convex collider reports them (the module's docstring)."""
    sd, n = separating_axis(kind2, pos1, mat1, size1, pos2, mat2, size2)
    f1 = _cylinder_feature(pos1, mat1, size1, n)
    feature2 = _box_feature if kind2 == GEOM_BOX else _cylinder_feature
    return touching_contacts(f1, feature2(pos2, mat2, size2, -n), sd, n, margin)


def collide_capsule_cylinder(
    pos1: jax.Array,
    mat1: jax.Array,
    size1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    size2: jax.Array,
    margin: jax.Array | float = 0.0,
) -> Contact:
    """A capsule (geom1) against a cylinder: 2 slots, as MuJoCo 4.0's convex collider reports
    them.

    The capsule is its segment (a cylinder of radius 0) grown by its radius, so the signed
    distance and normal are the segment's separating axis with the cylinder, less the radius:
    exact however deep. Where that axis is the cap's or a rim's against the segment, within
    5.13 degrees of the cap's normal, and the segment lies along the cap within 5.09 (MuJoCo's
    tolerances), the capsule's surface line nearest the cap (:func:`_capsule_line`) is clipped
    to the cap's 16-gon: up to two points, each with its depth along the cap's normal; one
    alone is reported twice where the axis is a rim's (an edge pair), as MuJoCo does.
    Otherwise there is one contact, at the axis's witness: the segment's end deepest along
    the normal, the rim's point, or the closest points of the segment and the side's line."""
    r = size1[0]
    a, b = _capsule_ends(pos1, mat1, size1)
    gap = _Gap(GEOM_CYLINDER, pos2, mat2, size2, pos1, mat1, jnp.stack([0.0 * r, size1[1], 0.0]))
    axes = _normalize(_cylinder_segment_axes(gap, jnp.stack([a, b])), _X)
    k = jnp.argmax(gap(axes))
    n = jnp.where(axes[k] @ (pos2 - pos1) < 0.0, -axes[k], axes[k])  # capsule -> cylinder
    sd = gap(n[None])[0] - r
    along = b - a
    axis = mat2[:, 2]
    up = jnp.where(axis @ n < 0.0, axis, -axis)  # the normal of the cap facing the capsule
    cap_axis, rim_edge = k == 0, k == len(axes) - 1
    lying = (cap_axis | rim_edge) & (-(n @ up) >= _FACE_COS)
    lying &= jnp.abs(along @ up) < _EDGE_SIN * _safe_norm(along)
    line = _capsule_line(a, b, r, n)
    clip = _line_on_cap(line, pos2 + up * size2[1], up, mat2, size2[0], margin)
    # the witness of the axis (one contact): the segment's deepest end, the rim's point
    # against the segment, or the closest points of the segment and the side's line where
    # they cross or lie side by side (then in their overlap, not at an end beyond the side)
    deepest = jnp.where(a @ n >= b @ n, a, b) + r * n
    radial = _normalize(_perp(-n, axis), mat2[:, 0]) * size2[0]
    rim = pos2 + up * size2[1] + radial
    s, t = _segment_segment(a, b, pos2 + radial - axis * size2[1], pos2 + radial + axis * size2[1])
    side = pos2 + radial + (2.0 * t - 1.0) * size2[1] * axis
    level = jnp.abs(along @ n) < _PARALLEL * _safe_norm(along)  # both ends as deep
    witness = jnp.where(
        (k == 1) | ((k <= 3) & level),
        0.5 * (a + s * along + r * n + side),
        jnp.where(rim_edge, rim - 0.5 * sd * n, deepest + 0.5 * sd * n),
    )
    clipped = lying & clip.used[0]
    # MuJoCo reports a line clipped to one point twice where it came from an edge pair
    twice = rim_edge & clip.found[1] & ~clip.used[1]
    second = jnp.where(twice, 0, 1)
    dist = jnp.where(
        clipped,
        jnp.where(clip.used | twice, clip.dist[jnp.stack([0, second])], FAR),
        jnp.stack([sd, jnp.asarray(FAR, sd.dtype)]),
    )
    pos = jnp.where(clipped, clip.pos[jnp.stack([0, second])], jnp.stack([witness, witness]))
    frame = make_frame(jnp.where(clipped, -up, n))
    return Contact(dist, pos, jnp.broadcast_to(frame, (CAPSULE_CYLINDER_CONTACTS, 3, 3)))


def _capsule_line(a: jax.Array, b: jax.Array, r: jax.Array, n: jax.Array) -> jax.Array:
    """[2, 3] the line of a capsule's surface facing along n: its segment ab moved by r times
    n's part across it, which MuJoCo does not normalise (a line tilted by t off a face sits
    r cos^2 t below the segment)."""
    along = b - a
    return jnp.stack([a, b]) + r * _perp(n, along / _safe_norm(along))


class _CapClip(NamedTuple):
    """Up to two points of a line over a cap, the deeper first."""

    dist: jax.Array  # [2] height above the cap (negative: below it)
    pos: jax.Array  # [2, 3] midway between the line and the cap
    found: jax.Array  # [2] over the cap's polygon (the second distinct from the first)
    used: jax.Array  # [2] found and within the margin


_CAP_EDGES = np.stack(
    [np.cos((np.arange(_CAP_POINTS) + 0.5) * 2 * np.pi / _CAP_POINTS),
     np.sin((np.arange(_CAP_POINTS) + 0.5) * 2 * np.pi / _CAP_POINTS)], -1
)  # fmt: skip  # the 16-gon's outward edge normals (its vertices at multiples of 22.5 deg)


def _line_on_cap(
    line: jax.Array,
    centre: jax.Array,
    up: jax.Array,
    mat: jax.Array,
    radius: jax.Array,
    margin: jax.Array | float,
) -> _CapClip:
    """The part of ``line`` [2, 3] over the cap at ``centre`` with outward normal ``up`` (of a
    cylinder of frame mat): its ends clipped to the cap's 16-gon (the polygon MuJoCo clips
    against), with their depths."""
    local = (line - centre) @ mat[:, :2]  # [2, 2] in the cap's plane
    start, step = local[0] @ _CAP_EDGES.T, (local[1] - local[0]) @ _CAP_EDGES.T  # [16] each
    room = radius * np.cos(np.pi / _CAP_POINTS) - start  # start + t step <= apothem
    safe = jnp.where(step == 0.0, 1.0, step)
    lo = jnp.max(jnp.where(step < 0.0, room / safe, 0.0), initial=0.0)
    hi = jnp.min(jnp.where(step > 0.0, room / safe, 1.0), initial=1.0)
    over = (lo <= hi) & jnp.all((step != 0.0) | (room >= 0.0))
    ends = line[0] + jnp.stack([lo, hi])[:, None] * (line[1] - line[0])
    dist = (ends - centre) @ up
    first = jnp.argmin(dist)
    dist, ends = dist[jnp.stack([first, 1 - first])], ends[jnp.stack([first, 1 - first])]
    apart = jnp.sum((ends[1] - ends[0]) ** 2) > _AREA_TOL
    found = over & jnp.stack([True, apart])
    return _CapClip(dist, ends - 0.5 * dist[:, None] * up, found, found & (dist <= margin))


def touching_contacts(
    f1: Feature,
    f2: Feature,
    sd: jax.Array,
    n: jax.Array,
    margin: jax.Array | float,
    repeat_single: jax.Array | bool = False,
    slots: int = CONVEX_CONTACTS,
) -> Contact:
    """The 4 slots of two touching features (f1 along n, f2 along -n) at the separating axis's
    distance sd and normal n: the clip's points within the margin, or one at the witness.
    Two or more clipped points take the touching face's normal (geom2's where both touch
    with a face) and their depths along it; one alone, like a witness, takes sd and n: as
    MuJoCo 4.0 reports them. ``repeat_single``: an edge on a face clipped to one point gives
    it twice (MuJoCo's report where the edge came from an edge pair). ``slots`` above 4: every
    distinct point of the clip (MuJoCo's box-box, up to 8), deepest first, instead of 4 of
    them."""
    clip_n = jnp.where(f2.count >= 3, -f2.normal, jnp.where(f1.count >= 3, f1.normal, n))
    clip = _clip(f1, f2, clip_n, make_frame(clip_n))
    eligible = clip.valid & (clip.dist <= margin)
    pick = _select if slots == CONVEX_CONTACTS else lambda *a: _distinct(*a, slots)
    idx, used = pick(clip.dist, clip.plane, eligible)
    # MuJoCo 4.0 reports an edge clipped on a face to one point twice where it found the edge
    # from an edge pair (repeat_single): two coincident contacts, which its solver sees as two
    edge_on_face = (jnp.minimum(f1.count, f2.count) == 2) & (jnp.maximum(f1.count, f2.count) > 2)
    twice = repeat_single & edge_on_face & used[0] & ~used[1] & (jnp.sum(clip.valid) >= 2)
    used = used.at[1].set(used[1] | twice)
    idx = idx.at[1].set(jnp.where(twice, idx[0], idx[1]))
    clipped = used[1] & ((f1.count != 2) | (f2.count != 2))  # two edges: their witness
    one = jnp.arange(slots) == 0
    dist = jnp.where(clipped, jnp.where(used, clip.dist[idx], FAR), jnp.where(one, sd, FAR))
    kept = jax.vmap(lambda i: clip.position(f1, f2, clip_n, i))(idx)
    single = jnp.where(used[0], clip.position(f1, f2, n, idx[0]), _witness(f1, f2, sd, n))
    pos = jnp.where(clipped, kept, single)
    frame = make_frame(jnp.where(clipped, clip_n, n))
    return Contact(dist, pos, jnp.broadcast_to(frame, (slots, 3, 3)))
