"""Box-box, box-mesh, mesh-mesh, capsule-mesh and cylinder-mesh contacts, as MuJoCo 4.0
reports them.

A mesh collides as its convex hull (:class:`physics.mesh.Hull`) and a box as the hull of its
corners, so both are convex polytopes here. Like :mod:`physics.convex`, in a fixed number of
branch-free operations:

1. **Signed distance and normal by separating axes.** For two convex polytopes the minimum
   translation distance is reached along a face normal of either or along the cross product
   of an edge of each, so the largest separation over those axes is the exact depth. Edge
   pairs are kept only where their arcs cross on the Gauss map (where the two edges form a
   face of the Minkowski difference), which makes their separation a dot product. Apart, the
   largest separation is a lower bound of the distance (exact where a face or an edge pair
   is closest, smaller where two corners are): contacts within a margin start no later.
2. **Touching features.** Along a face normal, as for the cylinder: the face around the
   hull's support vertex that faces the normal most directly if within MuJoCo's 5.13
   degrees, else the edge there most perpendicular to it within its 5.09 degrees, else the
   vertex. Along an edge pair's axis, as MuJoCo matches the features around its EPA witness:
   a face at each edge facing the other within 5.13 degrees, else one edge lying along a
   face at the other within 5.09 (then that face, not the axis, decides; clipped to one
   point, the point is reported twice, as MuJoCo does), else the two edges.
3. **Clipping** the two features in the contact plane, up to 4 points kept
   (:func:`physics.convex.touching_contacts`).

A capsule against a mesh takes its depth from the hull's signed distance along its segment
and its features from its surface (:func:`collide_capsule_mesh`). A cylinder against a mesh
(or a height field's prism) takes the largest separation over the directions that its
features and the polytope's define, either sign: face normals, the cap axis, the axis
crossed with each edge, the side against each vertex, each rim's closest point to each vertex,
and a rim against each edge (a search, as :mod:`physics.convex` does for a box); its features
are clipped as a cylinder's against a box (:func:`collide_cylinder_mesh`). Two boxes take the
classic 15 axes and keep every distinct point of the clip, up to 8, as MuJoCo's box-box does
(:func:`collide_boxes`).

Normals point from geom1 to geom2 (a box before a mesh, as MuJoCo orders types). The cost
grows with the hulls: every face against every vertex of the other, every edge against every
edge; MuJoCo's ``maxhullvert`` (mesh attribute) keeps a hull small.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from physics.collision import (
    Contact,
    _capsule_ends,
    _deepest_on_segment,
    _hull_sdf,
    _normalize,
    _safe_norm,
)
from physics.convex import (
    _EDGE_SIN,
    _FACE_COS,
    _X,
    CONVEX_CONTACTS,
    Feature,
    _capsule_line,
    _circle_point,
    _cylinder_feature,
    _extent,
    _padded,
    _perp,
    _rims,
    best_across,
    touching_contacts,
)
from physics.mesh import Hull, box_hull
from physics.system import GEOM_BOX, GEOM_CYLINDER

_BOX = box_hull()
_BOX_EDGE_AXIS = np.argmax(np.abs(np.diff(_BOX.vertices[_BOX.edges], axis=1)[:, 0]), axis=1)
_PARALLEL = 1e-6  # |sin| between two edges below which their cross product is no axis


class Polytope(NamedTuple):
    """A convex polytope in the world frame (a hull row's tables, -1 padded)."""

    verts: jax.Array  # [v, 3] (padding repeats vertex 0, which never changes a support)
    normals: jax.Array  # [f, 3] outward unit face normals
    face_vert: jax.Array  # [f, k] each face's vertices in cyclic order
    vert_faces: jax.Array  # [v, m] the faces around each vertex
    edges: jax.Array  # [e, 2]
    edge_faces: jax.Array  # [e, 2]
    centre: jax.Array  # [3] a point inside

    @classmethod
    def of(cls, pos: jax.Array, mat: jax.Array, hull: Hull) -> Polytope:
        """A hull (geom frame) placed at pos, mat."""
        return cls(
            pos + hull.vertices @ mat.T,
            hull.poly_normal @ mat.T,
            hull.poly_vert,
            hull.vert_polys,
            hull.edges,
            hull.edge_polys,
            pos,
        )

    @classmethod
    def box(cls, pos: jax.Array, mat: jax.Array, size: jax.Array) -> Polytope:
        """A box of half-sizes ``size``."""
        hull = jax.tree.map(jnp.asarray, _BOX)
        return cls.of(pos, mat, hull._replace(vertices=hull.vertices * size))


def _face_separations(a: Polytope, b: Polytope) -> jax.Array:
    """[f] how far b lies beyond the plane of each face of a (-inf for padding faces)."""
    anchor = a.verts[jnp.maximum(a.face_vert[:, 0], 0)]
    sep = jnp.min(b.verts @ a.normals.T, axis=0) - jnp.sum(anchor * a.normals, -1)
    return jnp.where(a.face_vert[:, 0] >= 0, sep, -jnp.inf)


def _edge_separations(a: Polytope, b: Polytope) -> tuple[jax.Array, jax.Array]:
    """([ea * eb] separations, [3, ea * eb] axes a -> b) of the edge pairs that form a face of
    the Minkowski difference (-inf for the others). Per component: [ea, eb, 3] arrays, with a
    trailing axis of 3, vectorise badly on CPUs."""
    start_a, start_b = (
        a.verts[jnp.maximum(a.edges[:, 0], 0)],
        b.verts[jnp.maximum(b.edges[:, 0], 0)],
    )
    dir_a = a.verts[jnp.maximum(a.edges[:, 1], 0)] - start_a
    dir_b = b.verts[jnp.maximum(b.edges[:, 1], 0)] - start_b
    n1, n2 = (a.normals[jnp.maximum(a.edge_faces[:, k], 0)] for k in (0, 1))
    m1, m2 = (-b.normals[jnp.maximum(b.edge_faces[:, k], 0)] for k in (0, 1))  # b's map, negated
    arc_a, arc_b = jnp.cross(n1, n2), jnp.cross(m1, m2)
    c, d = arc_a @ m1.T, arc_a @ m2.T  # [ea, eb]: b's arc ends either side of a's great circle
    e, f = (n1 @ arc_b.T), (n2 @ arc_b.T)  # and a's ends either side of b's
    crossing = (c * d < 0) & (e * f < 0) & (c * f > 0)
    (ax, ay, az), (bx, by, bz) = dir_a.T[:, :, None], dir_b.T[:, None, :]
    axis = (ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx)  # dir_a x dir_b
    length = jnp.sqrt(axis[0] ** 2 + axis[1] ** 2 + axis[2] ** 2)
    real = (a.edges[:, :1] >= 0) & (b.edges[None, :, 0] >= 0)
    ok = crossing & real & (length > _PARALLEL * _safe_norm(dir_a)[:, None] * _safe_norm(dir_b))
    rel = (start_a - a.centre).T[:, :, None]  # outward from a decides the sign
    gap = start_b.T[:, None, :] - start_a.T[:, :, None]
    outward = sum(axis[i] * rel[i] for i in range(3)) >= 0
    scale = jnp.where(outward, 1.0, -1.0) / jnp.where(ok, length, 1.0)
    sep = sum(axis[i] * gap[i] for i in range(3)) * scale
    return jnp.where(ok, sep, -jnp.inf).ravel(), jnp.stack([(x * scale).ravel() for x in axis])


def separating_axis(a: Polytope, b: Polytope) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(signed distance, unit normal a -> b, index of the axis) of two convex polytopes; the
    index counts a's faces, then b's, then edge pairs (a's edge major)."""
    edge_sep, edge_axis = _edge_separations(a, b)
    sep = jnp.concatenate([_face_separations(a, b), _face_separations(b, a), edge_sep])
    k = jnp.argmax(sep)
    axes = jnp.concatenate([a.normals.T, -b.normals.T, edge_axis], axis=1)  # [3, axes]
    return sep[k], axes[:, k], k


def _face_feature(p: Polytope, face: jax.Array, length: int) -> Feature:
    """Face ``face`` of p as a feature of ``length`` vertices."""
    ring = p.face_vert[face]
    verts = _padded(p.verts[jnp.where(ring >= 0, ring, ring[0])], length)
    return Feature(verts, jnp.sum(ring >= 0), p.normals[face])


def _edge_feature(p: Polytope, u: jax.Array, v: jax.Array, length: int) -> Feature:
    """The edge from vertex u to v of p (an edge's normal is never read: a face's stands in)."""
    verts = _padded(jnp.stack([p.verts[u], p.verts[v]]), length)
    return Feature(verts, jnp.asarray(2), p.normals[0])


def _length(p: Polytope) -> int:
    return max(p.face_vert.shape[1], 2)


def _feature(p: Polytope, d: jax.Array) -> Feature:
    """What p touches with along the unit direction d: a face, an edge or its support vertex
    (a convex.Feature padded to the hull's face size)."""
    s = jnp.argmax(p.verts @ d)
    around = p.vert_faces[s]
    cos = jnp.where(around >= 0, p.normals[jnp.maximum(around, 0)] @ d, -2.0)
    face = _face_feature(p, around[jnp.argmax(cos)], _length(p))
    at = (p.edges[:, 0] == s) | (p.edges[:, 1] == s)
    other = jnp.maximum(jnp.where(p.edges[:, 0] == s, p.edges[:, 1], p.edges[:, 0]), 0)
    along = p.verts[other] - p.verts[s]
    sin = jnp.where(at, jnp.abs(along @ d) / _safe_norm(along), jnp.inf)
    j = jnp.argmin(sin)
    is_face = jnp.max(cos) >= _FACE_COS
    is_edge = ~is_face & (sin[j] < _EDGE_SIN)
    edge = _edge_feature(p, s, other[j], _length(p))
    point = Feature(_padded(p.verts[s][None], _length(p)), jnp.asarray(1), face.normal)
    return jax.tree.map(
        lambda f, e, v: jnp.where(is_face, f, jnp.where(is_edge, e, v)), face, edge, point
    )


def _edge_pair_features(a: Polytope, b: Polytope, i: jax.Array, j: jax.Array) -> tuple:
    """Features where edge i of a and edge j of b give the normal (MuJoCo's EPA ends on the
    two edges): a face of each at the edges facing each other within 5.13 degrees, else one
    edge lying along a face at the other within 5.09 degrees (that face's normal then, not
    the axis, decides), else the two edges."""
    fa, fb = a.edge_faces[i], b.edge_faces[j]
    ea, eb = a.edges[i], b.edges[j]
    na, nb = a.normals[jnp.maximum(fa, 0)], b.normals[jnp.maximum(fb, 0)]  # [2, 3] each
    facing = na @ nb.T  # [2, 2]
    k = jnp.argmin(facing)
    ka, kb = k // 2, k % 2
    dir_a, dir_b = a.verts[ea[1]] - a.verts[ea[0]], b.verts[eb[1]] - b.verts[eb[0]]
    sin_a = jnp.abs(nb @ dir_a) / _safe_norm(dir_a)  # edge of a along b's faces
    sin_b = jnp.abs(na @ dir_b) / _safe_norm(dir_b)
    la, lb = _length(a), _length(b)
    edge_a, edge_b = _edge_feature(a, ea[0], ea[1], la), _edge_feature(b, eb[0], eb[1], lb)
    face_face = facing[ka, kb] <= -_FACE_COS
    a_on_b = ~face_face & (jnp.min(sin_a) < _EDGE_SIN)
    b_on_a = ~face_face & ~a_on_b & (jnp.min(sin_b) < _EDGE_SIN)
    face_a = _face_feature(a, jnp.where(face_face, fa[ka], fa[jnp.argmin(sin_b)]), la)
    face_b = _face_feature(b, jnp.where(face_face, fb[kb], fb[jnp.argmin(sin_a)]), lb)
    pick = lambda use, x, y: jax.tree.map(lambda u, w: jnp.where(use, u, w), x, y)  # noqa: E731
    return pick(face_face | b_on_a, face_a, edge_a), pick(face_face | a_on_b, face_b, edge_b)


def _contacts(
    a: Polytope,
    b: Polytope,
    sd: jax.Array,
    n: jax.Array,
    edges: tuple[jax.Array, jax.Array],
    margin: jax.Array | float,
    slots: int,
) -> Contact:
    """The contacts at the separating axis (sd, n); ``edges``: (i, j) where the axis is the
    cross product of edge i of a and edge j of b, (-1, -1) where it is a face normal."""
    edge_pair = edges[0] >= 0
    pairs = zip(_edge_pair_features(a, b, *edges), (_feature(a, n), _feature(b, -n)), strict=True)
    f1, f2 = (jax.tree.map(lambda x, y: jnp.where(edge_pair, x, y), g, f) for g, f in pairs)
    return touching_contacts(f1, f2, sd, n, margin, edge_pair, slots)


def collide_polytopes(a: Polytope, b: Polytope, margin: jax.Array | float = 0.0) -> Contact:
    """4 slots of two convex polytopes, as MuJoCo 4.0 reports them (the module's docstring)."""
    sd, n, k = separating_axis(a, b)
    faces = a.normals.shape[0] + b.normals.shape[0]
    i, j = jnp.divmod(k - faces, b.edges.shape[0])
    edge_pair = k >= faces
    edges = jnp.where(edge_pair, i, -1), jnp.where(edge_pair, j, -1)
    return _contacts(a, b, sd, n, edges, margin, CONVEX_CONTACTS)


def collide_capsule_mesh(
    pos1: jax.Array,
    mat1: jax.Array,
    size1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    hull: Hull,
    margin: jax.Array | float = 0.0,
) -> Contact:
    """A capsule (geom1) against a mesh: its segment's point deepest in the hull's signed
    distance (convex along the segment: `collision._deepest_on_segment`), less the radius,
    gives the depth and normal, exact while the segment is outside the hull. The capsule
    touches with the line of its surface nearest the mesh where the segment lies within 5.09
    degrees of the face the mesh touches with, or of a face beside the edge it touches with
    (clipped against that face: the two points MuJoCo 4.0 reports for a capsule lying on a
    face; beside an edge, one point alone twice, as MuJoCo reports it), else with that
    point."""
    a, b = _capsule_ends(pos1, mat1, size1)
    r = size1[0]
    la, lb = mat2.T @ (a - pos2), mat2.T @ (b - pos2)  # the segment in the hull's frame
    t = _deepest_on_segment(lambda t: _hull_sdf(la + t * (lb - la), hull)[0], la.dtype)
    sdf, out = _hull_sdf(la + t * (lb - la), hull)
    n = -(mat2 @ out)  # capsule -> mesh
    p = Polytope.of(pos2, mat2, hull)
    f2 = _feature(p, -n)
    axis = b - a
    length = _safe_norm(axis)
    # on an edge of the mesh, MuJoCo clips the capsule's line against a face beside the edge
    # that it lies along, and reports one point alone twice (as for polytopes' edge pairs)
    ends = p.verts[p.edges]  # [e, 2, 3]
    same = jnp.minimum(
        jnp.sum((ends - f2.verts[:2]) ** 2, (1, 2)), jnp.sum((ends - f2.verts[1::-1]) ** 2, (1, 2))
    )
    beside = p.edge_faces[jnp.argmin(same)]  # [2] the edge's faces
    sin = jnp.where(beside >= 0, jnp.abs(p.normals[jnp.maximum(beside, 0)] @ axis), jnp.inf)
    face = beside[jnp.argmin(sin)]
    on_edge_face = (f2.count == 2) & (jnp.min(sin) < _EDGE_SIN * length)
    f2 = jax.tree.map(
        lambda x, y: jnp.where(on_edge_face, x, y), _face_feature(p, face, _length(p)), f2
    )
    facing = jnp.where(f2.count >= 3, f2.normal, n)  # the line lies along a face, or the normal
    point = _padded((a + t * axis + r * n)[None], 2)
    along = jnp.abs(axis @ facing) < _EDGE_SIN * length
    f1 = Feature(jnp.where(along, _capsule_line(a, b, r, n), point), jnp.where(along, 2, 1), n)
    return touching_contacts(f1, f2, sdf - r, n, margin, on_edge_face)


def collide_boxes(
    pos1: jax.Array,
    mat1: jax.Array,
    size1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    size2: jax.Array,
    margin: jax.Array | float = 0.0,
) -> Contact:
    """Two boxes: 8 slots, every distinct point of the touching features' clip (MuJoCo's
    box-box reports the whole overlap polygon: 8 points for two squares turned 45 degrees).
    Boxes are centrally symmetric, so their separating axes are the classic 15: each box's 3
    face axes and the 9 cross products of their edge directions."""
    axes = jnp.concatenate([mat1.T, mat2.T, jnp.cross(mat1.T[:, None], mat2.T[None]).reshape(9, 3)])
    length = _safe_norm(axes)
    n = axes / jnp.maximum(length, 1e-12)[:, None]
    n = jnp.where((n @ (pos2 - pos1) >= 0)[:, None], n, -n)  # box 1 -> box 2
    gap = n @ (pos2 - pos1) - jnp.abs(n @ mat1) @ size1 - jnp.abs(n @ mat2) @ size2
    k = jnp.argmax(jnp.where(length > _PARALLEL, gap, -jnp.inf))
    a, b = Polytope.box(pos1, mat1, size1), Polytope.box(pos2, mat2, size2)
    p, q = jnp.divmod(jnp.maximum(k - 6, 0), 3)  # the edge directions of an edge-pair axis
    mid_a = (a.verts[a.edges[:, 0]] + a.verts[a.edges[:, 1]]) @ n[k]
    mid_b = (b.verts[b.edges[:, 0]] + b.verts[b.edges[:, 1]]) @ n[k]
    i = jnp.argmax(jnp.where(_BOX_EDGE_AXIS == p, mid_a, -jnp.inf))  # the supporting edges
    j = jnp.argmin(jnp.where(_BOX_EDGE_AXIS == q, mid_b, jnp.inf))
    edges = jnp.where(k >= 6, i, -1), jnp.where(k >= 6, j, -1)
    return _contacts(a, b, gap[k], n[k], edges, margin, slots=8)


def collide_mesh(
    type1: int,
    pos1: jax.Array,
    mat1: jax.Array,
    size1: jax.Array,
    hull1: Hull | None,
    pos2: jax.Array,
    mat2: jax.Array,
    hull2: Hull,
    margin: jax.Array | float = 0.0,
) -> Contact:
    """A box or mesh (geom1, ``type1``) against a mesh (geom2)."""
    a = Polytope.box(pos1, mat1, size1) if type1 == GEOM_BOX else Polytope.of(pos1, mat1, hull1)
    return collide_polytopes(a, Polytope.of(pos2, mat2, hull2), margin)


class CylinderGap(NamedTuple):
    """The separation of a cylinder (1) and a convex polytope (2) along unit directions n
    [m, 3] from the cylinder: the polytope's lowest vertex along n less the cylinder's
    highest point. Every n gives a lower bound of the signed distance; the largest equals it."""

    pos: jax.Array
    mat: jax.Array
    size: jax.Array
    poly: Polytope

    def __call__(self, n: jax.Array) -> jax.Array:
        return (
            jnp.min(n @ self.poly.verts.T, axis=1)
            - n @ self.pos
            - _extent(GEOM_CYLINDER, self.mat, self.size, n)
        )

    def either_way(self, n: jax.Array) -> jax.Array:
        """The separation along n or -n, whichever is larger."""
        return jnp.maximum(self(n), self(-n))


def _cylinder_axes(gap: CylinderGap) -> jax.Array:
    """Candidate normals (either sign) of a cylinder against a polytope: the directions that
    a pair of features defines (the faces of their Minkowski difference, and a rim's closest
    approach to a vertex)."""
    p1, m1, s1, b = gap.pos, gap.mat, gap.size, gap.poly
    axis = m1[:, 2]
    edges = jnp.maximum(b.edges, 0)  # padding rows: a zero edge, a harmless direction
    along = b.verts[edges[:, 1]] - b.verts[edges[:, 0]]
    rims = _rims(p1, m1, s1)
    near = jax.vmap(lambda c: jax.vmap(lambda v: _circle_point(c, axis, s1[0], v))(b.verts))(rims)
    return jnp.concatenate(
        [
            b.normals,  # the polytope's faces
            axis[None],  # caps
            jnp.cross(axis, along),  # the side against an edge
            _perp(b.verts - p1, axis),  # the side against a vertex
            (b.verts[None] - near).reshape(-1, 3),  # a rim against a vertex
            jax.vmap(lambda e: best_across(gap.either_way, e, m1))(along),  # a rim, an edge
        ]
    )


def cylinder_separating_axis(
    pos: jax.Array, mat: jax.Array, size: jax.Array, poly: Polytope
) -> tuple[jax.Array, jax.Array]:
    """(signed distance, unit normal cylinder -> polytope) of a cylinder and a polytope: the
    best of the candidate axes, either sign (every direction is a lower bound, so a
    degenerate candidate such as a padding edge's is harmless)."""
    gap = CylinderGap(pos, mat, size, poly)
    n = _normalize(_cylinder_axes(gap), _X)
    n = jnp.concatenate([n, -n])
    sep = gap(n)
    k = jnp.argmax(sep)
    return sep[k], n[k]


def cylinder_contacts(
    pos: jax.Array,
    mat: jax.Array,
    size: jax.Array,
    poly: Polytope,
    sd: jax.Array,
    n: jax.Array,
    margin: jax.Array | float,
) -> Contact:
    """4 slots of a cylinder (geom1) and a polytope at their separating axis (sd, n): the
    clip of the cylinder's cap, side line or rim point against the polytope's touching face,
    edge or vertex, as for a box (:func:`physics.convex.collide_cylinder`)."""
    f1 = _cylinder_feature(pos, mat, size, n)
    return touching_contacts(f1, _feature(poly, -n), sd, n, margin)


def collide_cylinder_mesh(
    pos1: jax.Array,
    mat1: jax.Array,
    size1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    hull: Hull,
    margin: jax.Array | float = 0.0,
) -> Contact:
    """A cylinder (geom1) against a mesh: 4 slots, as MuJoCo 4.0's convex collider reports
    them."""
    poly = Polytope.of(pos2, mat2, hull)
    return cylinder_contacts(
        pos1, mat1, size1, poly, *cylinder_separating_axis(pos1, mat1, size1, poly), margin
    )
