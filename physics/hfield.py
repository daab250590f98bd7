"""Height fields: their files, and contacts of a terrain grid with spheres, capsules,
ellipsoids, cylinders, boxes and meshes.

MuJoCo's height field (``<asset><hfield>``) is a grid of ``nrow x ncol`` heights over the
rectangle ``[-size[0], size[0]] x [-size[1], size[1]]`` of its geom's frame, from a base at
``-size[3]`` up to at most ``size[2]``. MuJoCo collides it cell by cell: each cell is two
triangular prisms (the triangle of three grid heights, extruded down to the base) and every
prism the other geom penetrates gives ONE contact, found by its convex collider (GJK/EPA: the
minimum translation distance, the normal along it, the point midway between the surfaces). A
sphere resting on a flat grid therefore has one contact inside a triangle, two on a diagonal
and six on a grid vertex, as in MuJoCo.

Here the same, branch-free, over a fixed window of cells:

- **Window.** A pair's window is the most cells the other geom's bounding box can overlap
  (``kr x kc``, from its bounding sphere and the cell size, fixed when the model is built); at
  run time it starts at the cell under the geom's lower corner, and cells past the box or the
  grid are masked, as are prisms whose three top corners lie below the geom's lowest point
  (MuJoCo's height test). A pair has ``2 kr kc`` contact slots.
- **Prisms.** Each prism is a 6-vertex convex polytope (:class:`physics.polytope.Polytope`)
  built from the window's heights.
- **Per prism:** a sphere takes the exact signed distance of its centre to the prism; a capsule
  that of its segment (apart: an end against the prism or the segment against an edge;
  overlapping: the least separation over their Minkowski faces), less the radius; an
  ellipsoid its minimum translation distance (:mod:`physics.smooth`); a cylinder, a box or a
  mesh the separating-axis distance and normal against the prism, with its contact at the
  mean of the touching features' clip points (MuJoCo's EPA reports one point of that
  overlap).

A plane or height field against a height field has no collision function, as in MuJoCo.
"""

from __future__ import annotations

import io
import math

import jax
import jax.numpy as jnp
import numpy as np

from physics import smooth
from physics.collision import (
    FAR,
    Contact,
    _capsule_ends,
    _hull_sdf,
    _normalize,
    _safe_norm,
    _segment_segment,
    _stack,
)
from physics.mesh import Hull
from physics.polytope import (
    Polytope,
    _contacts,
    cylinder_contacts,
    cylinder_separating_axis,
    separating_axis,
)
from physics.system import (
    GEOM_BOX,
    GEOM_CAPSULE,
    GEOM_CYLINDER,
    GEOM_ELLIPSOID,
    GEOM_MESH,
    GEOM_SPHERE,
)

COLLIDES_WITH = (GEOM_SPHERE, GEOM_CAPSULE, GEOM_ELLIPSOID, GEOM_CYLINDER, GEOM_BOX, GEOM_MESH)
"""Geom types that collide with a height field here."""

# A prism: vertices 0-2 the base triangle (counter-clockwise seen from above), 3-5 the top one
# above them. Faces: base, top, then the side over edge 0-1, 1-2 and 2-0, each face's vertices
# counter-clockwise seen from outside (-1 pads the triangles to the quads' length).
_FACES = np.array(
    [[2, 1, 0, -1], [3, 4, 5, -1], [0, 1, 4, 3], [1, 2, 5, 4], [2, 0, 3, 5]], np.int32
)
_VERT_FACES = np.array([[0, 2, 4], [0, 2, 3], [0, 3, 4], [1, 2, 4], [1, 2, 3], [1, 3, 4]], np.int32)
_EDGES = np.array(
    [[0, 1], [1, 2], [2, 0], [3, 4], [4, 5], [5, 3], [0, 3], [1, 4], [2, 5]], np.int32
)
_EDGE_FACES = np.array(
    [[0, 2], [0, 3], [0, 4], [1, 2], [1, 3], [1, 4], [2, 4], [2, 3], [3, 4]], np.int32
)
_TRIANGLES = np.array(
    [[2, 1, 0], [3, 4, 5], [0, 1, 4], [0, 4, 3], [1, 2, 5], [1, 5, 4], [2, 0, 3], [2, 3, 5]],
    np.int32,
)


def window(size: tuple[float, ...], grid: tuple[int, int], rbound: float) -> tuple[int, int]:
    """(rows, cols) of cells that a geom of bounding radius ``rbound`` can overlap at once."""
    nrow, ncol = grid
    dx, dy = 2 * size[0] / (ncol - 1), 2 * size[1] / (nrow - 1)
    kc = min(ncol - 1, math.floor(2 * rbound / dx) + 2)
    kr = min(nrow - 1, math.floor(2 * rbound / dy) + 2)
    return kr, kc


