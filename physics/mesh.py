"""Mesh assets (numpy, once per model): files, mass properties and the convex hull MuJoCo
collides.

MuJoCo recentres every mesh at its centre of mass and turns it to its principal axes; a mesh
geom's frame is that frame (its ``pos``/``quat`` composed with the mesh's). Its ``size`` is the
largest |coordinate| of a vertex along each principal axis and its bounding radius the norm of
that size. Collisions use the convex hull of the vertices (:class:`Hull`): its faces
(coplanar triangles merged, MuJoCo's mesh polygons) give a plane contact its other points, and
with its edges they are the separating axes of :mod:`physics.polytope`.

Mass properties (``inertia`` attribute of ``<mesh>``): ``legacy`` (MuJoCo's default) and
``exact`` integrate the closed triangle mesh, ``convex`` its convex hull, ``shell`` its surface
(mass per area). Files: binary STL, Wavefront OBJ and MuJoCo's binary MSH.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
from scipy.spatial import ConvexHull, QhullError

INERTIA_MODES = ("legacy", "exact", "convex", "shell")
_MIN_VOLUME = 1e-15  # MuJoCo's mjMINVAL: a smaller volume (or area, for a shell) is an error
_COPLANAR = 1e-6  # hull triangles whose planes agree this closely form one polygon


class MeshError(ValueError):
    """A mesh that cannot be read or has no volume; the loader adds the element and file."""


class Hull(NamedTuple):
    """A convex hull as the mesh collisions read it (numpy per mesh; stacked and padded jax
    arrays in System.mesh_hull, one row per colliding mesh)."""

    vertices: np.ndarray  # [h, 3] in the mesh's principal frame
    vert_polys: np.ndarray  # [h, m] faces around each vertex, -1 padded
    poly_normal: np.ndarray  # [p, 3] outward unit normal of each face
    poly_vert: np.ndarray  # [p, k] each face's vertices in cyclic order, -1 padded
    # [p, k, 3]: with the face's k-th vertex deepest, the three others that MuJoCo's hull4f
    # keeps (the most area with it; -1 where the face has fewer)
    poly_pick: np.ndarray
    triangles: np.ndarray  # [t, 3] the hull's triangles (padding: vertex 0 three times)
    edges: np.ndarray  # [e, 2] the faces' edges, each once (-1 padded)
    edge_polys: np.ndarray  # [e, 2] the two faces that meet at each edge (-1 padded)


class Mesh(NamedTuple):
    """A mesh after loading: its triangles and what a geom of it needs."""

    vertices: np.ndarray  # [n, 3] in the principal frame (centred at the centre of mass)
    faces: np.ndarray  # [m, 3] vertex indices, counter-clockwise seen from outside
    com: np.ndarray  # [3] centre of mass in the asset's frame
    rot: np.ndarray  # [3, 3] columns: principal axes in the asset's frame (a rotation)
    measure: float  # volume (area for a shell): mass = density * measure
    inertia: np.ndarray  # [3] principal moments per unit density, descending
    hull: Hull | None  # the convex hull (None: a flat shell, which cannot collide)

    @property
    def size(self) -> np.ndarray:
        """MuJoCo's geom_size of a mesh geom: max |coordinate| along each principal axis."""
        return np.abs(self.vertices).max(axis=0)


# ----------------------------------------------------------------------------- files


_CONTENT_TYPES = {"model/stl": ".stl", "model/obj": ".obj", "model/vnd.mujoco.msh": ".msh"}


