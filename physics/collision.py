"""Narrow-phase collision of primitive geoms (plane, sphere, capsule, ellipsoid, cylinder,
box) and of meshes against planes, MuJoCo-compatible.

Every geom is given in the world frame by its position ``pos`` [3], rotation ``mat`` [3, 3]
(columns are the local axes) and MuJoCo ``size`` [3]: sphere (radius, -, -), capsule and
cylinder (radius, half-length along local z, -), ellipsoid (semi-axes), box (half-extents),
plane (-, -, -; the plane is the local xy plane through ``pos``, normal local z, infinite).

Each pair function returns a :class:`Contact` with a FIXED number of points (leading axis), so
the result has a static shape and can be jitted and vmapped. Unused points get ``dist = FAR``
and are masked by the caller's margin test (``dist < margin``), never branched on. The fixed
count per pair type is :func:`num_contacts`:

=================  =====  =========================================================
pair               count  notes
=================  =====  =========================================================
plane-sphere       1      exact (as MuJoCo)
plane-capsule      2      the two end spheres (as MuJoCo)
plane-box          4      first 4 corners below the plane in MuJoCo's corner order
plane-ellipsoid    1      exact (as MuJoCo): the ellipsoid's support point
plane-mesh         4      as MuJoCo 4.0: the convex hull's vertex deepest below the plane
                          and up to three more of the hull face around it that faces the
                          plane most directly (the four of most area)
sphere-mesh        1      exact: the closest point of the convex hull, or inside it the
                          face of least penetration (MuJoCo's GJK/EPA result)
plane-cylinder     4      exact (as MuJoCo): the nearest rim points of both caps, and two
                          more on the nearer cap's rim (a triangle with the first)
sphere-sphere      1      exact; coincident centres get normal +x (as MuJoCo)
sphere-capsule     1      exact
capsule-capsule    2      closest points; exactly parallel axes give the two ends of the
                          overlap (as MuJoCo), otherwise slot 2 is unused
sphere-box         1      exact (box signed distance at the sphere centre)
sphere-cylinder    1      exact (as MuJoCo): side, cap or rim, whichever is nearest
capsule-box        2      exact (MuJoCo's mjraw_CapsuleBox): the segment's closest point
                          among its ends over faces and its closest points to the 12 edges,
                          and MuJoCo's second point along it over the same face or edge
                          (:mod:`physics.capsule_box`)
capsule-cylinder   2      exact depth and normal (the segment's separating axis with the
                          cylinder, less the radius); lying on a cap, the capsule's line
                          clipped to it (2 points, as MuJoCo 4.0), else the axis's witness:
                          :mod:`physics.convex`
box-box            8      exact depth (separating axes); every distinct point of the
                          touching features' clip, as MuJoCo's box-box: :mod:`physics.polytope`
cylinder-cylinder  4      exact depth and normal (separating axes), points by clipping
cylinder-box       4      the touching faces as MuJoCo 4.0 does: :mod:`physics.convex`
box-mesh           4      the same for convex polytopes (exact separating axes):
mesh-mesh          4      :mod:`physics.polytope`
capsule-mesh       4      the segment's deepest point in the hull (golden section, or an
                          end): exact while the segment is outside the hull; lying along a
                          face, its surface line clipped to the face (2 points, as MuJoCo 4.0)
cylinder-mesh      4      exact depth (the axes the feature pairs define; a rim against an
                          edge by search), points as cylinder-box: :mod:`physics.polytope`
ellipsoid-sphere,  1      the minimum translation distance, as MuJoCo's GJK/EPA: Newton on
capsule, ellipsoid,       the sphere of directions over the support functions
cylinder, box,            (:mod:`physics.smooth`)
mesh
=================  =====  =========================================================
Height fields collide with every type but planes and height fields (:mod:`physics.hfield`).

Conventions follow MuJoCo's ``mjContact``: ``dist`` is signed (negative = penetration),
``pos`` is midway between the two surfaces, ``frame`` rows are (normal, tangent1, tangent2)
with the normal pointing from geom1 to geom2, and geom1 has the lower type (MuJoCo orders
pairs that way). Degenerate configurations (coincident centres, parallel segments, zero
vectors) use safe norms so values and gradients stay finite.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from physics import math
from physics.mesh import Hull
from physics.system import (
    GEOM_BOX,
    GEOM_CAPSULE,
    GEOM_CYLINDER,
    GEOM_ELLIPSOID,
    GEOM_MESH,
    GEOM_PLANE,
    GEOM_SPHERE,
)

FAR = 1e6  # distance given to unused contact slots; any margin test rejects it
_EPS = 1e-12  # squared-norm floor below which a vector counts as zero
_GOLDEN_ITERS = 24  # golden-section steps on a segment: bracket shrinks to 0.618**24 ~ 1e-5
_PARALLEL_TOL = 1e-6  # |sin| below which segment axes count as parallel
_PLANE_MESH_CONTACTS = 4  # the deepest hull vertex and three more of one hull face

ELLIPSOID_PARTNERS = (GEOM_SPHERE, GEOM_CAPSULE, GEOM_ELLIPSOID, GEOM_CYLINDER, GEOM_BOX, GEOM_MESH)
"""Geom types an ellipsoid collides with besides planes and height fields (physics.smooth)."""

_NUM_CONTACTS = {
    (GEOM_PLANE, GEOM_SPHERE): 1,
    (GEOM_PLANE, GEOM_CAPSULE): 2,
    (GEOM_PLANE, GEOM_CYLINDER): 4,
    (GEOM_PLANE, GEOM_BOX): 4,
    (GEOM_PLANE, GEOM_ELLIPSOID): 1,
    (GEOM_PLANE, GEOM_MESH): _PLANE_MESH_CONTACTS,
    (GEOM_SPHERE, GEOM_MESH): 1,
    (GEOM_SPHERE, GEOM_SPHERE): 1,
    (GEOM_SPHERE, GEOM_CAPSULE): 1,
    (GEOM_CAPSULE, GEOM_CAPSULE): 2,
    (GEOM_SPHERE, GEOM_CYLINDER): 1,
    (GEOM_SPHERE, GEOM_BOX): 1,
    (GEOM_CAPSULE, GEOM_CYLINDER): 2,
    (GEOM_CAPSULE, GEOM_BOX): 2,
    (GEOM_BOX, GEOM_BOX): 8,
    (GEOM_CYLINDER, GEOM_CYLINDER): 4,
    (GEOM_CYLINDER, GEOM_BOX): 4,
    (GEOM_CAPSULE, GEOM_MESH): 4,
    (GEOM_CYLINDER, GEOM_MESH): 4,
    (GEOM_BOX, GEOM_MESH): 4,
    (GEOM_MESH, GEOM_MESH): 4,
    **{tuple(sorted((GEOM_ELLIPSOID, t))): 1 for t in ELLIPSOID_PARTNERS},
}


class Contact(NamedTuple):
    """Contact points of one geom pair, ``n`` = :func:`num_contacts` of the pair type."""

    dist: jax.Array  # [n] signed distance, FAR for unused slots
    pos: jax.Array  # [n, 3] world position, midway between the surfaces
    frame: jax.Array  # [n, 3, 3] rows: normal (geom1 -> geom2), tangent1, tangent2

    @property
    def normal(self) -> jax.Array:
        """[n, 3] unit normal pointing from geom1 to geom2."""
        return self.frame[..., 0, :]


def num_contacts(type1: int, type2: int) -> int:
    """Fixed number of contact slots for a (static) geom type pair, type1 <= type2."""
    if (type1, type2) not in _NUM_CONTACTS:
        raise ValueError(f"unsupported geom pair types ({type1}, {type2})")
    return _NUM_CONTACTS[(type1, type2)]


# ----------------------------------------------------------------------------- helpers


def _safe_norm(x: jax.Array) -> jax.Array:
    """Euclidean norm over the last axis with a finite (zero) gradient at x = 0."""
    sq = jnp.sum(x * x, axis=-1)
    ok = sq > _EPS
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, sq, 1.0)), 0.0)


def _normalize(x: jax.Array, fallback: jax.Array) -> jax.Array:
    """Unit vector along x, or ``fallback`` when x is (numerically) zero."""
    n = _safe_norm(x)
    ok = n > 0.0
    return jnp.where(ok[..., None], x / jnp.where(ok, n, 1.0)[..., None], fallback)


def make_frame(normal: jax.Array, hint: jax.Array | None = None) -> jax.Array:
    """Contact frame [3, 3] (rows normal, t1, t2) built like MuJoCo's ``mju_makeFrame``.

    t1 is ``hint`` (a unit vector, e.g. the capsule axis) made orthogonal to the normal, or
    +x when the hint is parallel to the normal; without a hint it is world y, or world z
    when the normal is mostly along y.
    """
    if hint is None:
        hint = jnp.where(
            jnp.abs(normal[1]) < 0.5, jnp.array([0.0, 1.0, 0.0]), jnp.array([0.0, 0.0, 1.0])
        )
    y = _normalize(hint - normal * jnp.dot(normal, hint), jnp.array([1.0, 0.0, 0.0]))
    return jnp.stack([normal, y, jnp.cross(normal, y)])


def _stack(dist: jax.Array, pos: jax.Array, normal: jax.Array) -> Contact:
    """Contact from stacked [n] distances, [n, 3] positions and [n, 3] normals."""
    return Contact(dist, pos, jax.vmap(make_frame)(normal))


def _sphere_sphere_raw(
    c1: jax.Array,
    r1: jax.Array,
    c2: jax.Array,
    r2: jax.Array,
    coincident: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(dist, pos, normal) of two spheres; coincident centres get normal `coincident` (MuJoCo:
    the cross product of the geoms' z axes), or +x as MuJoCo when it is zero or not given."""
    delta = c2 - c1
    x = jnp.array([1.0, 0.0, 0.0])
    fallback = x if coincident is None else _normalize(coincident, x)
    normal = _normalize(delta, fallback)
    dist = _safe_norm(delta) - r1 - r2
    return dist, c1 + normal * (r1 + 0.5 * dist), normal