def num_contacts(win: tuple[int, int]) -> int:
    """Contact slots of a pair with window ``win``: two prisms per cell."""
    return 2 * win[0] * win[1]


def _prism(base: jax.Array, top: jax.Array) -> tuple[Polytope, Hull]:
    """The prism over a triangle: ``base``, ``top`` [3, 3] corners (counter-clockwise seen
    from above); as a Polytope (box and mesh) and a Hull (sphere and capsule distances)."""
    verts = jnp.concatenate([base, top])
    up = jnp.cross(top[1] - top[0], top[2] - top[0])
    edge = jnp.roll(base, -1, axis=0) - base  # the base's edges 0-1, 1-2, 2-0
    sides = jnp.stack([edge[:, 1], -edge[:, 0], jnp.zeros(3)], axis=1)  # outward: right of them
    normals = jnp.concatenate(
        [
            jnp.array([[0.0, 0.0, -1.0]]),
            _normalize(up, jnp.array([0.0, 0.0, 1.0]))[None],
            _normalize(sides, jnp.zeros(3)),
        ]
    )
    centre = jnp.mean(verts, axis=0)
    faces, vert_faces, edges, edge_faces = map(
        jnp.asarray, (_FACES, _VERT_FACES, _EDGES, _EDGE_FACES)
    )
    poly = Polytope(verts, normals, faces, vert_faces, edges, edge_faces, centre)
    pick = jnp.full((5, 4, 3), -1, jnp.int32)  # (only plane-mesh contacts read it)
    hull = Hull(verts, vert_faces, normals, faces, pick, jnp.asarray(_TRIANGLES), edges, edge_faces)
    return poly, hull


def _extent(
    type2: int, pos: jax.Array, mat: jax.Array, size: jax.Array, hull: Hull | None
) -> tuple[jax.Array, jax.Array]:
    """(low, high) corners of the geom's bounding box in the height field's frame."""
    if type2 == GEOM_SPHERE:
        half = jnp.full(3, size[0])
    elif type2 == GEOM_CAPSULE:
        half = jnp.abs(mat[:, 2]) * size[1] + size[0]
    elif type2 == GEOM_BOX:
        half = jnp.abs(mat) @ size
    elif type2 == GEOM_ELLIPSOID:
        half = jnp.sqrt((mat**2) @ size**2)  # the exact box of the ellipsoid
    elif type2 == GEOM_CYLINDER:
        axis = mat[:, 2]  # the exact box: the caps' discs about the axis segment's ends
        half = jnp.abs(axis) * size[1] + size[0] * jnp.sqrt(jnp.maximum(1.0 - axis**2, 0.0))
    else:
        world = hull.vertices @ mat.T
        return pos + world.min(axis=0), pos + world.max(axis=0)
    return pos - half, pos + half