def read(path: str, content_type: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(vertices [n, 3], triangles [m, 3]) of an STL, OBJ or MSH file, chosen by
    ``content_type`` (MuJoCo's: model/stl, model/obj, model/vnd.mujoco.msh) or else by
    extension."""
    if content_type is not None and content_type not in _CONTENT_TYPES:
        raise MeshError(f"unsupported content_type {content_type!r}")
    ext = _CONTENT_TYPES.get(content_type) or os.path.splitext(path)[1].lower()
    readers = {".stl": _read_stl, ".obj": _read_obj, ".msh": _read_msh}
    if ext not in readers:
        raise MeshError(f"unsupported mesh file type {ext!r} (supported: .stl, .obj, .msh)")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise MeshError(f"cannot read mesh file {path}: {e.strerror}") from e
    try:
        vertices, faces = readers[ext](data)
    except (ValueError, IndexError) as e:
        raise MeshError(f"malformed mesh file {path}: {e}") from e
    return vertices, faces


def _read_stl(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    count = int.from_bytes(data[80:84], "little") if len(data) >= 84 else -1
    if len(data) != 84 + 50 * count:  # MuJoCo reads binary STL only
        raise ValueError("not a binary STL (ASCII STL is not supported, as in MuJoCo)")
    rec = np.frombuffer(data, np.dtype([("f", "<f4", (12,)), ("a", "<u2")]), count, 84)
    corners = rec["f"][:, 3:].reshape(-1, 3).astype(np.float64)
    vertices, index = np.unique(corners, axis=0, return_inverse=True)
    return vertices, index.reshape(-1, 3)


def _read_obj(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    vertices, faces = [], []
    for line in data.decode("utf-8", errors="replace").splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "v":
            vertices.append([float(x) for x in parts[1:4]])
        elif parts[0] == "f":
            ids = [int(p.split("/")[0]) for p in parts[1:]]
            ids = [i - 1 if i > 0 else len(vertices) + i for i in ids]
            faces += [(ids[0], ids[k], ids[k + 1]) for k in range(1, len(ids) - 1)]
    v, f = np.asarray(vertices, np.float64).reshape(-1, 3), np.asarray(faces, np.int64)
    if len(f) and (f.min() < 0 or f.max() >= len(v)):
        raise ValueError("a face refers to a vertex that does not exist")
    return v, f.reshape(-1, 3)


def _read_msh(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    nvert, nnormal, ntex, nface = np.frombuffer(data, "<i4", 4)
    floats = 3 * nvert + 3 * nnormal + 2 * ntex
    if len(data) != 16 + 4 * (floats + 3 * nface):
        raise ValueError("file size does not match its header")
    vertices = np.frombuffer(data, "<f4", 3 * nvert, 16).reshape(-1, 3).astype(np.float64)
    faces = np.frombuffer(data, "<i4", 3 * nface, 16 + 4 * floats).reshape(-1, 3)
    return vertices, faces.astype(np.int64)


# ----------------------------------------------------------------------------- properties


def _hull(vertices: np.ndarray) -> ConvexHull | None:
    """The convex hull (qhull, as MuJoCo), or None when the vertices span no volume."""
    try:
        return ConvexHull(vertices)
    except (QhullError, ValueError):
        return None


def _outward(hull: ConvexHull) -> np.ndarray:
    """The hull's triangles, each turned counter-clockwise seen from outside."""
    tri = hull.simplices.copy()
    v = hull.points
    normal = np.cross(v[tri[:, 1]] - v[tri[:, 0]], v[tri[:, 2]] - v[tri[:, 0]])
    flip = np.einsum("ij,ij->i", normal, hull.equations[:, :3]) < 0
    tri[flip] = tri[flip][:, ::-1]
    return tri


def _triangles(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, ...]:
    return tuple(vertices[faces[:, k]] for k in range(3))


def _moments(
    vertices: np.ndarray, faces: np.ndarray, mode: str
) -> tuple[float, np.ndarray, np.ndarray]:
    """Measure (volume, or area for a shell), centre of mass and second moment sum(x x^T)
    about it, per unit density, in MuJoCo's two passes: the centre from pyramids on the faces'
    area-weighted centroid, then the moments from tetrahedra on that centre. ``legacy`` counts
    every pyramid and tetrahedron as positive, which is exact only for meshes star-shaped
    about those points (MuJoCo's default, kept for its models' sake)."""
    a, b, c = _triangles(vertices, faces)
    area = np.linalg.norm(np.cross(b - a, c - a), axis=1) / 2
    centre = (a + b + c) / 3
    if area.sum() < _MIN_VOLUME:
        raise MeshError("the mesh's surface area is too small")
    facecen = area @ centre / area.sum()
    com = facecen
    if mode != "shell":
        cone = np.einsum("ij,ij->i", a - facecen, np.cross(b - facecen, c - facecen)) / 6
        cone = np.abs(cone) if mode == "legacy" else cone
        if cone.sum() < _MIN_VOLUME:
            raise MeshError(
                "the mesh's volume is negative (faces wound clockwise seen from outside)"
                if cone.sum() < 0
                else "the mesh's volume is too small (inertia='shell' spreads mass over its "
                "surface)"
            )
        com = cone @ (0.75 * centre + 0.25 * facecen) / cone.sum()
    a, b, c = a - com, b - com, c - com
    if mode == "shell":
        weight, scale = area, 12
    else:
        weight, scale = np.einsum("ij,ij->i", a, np.cross(b, c)) / 6, 20
        weight = np.abs(weight) if mode == "legacy" else weight
    total = a + b + c
    outer = sum(np.einsum("ni,nj->nij", p, p) for p in (a, b, c, total))
    return float(weight.sum()), com, np.einsum("n,nij->ij", weight / scale, outer)


def _polygons(hull: ConvexHull) -> tuple[list[list[int]], np.ndarray]:
    """The hull's faces with coplanar triangles merged (MuJoCo's mesh polygons): each a cycle
    of point indices, counter-clockwise seen from outside, with its outward unit normal."""
    eq = hull.equations
    scale = np.abs(hull.points).max()
    groups: list[list[int]] = []
    for i in range(len(eq)):
        for g in groups:
            if eq[g[0], :3] @ eq[i, :3] > 1 - _COPLANAR and abs(eq[g[0], 3] - eq[i, 3]) < (
                _COPLANAR * scale
            ):
                g.append(i)
                break
        else:
            groups.append([i])
    polygons, normals = [], []
    for g in groups:
        normal = eq[g[0], :3]
        ids = np.unique(hull.simplices[g])
        pts = hull.points[ids]
        u = pts[0] - pts.mean(axis=0)
        u /= np.linalg.norm(u)
        v = np.cross(normal, u)
        rel = pts - pts.mean(axis=0)
        polygons.append([int(i) for i in ids[np.argsort(np.arctan2(rel @ v, rel @ u))]])
        normals.append(normal)
    return polygons, np.asarray(normals)


def _quad_area(p: np.ndarray) -> float:
    """Area of the quadrilateral p[0..3] (half the cross product of its diagonals)."""
    return 0.5 * float(np.linalg.norm(np.cross(p[0] - p[2], p[1] - p[3])))


def _hull4(points: np.ndarray, cycle: list[int], a: int) -> list[int]:
    """At most four vertices of a convex polygon, its vertex ``a`` first: the next three, each
    moved on along the cycle while the quadrilateral's area grows (MuJoCo's hull4f)."""
    n = len(cycle)
    if n <= 4:
        return [cycle[(a + k) % n] for k in range(n)]
    pick = [a, (a + 1) % n, (a + 2) % n, (a + 3) % n]

    def area(q: list[int]) -> float:
        return _quad_area(points[[cycle[i] for i in q]])

    def advanced(q: list[int], slot: int) -> list[int]:
        return [(x + 1) % n if k == slot else x for k, x in enumerate(q)]

    best = area(pick)
    while area(advanced(pick, 3)) > best:  # move d on; then c, then b, while each gains
        pick = advanced(pick, 3)
        best = area(pick)
        for slot in (2, 1):
            while area(advanced(pick, slot)) > best:
                pick = advanced(pick, slot)
                best = area(pick)
    return [cycle[i] for i in pick]


def _check_orientation(faces: np.ndarray) -> None:
    """Exact integration needs every edge run once each way (MuJoCo refuses otherwise)."""
    edges = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    unique, counts = np.unique(edges, axis=0, return_counts=True)
    if (counts > 1).any():
        v1, v2 = unique[np.argmax(counts > 1)] + 1
        raise MeshError(
            f"faces have inconsistent orientation (see the faces with vertices {v1} and {v2}); "
            "inertia='exact' needs them all counter-clockwise seen from outside"
        )


def _hull_data(hull: ConvexHull, rot: np.ndarray, com: np.ndarray) -> Hull:
    """The collision data of a hull, in the principal frame (``rot``, ``com``)."""
    polygons, normals = _polygons(hull)
    ids = hull.vertices
    local = {int(g): i for i, g in enumerate(ids)}
    vertices = (hull.points[ids] - com) @ rot
    cycles = [[local[v] for v in cycle] for cycle in polygons]
    k = max(len(c) for c in cycles)
    poly_vert = np.full((len(cycles), k), -1)
    poly_pick = np.full((len(cycles), k, 3), -1)
    around: list[list[int]] = [[] for _ in ids]
    for p, cycle in enumerate(cycles):
        poly_vert[p, : len(cycle)] = cycle
        for a, v in enumerate(cycle):
            around[v].append(p)
            rest = _hull4(vertices, cycle, a)[1:]
            poly_pick[p, a, : len(rest)] = rest
    vert_polys = np.full((len(ids), max(len(a) for a in around)), -1)
    for v, polys in enumerate(around):
        vert_polys[v, : len(polys)] = polys
    triangles = np.vectorize(local.get)(hull.simplices)
    edges, edge_polys = _edge_table(cycles)
    return Hull(
        vertices, vert_polys, normals @ rot, poly_vert, poly_pick, triangles, edges, edge_polys
    )


def _edge_table(cycles: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Each edge of the face cycles once, with the two faces meeting there. An edge that only
    one face has (a vertex lying on a neighbour's side) is left out."""
    faces: dict[tuple[int, int], list[int]] = {}
    for p, cycle in enumerate(cycles):
        for u, v in zip(cycle, cycle[1:] + cycle[:1], strict=True):
            faces.setdefault((min(u, v), max(u, v)), []).append(p)
    shared = [(e, f) for e, f in faces.items() if len(f) == 2]
    return (
        np.array([e for e, _ in shared], np.int64).reshape(-1, 2),
        np.array([f for _, f in shared], np.int64).reshape(-1, 2),
    )


def box_hull() -> Hull:
    """The hull of the box with corners (+-1, +-1, +-1): scaled by a box's half-sizes it is
    that box, so boxes and meshes collide by one code."""
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    return _hull_data(ConvexHull(corners), np.eye(3), np.zeros(3))


def hull_tables(hulls: list[Hull]) -> Hull:
    """Hulls stacked along a new first axis, each table padded to the largest: extra vertices
    repeat vertex 0 (never deeper than it), extra triangles are vertex 0 three times (a point
    of the hull), other extra indices are -1."""
    if not hulls:  # no colliding mesh: empty tables of the right ranks
        return Hull(
            np.zeros((0, 1, 3)),
            np.zeros((0, 1, 1), np.int32),
            np.zeros((0, 1, 3)),
            np.zeros((0, 1, 1), np.int32),
            np.zeros((0, 1, 1, 3), np.int32),
            np.zeros((0, 1, 3), np.int32),
            np.zeros((0, 1, 2), np.int32),
            np.zeros((0, 1, 2), np.int32),
        )
    shapes = [np.max([getattr(h, f).shape for h in hulls], axis=0) for f in Hull._fields]
    out = []
    for field, shape in zip(Hull._fields, shapes, strict=True):
        real = field in ("vertices", "poly_normal")
        fill = 0 if real or field == "triangles" else -1
        table = np.full((len(hulls), *shape), fill, np.float64 if real else np.int32)
        for i, h in enumerate(hulls):
            x = getattr(h, field)
            if field == "vertices":
                table[i] = x[0]
            table[(i, *(slice(0, n) for n in x.shape))] = x
        out.append(table)
    return Hull(*out)


def process(vertices: np.ndarray, faces: np.ndarray | None, inertia: str = "legacy") -> Mesh:
    """A mesh's mass properties, principal frame and convex hull, as MuJoCo compiles them.

    ``faces`` None (vertices only) takes the convex hull's triangles as the surface.
    """
    if inertia not in INERTIA_MODES:
        raise MeshError(f"inertia={inertia!r} must be one of {', '.join(INERTIA_MODES)}")
    vertices = np.asarray(vertices, np.float64)
    if vertices.ndim != 2 or vertices.shape[1] != 3 or len(vertices) < 4:
        raise MeshError(f"a mesh needs at least 4 vertices (x, y, z), got {len(vertices)}")
    hull = _hull(vertices)
    hull_faces = None if hull is None else _outward(hull)
    if hull is None and (faces is None or not len(faces) or inertia == "convex"):
        raise MeshError(f"the mesh's {len(vertices)} vertices span no volume (flat?)")
    if faces is None or not len(faces):
        faces = hull_faces
    faces = np.asarray(faces, np.int64)
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise MeshError("a face refers to a vertex that does not exist")
    if inertia == "exact":
        _check_orientation(faces)
    surface = hull_faces if inertia == "convex" else faces
    measure, com, second = _moments(vertices, surface, inertia)
    moments = np.trace(second) * np.eye(3) - second
    values, rot = np.linalg.eigh(moments)
    order = np.argsort(-values, kind="stable")
    values, rot = values[order], rot[:, order]
    if np.allclose(moments, np.diag(np.diag(moments)), rtol=0, atol=1e-12 * values.max()):
        rot = np.eye(3)[:, np.argsort(-np.diag(moments), kind="stable")]
    if np.linalg.det(rot) < 0:
        rot[:, 2] = -rot[:, 2]
    local = (vertices - com) @ rot
    data = None if hull is None else _hull_data(hull, rot, com)
    return Mesh(local, faces, com, rot, measure, values, data)