def _segment_closest(a: jax.Array, b: jax.Array, p: jax.Array) -> jax.Array:
    """Closest point to p on segment [a, b] (a == b allowed)."""
    d = b - a
    t = jnp.clip(jnp.dot(p - a, d) / jnp.maximum(jnp.dot(d, d), _EPS), 0.0, 1.0)
    return a + t * d


def _capsule_ends(pos: jax.Array, mat: jax.Array, size: jax.Array) -> tuple[jax.Array, jax.Array]:
    """End points of a capsule's segment (along local z)."""
    half = mat[:, 2] * size[1]
    return pos - half, pos + half


def _box_sdf(p: jax.Array, half: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Signed distance of local point p to a box and its outward unit normal (local frame).

    Outside: direction from the closest surface point; inside: the face of least penetration
    (what MuJoCo's sphere-box uses).
    """
    q = jnp.abs(p) - half
    outside = jnp.maximum(q, 0.0)
    sign = jnp.where(p >= 0.0, 1.0, -1.0)
    qmax = jnp.max(q)
    face = jax.nn.one_hot(jnp.argmax(q), 3, dtype=p.dtype) * sign
    is_out = qmax > 0.0
    n_out = _normalize(outside * sign, face)
    return _safe_norm(outside) + jnp.minimum(qmax, 0.0), jnp.where(is_out, n_out, face)


def _point_box(
    c: jax.Array, r: jax.Array, pos: jax.Array, mat: jax.Array, half: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(dist, pos, normal sphere->box) of a sphere (centre c, radius r) against a box."""
    sdf, n_local = _box_sdf(mat.T @ (c - pos), half)
    n_box = mat @ n_local  # outward normal of the box, pointing towards c
    dist = sdf - r
    return dist, c - n_box * (r + 0.5 * dist), -n_box


# --------------------------------------------------------------------------- pair functions


def plane_sphere(
    pos1: jax.Array, mat1: jax.Array, pos2: jax.Array, radius: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(dist, pos, normal) of a plane and a sphere of given centre and radius."""
    n = mat1[:, 2]
    dist = jnp.dot(pos2 - pos1, n) - radius
    return dist, pos2 - n * (radius + 0.5 * dist), n


def collide_plane_sphere(
    pos1: jax.Array, mat1: jax.Array, pos2: jax.Array, size2: jax.Array
) -> Contact:
    """Plane (geom1) against sphere (geom2): 1 contact."""
    dist, pos, n = plane_sphere(pos1, mat1, pos2, size2[0])
    return _stack(dist[None], pos[None], n[None])


def collide_plane_capsule(
    pos1: jax.Array, mat1: jax.Array, pos2: jax.Array, mat2: jax.Array, size2: jax.Array
) -> Contact:
    """Plane against capsule: the two end spheres, t1 along the capsule axis like MuJoCo."""
    ends = jnp.stack(_capsule_ends(pos2, mat2, size2))
    dist, pos, n = jax.vmap(plane_sphere, (None, None, 0, None))(pos1, mat1, ends, size2[0])
    frame = jax.vmap(make_frame, (0, None))(n, mat2[:, 2])
    return Contact(dist, pos, frame)


def collide_plane_box(
    pos1: jax.Array,
    mat1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    size2: jax.Array,
    margin: jax.Array | float = 0.0,
) -> Contact:
    """Plane against box: the first 4 corners (MuJoCo's order) within margin of the plane.

    MuJoCo scans corners i = 0..7 (local sign of x, y, z from bits 0, 1, 2), keeps those on
    the lower half of the box (towards the plane) with dist <= margin, and stops at 4.
    """
    n = mat1[:, 2]
    bits = jnp.arange(8)
    signs = jnp.stack([(bits >> k) & 1 for k in range(3)], axis=-1) * 2.0 - 1.0
    corners = (signs * size2) @ mat2.T  # [8, 3] relative to the box centre
    ldist = corners @ n
    dist = jnp.dot(pos2 - pos1, n) + ldist
    active = (dist <= margin) & (ldist <= 0.0)
    order = jnp.argsort(jnp.where(active, bits, bits + 8))[:4]
    dist = jnp.where(active[order], dist[order], FAR)
    pos = pos2 + corners[order] - n * (0.5 * dist[:, None])
    return _stack(dist, pos, jnp.broadcast_to(n, (4, 3)))


def collide_plane_ellipsoid(
    pos1: jax.Array, mat1: jax.Array, pos2: jax.Array, mat2: jax.Array, size2: jax.Array
) -> Contact:
    """Plane against ellipsoid: 1 contact at the ellipsoid's point deepest below the plane
    (its support point along -normal: semi-axes^2 * m / |semi-axes * m|, m = -normal in the
    ellipsoid's frame)."""
    n = mat1[:, 2]
    m = mat2.T @ -n
    deepest = pos2 + mat2 @ (size2**2 * m / _safe_norm(size2 * m))
    dist = jnp.dot(deepest - pos1, n)
    return _stack(dist[None], (deepest - 0.5 * dist * n)[None], n[None])


def collide_plane_mesh(
    pos1: jax.Array,
    mat1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    hull: Hull,
) -> Contact:
    """Plane against a mesh's convex hull, as MuJoCo 4.0: the hull vertex deepest below the
    plane; of the hull faces around it, the one facing the plane most directly; and up to three
    more of that face's vertices (the most area with the first, MuJoCo's hull4f), each unless
    it lies above the mesh's centre."""
    n = mat1[:, 2]
    world = pos2 + hull.vertices @ mat2.T
    dist = (world - pos1) @ n
    first = jnp.argmin(dist)
    polys = hull.vert_polys[first]
    facing = jnp.where(polys >= 0, hull.poly_normal[jnp.maximum(polys, 0)] @ (mat2.T @ n), 2.0)
    face = polys[jnp.argmin(facing)]
    anchor = jnp.argmax(hull.poly_vert[face] == first)
    pick = hull.poly_pick[face, anchor]
    idx = jnp.maximum(pick, 0)
    keep = (pick >= 0) & ((world[idx] - pos2) @ n <= 0.0)
    ids = jnp.concatenate([first[None], idx])
    dist = jnp.concatenate([dist[first][None], jnp.where(keep, dist[idx], FAR)])
    pos = world[ids] - 0.5 * dist[:, None] * n
    return _stack(dist, pos, jnp.broadcast_to(n, (_PLANE_MESH_CONTACTS, 3)))


def _closest_on_triangle(p: jax.Array, a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """The point of triangle abc closest to p (Voronoi regions of its corners, edges and face;
    a degenerate triangle a = b = c gives a)."""
    ab, ac, ap, bp, cp = b - a, c - a, p - a, p - b, p - c
    d1, d2, d3, d4, d5, d6 = ab @ ap, ac @ ap, ab @ bp, ac @ bp, ab @ cp, ac @ cp
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2

    def ratio(num: jax.Array, den: jax.Array) -> jax.Array:
        return num / jnp.where(jnp.abs(den) > _EPS, den, 1.0)

    face = a + ab * ratio(vb, va + vb + vc) + ac * ratio(vc, va + vb + vc)
    point = face
    for cond, value in (  # the last that holds wins: reverse priority order
        ((va <= 0) & (d4 >= d3) & (d5 >= d6), b + (c - b) * ratio(d4 - d3, d4 - d3 + d5 - d6)),
        ((vb <= 0) & (d2 >= 0) & (d6 <= 0), a + ac * ratio(d2, d2 - d6)),
        ((d6 >= 0) & (d5 <= d6), c),
        ((vc <= 0) & (d1 >= 0) & (d3 <= 0), a + ab * ratio(d1, d1 - d3)),
        ((d3 >= 0) & (d4 <= d3), b),
        ((d1 <= 0) & (d2 <= 0), a),
    ):
        point = jnp.where(cond, value, point)
    return point


def _hull_sdf(p: jax.Array, hull: Hull) -> tuple[jax.Array, jax.Array]:
    """Signed distance of a point (hull frame) to a convex hull, and the outward normal:
    outside, from the closest point of its triangles; inside, the face of least penetration
    (what MuJoCo's GJK/EPA returns for a sphere)."""
    valid = hull.poly_vert[:, 0] >= 0
    offset = jnp.sum(hull.poly_normal * hull.vertices[jnp.maximum(hull.poly_vert[:, 0], 0)], -1)
    plane = jnp.where(valid, hull.poly_normal @ p - offset, -jnp.inf)
    face = jnp.argmax(plane)
    tri = hull.vertices[hull.triangles]  # [t, 3, 3]
    closest = jax.vmap(_closest_on_triangle, (None, 0, 0, 0))(p, tri[:, 0], tri[:, 1], tri[:, 2])
    gap = _safe_norm(closest - p)
    near = jnp.argmin(gap)
    inside = plane[face] < 0
    normal = jnp.where(
        inside, hull.poly_normal[face], _normalize(p - closest[near], hull.poly_normal[face])
    )
    return jnp.where(inside, plane[face], gap[near]), normal


def collide_sphere_mesh(
    pos1: jax.Array, size1: jax.Array, pos2: jax.Array, mat2: jax.Array, hull: Hull
) -> Contact:
    """Sphere against a mesh's convex hull: 1 contact, exact (MuJoCo's GJK/EPA gives it)."""
    sdf, n_local = _hull_sdf(mat2.T @ (pos1 - pos2), hull)
    n = mat2 @ n_local  # out of the mesh, towards the sphere's centre
    dist = sdf - size1[0]
    return _stack(dist[None], (pos1 - n * (size1[0] + 0.5 * dist))[None], -n[None])


def collide_sphere_sphere(
    pos1: jax.Array, size1: jax.Array, pos2: jax.Array, size2: jax.Array
) -> Contact:
    """Sphere against sphere: 1 contact."""
    dist, pos, n = _sphere_sphere_raw(pos1, size1[0], pos2, size2[0])
    return _stack(dist[None], pos[None], n[None])


def collide_sphere_capsule(
    pos1: jax.Array, size1: jax.Array, pos2: jax.Array, mat2: jax.Array, size2: jax.Array
) -> Contact:
    """Sphere against capsule: sphere against the closest point of the capsule segment."""
    a, b = _capsule_ends(pos2, mat2, size2)
    c2 = _segment_closest(a, b, pos1)
    dist, pos, n = _sphere_sphere_raw(pos1, size1[0], c2, size2[0])
    return _stack(dist[None], pos[None], n[None])


def _segment_segment(
    p1: jax.Array, q1: jax.Array, p2: jax.Array, q2: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Parameters (s, t) of the closest points of segments p1 + s d1 and p2 + t d2.

    Branch-free form of Ericson's ClosestPtSegmentSegment; parallel segments use s = 0.
    """
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a = jnp.maximum(jnp.dot(d1, d1), _EPS)
    e = jnp.maximum(jnp.dot(d2, d2), _EPS)
    b, c, f = jnp.dot(d1, d2), jnp.dot(d1, r), jnp.dot(d2, r)
    denom = a * e - b * b
    ok = denom > _EPS * a * e
    s = jnp.where(ok, jnp.clip((b * f - c * e) / jnp.where(ok, denom, 1.0), 0.0, 1.0), 0.0)
    t_raw = (b * s + f) / e
    s = jnp.where(
        t_raw < 0.0,
        jnp.clip(-c / a, 0.0, 1.0),
        jnp.where(t_raw > 1.0, jnp.clip((b - c) / a, 0.0, 1.0), s),
    )
    return s, jnp.clip(t_raw, 0.0, 1.0)


def collide_capsule_capsule(
    pos1: jax.Array,
    mat1: jax.Array,
    size1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    size2: jax.Array,
) -> Contact:
    """Capsule against capsule: 2 slots.

    Slot 1 is the closest pair of segment points. When the axes are parallel (as MuJoCo)
    the two slots are the ends of the overlap of segment 2 projected on segment 1; without
    axial overlap both slots are the same point, a duplicate MuJoCo 4.0 reports too.
    """
    p1, q1 = _capsule_ends(pos1, mat1, size1)
    p2, q2 = _capsule_ends(pos2, mat2, size2)
    r1, r2 = size1[0], size2[0]
    s, t = _segment_segment(p1, q1, p2, q2)
    # crossing axes (the closest points coincide): normal along z1 x z2, as MuJoCo
    crossing = jnp.cross(mat1[:, 2], mat2[:, 2])
    dist0, pos0, n0 = _sphere_sphere_raw(p1 + s * (q1 - p1), r1, p2 + t * (q2 - p2), r2, crossing)

    parallel = _safe_norm(jnp.cross(mat1[:, 2], mat2[:, 2])) < _PARALLEL_TOL
    ends1 = jnp.stack([_segment_closest(p1, q1, p2), _segment_closest(p1, q1, q2)])
    ends2 = jax.vmap(_segment_closest, (None, None, 0))(p2, q2, ends1)
    dist_p, pos_p, n_p = jax.vmap(_sphere_sphere_raw, (0, None, 0, None))(ends1, r1, ends2, r2)

    return _two_or_one(parallel, (dist_p, pos_p, n_p), (dist0, pos0, n0))


def _two_or_one(use_two: jax.Array, two: tuple, one: tuple) -> Contact:
    """2 slots: the `two` contacts ([2] dist, [2, 3] pos and normal) where `use_two`, else the
    single contact `one` in slot 1 with slot 2 pushed out of range."""
    dist2, pos2, n2 = two
    dist1, pos1, n1 = one
    dist = jnp.where(use_two, dist2, jnp.stack([dist1, dist1]) + jnp.array([0.0, FAR]))
    pos = jnp.where(use_two, pos2, jnp.stack([pos1, pos1]))
    normal = jnp.where(use_two, n2, jnp.stack([n1, n1]))
    return _stack(dist, pos, normal)


def collide_sphere_box(
    pos1: jax.Array, size1: jax.Array, pos2: jax.Array, mat2: jax.Array, size2: jax.Array
) -> Contact:
    """Sphere against box: 1 contact from the box signed distance at the sphere centre."""
    dist, pos, n = _point_box(pos1, size1[0], pos2, mat2, size2)
    return _stack(dist[None], pos[None], n[None])


def _golden_min(
    f: Callable[[jax.Array], jax.Array], dtype: jnp.dtype, iters: int = _GOLDEN_ITERS
) -> jax.Array:
    """argmin over t in [0, 1] of a convex scalar function, by fixed golden-section steps (one
    evaluation each: the inner point kept from the step before)."""
    g = 0.6180339887498949
    lo, hi, x1, x2 = (jnp.asarray(x, dtype) for x in (0.0, 1.0, 1.0 - g, g))

    def body(_: int, carry: tuple) -> tuple:
        lo, hi, x1, x2, f1, f2 = carry
        left = f1 <= f2  # the minimum is in [lo, x2]: x1 becomes the new upper inner point
        lo, hi = jnp.where(left, lo, x1), jnp.where(left, x2, hi)
        new = jnp.where(left, hi - g * (hi - lo), lo + g * (hi - lo))
        f_new = f(new)
        return (
            lo,
            hi,
            jnp.where(left, new, x2),
            jnp.where(left, x1, new),
            jnp.where(left, f_new, f2),
            jnp.where(left, f1, f_new),
        )

    carry = (lo, hi, x1, x2, f(x1), f(x2))
    lo, hi = jax.lax.fori_loop(0, iters, body, carry)[:2]
    return jax.lax.stop_gradient(0.5 * (lo + hi))


def _deepest_on_segment(sdf: Callable[[jax.Array], jax.Array], dtype: jnp.dtype) -> jax.Array:
    """t in [0, 1] minimizing a convex ``sdf`` along a capsule's segment: golden section, to
    1e-5 of the segment, or an end where that is deeper (a tilted capsule touching with an
    end, the common case, then is exact)."""
    t = _golden_min(sdf, dtype)
    ends = jnp.asarray([0.0, 1.0], dtype)
    t = jnp.where(sdf(ends[0]) <= sdf(t), ends[0], t)
    return jnp.where(sdf(ends[1]) < sdf(t), ends[1], t)


def collide_plane_cylinder(
    pos1: jax.Array, mat1: jax.Array, pos2: jax.Array, mat2: jax.Array, size2: jax.Array
) -> Contact:
    """Plane against cylinder: 4 slots, as MuJoCo's plane-cylinder.

    With the axis turned towards the plane, the points are the rim point nearest the plane on
    the near cap and on the far cap, and the two near-cap rim points that complete an
    equilateral triangle with the first. A cap parallel to the plane uses the local x axis.
    """
    n = mat1[:, 2]
    radius, half = size2[0], size2[1]
    axis = mat2[:, 2]
    along = jnp.dot(n, axis)
    axis = jnp.where(along > 0.0, -axis, axis)  # points towards the plane
    along = -jnp.abs(along)
    dist0 = jnp.dot(pos2 - pos1, n)
    radial = axis * along - n  # -n without its axial part: towards the plane, in the cap
    radial = _normalize(radial, mat2[:, 0]) * radius
    down = jnp.dot(radial, n)
    side = _normalize(jnp.cross(radial, axis), mat2[:, 1]) * (radius * 0.8660254037844386)
    near = pos2 + axis * half
    points = jnp.stack(
        [
            near + radial,
            pos2 - axis * half + radial,
            near + side - 0.5 * radial,
            near - side - 0.5 * radial,
        ]
    )
    dist = dist0 + jnp.stack(
        [
            along * half + down,
            -along * half + down,
            along * half - 0.5 * down,
            along * half - 0.5 * down,
        ]
    )
    return _stack(dist, points - n * (0.5 * dist[:, None]), jnp.broadcast_to(n, (4, 3)))


def _sphere_cylinder(
    c: jax.Array, r: jax.Array, pos: jax.Array, mat: jax.Array, size: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(dist, pos, normal sphere->cylinder) of a sphere (centre c, radius r), as MuJoCo's
    sphere-cylinder: against the side (axis point), a cap (plane) or the rim (a point)."""
    radius, half = size[0], size[1]
    axis = mat[:, 2]
    rel = c - pos
    x = jnp.dot(axis, rel)
    radial = rel - axis * x
    radial_sq = jnp.dot(radial, radial)
    side, cap = jnp.abs(x) < half, radial_sq < radius * radius
    deeper_in_side = (half - jnp.abs(x)) >= (radius - jnp.sqrt(radial_sq))
    use_side = side & (~cap | deeper_in_side)
    use_cap = cap & ~use_side

    d_side, p_side, n_side = _sphere_sphere_raw(c, r, pos + axis * x, radius)
    up = axis * jnp.where(x > 0.0, 1.0, -1.0)  # outward normal of the nearer cap
    d_cap = jnp.dot(rel, up) - half - r
    p_cap = c - up * (r + 0.5 * d_cap)
    rim = pos + up * half + _normalize(radial, mat[:, 0]) * radius
    d_rim, p_rim, n_rim = _sphere_sphere_raw(c, r, rim, 0.0)
    dist = jnp.where(use_side, d_side, jnp.where(use_cap, d_cap, d_rim))
    point = jnp.where(use_side, p_side, jnp.where(use_cap, p_cap, p_rim))
    normal = jnp.where(use_side, n_side, jnp.where(use_cap, -up, n_rim))
    return dist, point, normal


def collide_sphere_cylinder(
    pos1: jax.Array, size1: jax.Array, pos2: jax.Array, mat2: jax.Array, size2: jax.Array
) -> Contact:
    """Sphere against cylinder: 1 contact."""
    dist, pos, n = _sphere_cylinder(pos1, size1[0], pos2, mat2, size2)
    return _stack(dist[None], pos[None], n[None])


@functools.partial(math.jit_when_eager, static_argnames=("type1", "type2"))
def collide(
    type1: int,
    type2: int,
    pos1: jax.Array,
    mat1: jax.Array,
    size1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    size2: jax.Array,
    margin: jax.Array | float = 0.0,
    hull2: Hull | None = None,
    hull1: Hull | None = None,
) -> Contact:
    """Contacts of two geoms of STATIC types (MuJoCo mjtGeom ints, type1 <= type2).

    Returns :func:`num_contacts` slots; ``margin`` only selects plane-box corners and the
    points a cylinder-box or cylinder-cylinder clip keeps (the caller still masks every slot
    with ``dist < margin``); ``hull2`` and ``hull1`` are the geoms' convex hulls (a
    :class:`physics.mesh.Hull` row each) where they are meshes.
    """
    key = (type1, type2)
    if key == (GEOM_PLANE, GEOM_SPHERE):
        return collide_plane_sphere(pos1, mat1, pos2, size2)
    if key == (GEOM_PLANE, GEOM_CAPSULE):
        return collide_plane_capsule(pos1, mat1, pos2, mat2, size2)
    if key == (GEOM_PLANE, GEOM_CYLINDER):
        return collide_plane_cylinder(pos1, mat1, pos2, mat2, size2)
    if key == (GEOM_PLANE, GEOM_BOX):
        return collide_plane_box(pos1, mat1, pos2, mat2, size2, margin)
    if key == (GEOM_PLANE, GEOM_ELLIPSOID):
        return collide_plane_ellipsoid(pos1, mat1, pos2, mat2, size2)
    if (type2 == GEOM_MESH and hull2 is None) or (type1 == GEOM_MESH and hull1 is None):
        raise ValueError("a mesh geom needs its convex hull (hull1, hull2)")
    if key == (GEOM_PLANE, GEOM_MESH):
        return collide_plane_mesh(pos1, mat1, pos2, mat2, hull2)
    if key == (GEOM_SPHERE, GEOM_MESH):
        return collide_sphere_mesh(pos1, size1, pos2, mat2, hull2)
    if GEOM_ELLIPSOID in key:
        from physics import smooth  # built on this module's helpers

        return smooth.collide_ellipsoid(
            type1, type2, pos1, mat1, size1, pos2, mat2, size2, hull1, hull2
        )
    if type2 == GEOM_MESH:  # a capsule, cylinder, box or mesh
        from physics import polytope  # built on this module's helpers

        if type1 == GEOM_CAPSULE:
            return polytope.collide_capsule_mesh(pos1, mat1, size1, pos2, mat2, hull2, margin)
        if type1 == GEOM_CYLINDER:
            return polytope.collide_cylinder_mesh(pos1, mat1, size1, pos2, mat2, hull2, margin)
        return polytope.collide_mesh(type1, pos1, mat1, size1, hull1, pos2, mat2, hull2, margin)

    if key == (GEOM_SPHERE, GEOM_SPHERE):
        return collide_sphere_sphere(pos1, size1, pos2, size2)
    if key == (GEOM_SPHERE, GEOM_CAPSULE):
        return collide_sphere_capsule(pos1, size1, pos2, mat2, size2)
    if key == (GEOM_CAPSULE, GEOM_CAPSULE):
        return collide_capsule_capsule(pos1, mat1, size1, pos2, mat2, size2)
    if key == (GEOM_SPHERE, GEOM_CYLINDER):
        return collide_sphere_cylinder(pos1, size1, pos2, mat2, size2)
    if key == (GEOM_SPHERE, GEOM_BOX):
        return collide_sphere_box(pos1, size1, pos2, mat2, size2)
    if key == (GEOM_CAPSULE, GEOM_CYLINDER):
        from physics import convex

        return convex.collide_capsule_cylinder(pos1, mat1, size1, pos2, mat2, size2, margin)
    if key == (GEOM_CAPSULE, GEOM_BOX):
        from physics import capsule_box  # built on this module's helpers

        return capsule_box.collide_capsule_box(pos1, mat1, size1, pos2, mat2, size2, margin)
    if key == (GEOM_BOX, GEOM_BOX):
        from physics import polytope

        return polytope.collide_boxes(pos1, mat1, size1, pos2, mat2, size2, margin)
    if key in ((GEOM_CYLINDER, GEOM_CYLINDER), (GEOM_CYLINDER, GEOM_BOX)):
        from physics import convex  # built on this module's helpers

        return convex.collide_cylinder(type2, pos1, mat1, size1, pos2, mat2, size2, margin)
    raise ValueError(
        f"unsupported geom pair types ({type1}, {type2}); supported (type1 <= type2): "
        f"{sorted(_NUM_CONTACTS)}"
    )