def _segment_prism(
    a: jax.Array, b: jax.Array, poly: Polytope, hull: Hull
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(signed distance, unit normal out of the prism, the segment's point) of segment ab and
    a prism, exact. Apart, the closest points are an end's to the prism or the segment's to one
    of its edges (along a face the distance is linear, so it is least at an end or an edge);
    overlapping, the depth is the least separation over the faces of their Minkowski
    difference: the prism's faces and the segment's direction crossed with each prism edge."""
    ends = jnp.stack([a, b])
    end_sdf, end_n = jax.vmap(_hull_sdf, (0, None))(ends, hull)  # [2], [2, 3]
    e0, e1 = poly.verts[poly.edges[:, 0]], poly.verts[poly.edges[:, 1]]
    s, t = jax.vmap(_segment_segment, (None, None, 0, 0))(a, b, e0, e1)
    on_seg = a + s[:, None] * (b - a)
    gap = on_seg - (e0 + t[:, None] * (e1 - e0))
    edge_dist = _safe_norm(gap)
    dist = jnp.concatenate([end_sdf, edge_dist])
    normal = jnp.concatenate([end_n, _normalize(gap, jnp.array([0.0, 0.0, 1.0]))])
    point = jnp.concatenate([ends, on_seg])
    k = jnp.argmin(dist)
    # overlapping: separating axes (faces of the Minkowski difference), each oriented out
    d = b - a
    crossed = jnp.cross(d, e1 - e0)
    axes = jnp.concatenate([poly.normals, _normalize(crossed, jnp.zeros(3))])
    mid = 0.5 * (a + b)
    axes = jnp.where((axes @ (mid - poly.centre) >= 0)[:, None], axes, -axes)
    valid = jnp.concatenate([jnp.ones(5, bool), _safe_norm(crossed) > 1e-9 * _safe_norm(d)])
    sep = jnp.minimum(axes @ a, axes @ b) - jnp.max(poly.verts @ axes.T, axis=0)
    j = jnp.argmax(jnp.where(valid, sep, -jnp.inf))
    n_in = axes[j]
    deepest = jnp.where(n_in @ a <= n_in @ b, a, b)
    deepest = jnp.where(jnp.abs(n_in @ d) < 1e-6 * _safe_norm(d), mid, deepest)
    inside = sep[j] < 0.0
    return (
        jnp.where(inside, sep[j], dist[k]),
        jnp.where(inside, n_in, normal[k]),
        jnp.where(inside, deepest, point[k]),
    )


def _prism_contact(
    type2: int,
    poly: Polytope,
    hull: Hull,
    pos: jax.Array,
    mat: jax.Array,
    size: jax.Array,
    hull2: Hull | None,
    margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(dist, point, normal out of the prism) of one prism and the geom (height-field frame)."""
    if type2 == GEOM_SPHERE:
        sdf, n = _hull_sdf(pos, hull)
        dist = sdf - size[0]
        return dist, pos - n * (size[0] + 0.5 * dist), n
    if type2 == GEOM_CAPSULE:
        sdf, n, centre = _segment_prism(*_capsule_ends(pos, mat, size), poly, hull)
        dist = sdf - size[0]
        return dist, centre - n * (size[0] + 0.5 * dist), n
    if type2 == GEOM_ELLIPSOID:
        prism = smooth.Shape.polytope(poly.verts, poly.normals, poly.centre).moved(pos)
        egg = smooth.Shape.of(GEOM_ELLIPSOID, jnp.zeros(3), mat, size)
        dist, n = smooth.signed_distance(prism, egg)
        return dist, pos + smooth.contact_point(prism, egg, dist, n), n
    if type2 == GEOM_CYLINDER:
        sd, n = cylinder_separating_axis(pos, mat, size, poly)  # cylinder -> prism
        clip = cylinder_contacts(pos, mat, size, poly, sd, n, jnp.maximum(margin, sd) + 1e-6)
        return sd, _mean_point(clip), -n
    other = Polytope.box(pos, mat, size) if type2 == GEOM_BOX else Polytope.of(pos, mat, hull2)
    sd, n, k = separating_axis(poly, other)
    faces = poly.normals.shape[0] + other.normals.shape[0]
    i, j = jnp.divmod(k - faces, other.edges.shape[0])
    edge_pair = k >= faces
    edges = jnp.where(edge_pair, i, -1), jnp.where(edge_pair, j, -1)
    clip = _contacts(poly, other, sd, n, edges, jnp.maximum(margin, sd) + 1e-6, 4)
    return sd, _mean_point(clip), n


def _mean_point(clip: Contact) -> jax.Array:
    """The mean of a clip's used points: the one point a prism's contact reports."""
    used = clip.dist < 0.5 * FAR
    weight = used / jnp.maximum(jnp.sum(used), 1)
    return weight @ clip.pos


def collide_hfield(
    type2: int,
    heights: jax.Array,
    grid: tuple[int, int],
    size: tuple[float, float, float, float],
    win: tuple[int, int],
    pos1: jax.Array,
    mat1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    size2: jax.Array,
    margin: jax.Array | float = 0.0,
    hull2: Hull | None = None,
) -> Contact:
    """A height field (geom1: ``heights`` [rows >= nrow, cols >= ncol] in its frame at pos1,
    mat1) against a geom of type ``type2``: :func:`num_contacts` slots, one per prism of the
    window (the module's docstring), FAR where a prism does not touch."""
    nrow, ncol = grid
    kr, kc = win
    sx, sy, _, base = size
    dx, dy = 2 * sx / (ncol - 1), 2 * sy / (nrow - 1)
    margin = jnp.asarray(margin, pos1.dtype)
    pos, mat = mat1.T @ (pos2 - pos1), mat1.T @ mat2  # the geom in the height field's frame
    low, high = _extent(type2, pos, mat, size2, hull2)
    # MuJoCo's sub-grid: columns cmin..cmax and rows rmin..rmax of grid points around the box
    cmin = jnp.clip(jnp.floor((low[0] + sx) / dx), 0, ncol - 1).astype(jnp.int32)
    cmax = jnp.clip(jnp.ceil((high[0] + sx) / dx), 0, ncol - 1).astype(jnp.int32)
    rmin = jnp.clip(jnp.floor((low[1] + sy) / dy), 0, nrow - 1).astype(jnp.int32)
    rmax = jnp.clip(jnp.ceil((high[1] + sy) / dy), 0, nrow - 1).astype(jnp.int32)
    rows = rmin + jnp.arange(kr + 1)
    cols = cmin + jnp.arange(kc + 1)
    z = heights[jnp.minimum(rows, nrow - 1)][:, jnp.minimum(cols, ncol - 1)]  # [kr+1, kc+1]
    x, y = cols * dx - sx, rows * dy - sy
    # cell (i, j) spans grid rows i, i+1 and columns j, j+1 of the window; its two triangles
    # are MuJoCo's: (r+1, c-1), (r, c-1), (r+1, c) and (r, c-1), (r+1, c), (r, c), here
    # ordered counter-clockwise seen from above
    i, j = jnp.meshgrid(jnp.arange(kr), jnp.arange(kc), indexing="ij")
    i, j = i.ravel(), j.ravel()
    corner = lambda di, dj: jnp.stack(  # noqa: E731
        [x[j + dj], y[i + di], z[i + di, j + dj]], axis=-1
    )
    a, b, c, d = corner(1, 0), corner(0, 0), corner(1, 1), corner(0, 1)
    tops = jnp.concatenate([jnp.stack([a, b, c], 1), jnp.stack([b, d, c], 1)])  # [2 kr kc, 3, 3]
    in_box = (rmin + i < rmax) & (cmin + 1 + j <= cmax)
    tall = jnp.max(tops[..., 2], axis=1) + margin >= low[2]  # MuJoCo's prism height test
    live = jnp.concatenate([in_box, in_box]) & tall
    bases = tops.at[..., 2].set(-base)

    def one(base_tri: jax.Array, top_tri: jax.Array) -> tuple:
        poly, hull = _prism(base_tri, top_tri)
        return _prism_contact(type2, poly, hull, pos, mat, size2, hull2, margin)

    dist, point, normal = jax.vmap(one)(bases, tops)
    dist = jnp.where(live, dist, FAR)
    return _stack(dist, pos1 + point @ mat1.T, normal @ mat1.T)


def rbound(type_: int, size: np.ndarray, vertices: np.ndarray | None = None) -> float:
    """Radius of a geom's bounding sphere about its centre (sizes height-field windows);
    ``vertices``: a mesh geom's, in its frame."""
    if type_ == GEOM_SPHERE:
        return float(size[0])
    if type_ == GEOM_CAPSULE:
        return float(size[0] + size[1])
    if type_ == GEOM_ELLIPSOID:
        return float(np.max(size))
    if type_ == GEOM_MESH:
        return float(np.linalg.norm(vertices, axis=1).max())
    return float(np.linalg.norm(size))


class HFieldError(ValueError):
    """A height field file that cannot be read; the loader adds the element and file."""


def read(path: str, content_type: str | None = None) -> np.ndarray:
    """A height field file's elevations [nrow, ncol], row 0 at -y: a PNG (``.png`` or
    content_type image/png; its first channel, top row at +y) or MuJoCo's binary format
    (int32 nrow, int32 ncol, then nrow * ncol float32, row 0 at -y)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise HFieldError(f"cannot read {path}: {e.strerror}") from None
    if content_type == "image/png" or (content_type is None and path.lower().endswith(".png")):
        try:
            from PIL import Image
        except ImportError:
            raise HFieldError(f"reading the PNG {path} needs Pillow (pip install pillow)") from None
        try:
            image = np.asarray(Image.open(io.BytesIO(raw)))
        except Exception as e:  # noqa: BLE001 - any decoding failure is the file's
            raise HFieldError(f"cannot decode the PNG {path}: {e}") from None
        channel = image if image.ndim == 2 else image[..., 0]
        return channel[::-1].astype(np.float64)
    if len(raw) < 8:
        raise HFieldError(f"{path}: too short for an hfield file")
    nrow, ncol = (int(v) for v in np.frombuffer(raw[:8], "<i4"))
    if nrow < 1 or ncol < 1 or len(raw) != 8 + 4 * nrow * ncol:
        raise HFieldError(f"{path}: {len(raw)} bytes do not hold a {nrow} x {ncol} hfield")
    return np.frombuffer(raw[8:], "<f4").reshape(nrow, ncol).astype(np.float64)
