"""Capsule against box as MuJoCo's ``mjraw_CapsuleBox`` finds it, without branches.

MuJoCo works on the capsule's segment in the box's frame, in two stages:

1. The closest point of the segment to the box, among a fixed list of candidates taken in
   order: each end of the segment against the face it lies over (an end outside the box
   along two axes is no candidate), then the segment against each of the box's 12 edges
   (closest points of two segments, clamped to both). A candidate replaces the best so far
   only when strictly closer; an edge only when closer by more than mjMINVAL.
2. A second point, from how the closest feature (a corner, the middle of an edge, or a face
   under an end) and the capsule's axis are oriented: the farthest point along the segment
   that still lies over the same face or edge, or none where the capsule points at or away
   from a corner, or crosses an edge in a T.

Each point is then collided as a sphere of the capsule's radius against the box (sphere-box).
Here every candidate and every case is computed and the result selected with ``where``, in
MuJoCo's order and with its tie rules, so a tilted capsule gets MuJoCo's second contact too.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from physics.collision import FAR, Contact, _point_box, _stack

_MINVAL = 1e-15  # mjMINVAL

# The 12 edges in MuJoCo's order: axis j outer, corner i (bit j clear) inner. An edge runs
# along axis j through the corner's other two coordinates.
_EDGE_AXIS, _EDGE_CORNER = np.array(
    [(j, i) for j in range(3) for i in range(8) if not i & (1 << j)], np.int32
).T
_EDGE_SIGNS = np.array(
    [
        [(1.0 if i & (1 << k) else -1.0) * (k != j) for k in range(3)]
        for j, i in zip(_EDGE_AXIS, _EDGE_CORNER, strict=True)
    ]
)


def _ratio(num: jax.Array, den: jax.Array) -> jax.Array:
    """num / den, +inf where den is 0, which MuJoCo's ``if (e < x) x = e`` never picks, and
    jnp.minimum neither."""
    ok = den != 0.0
    return jnp.where(ok, num / jnp.where(ok, den, 1.0), jnp.inf)


def _is_one_of(x: jax.Array, values: tuple[int, ...]) -> jax.Array:
    return jnp.any(x == jnp.asarray(values, x.dtype))


class _Closest(NamedTuple):
    """The closest candidate so far (MuJoCo's bestdist, bestsegmentpos, bestboxpos, cltype,
    clface, clcorner, cledge)."""

    dist: jax.Array  # squared distance
    segment: jax.Array  # position along the segment, in [-1, 1]
    boxpos: jax.Array  # position along the edge, in [-1, 1] (edges only)
    type: jax.Array  # -3 / -1: the end at -1 / +1 over a face; 0..8: an edge (s1 * 3 + s2)
    face: jax.Array  # the axis of the face under the end, -1 when the end is inside the box
    corner: jax.Array  # the corner nearest the closest point (bit k: +s[k])
    edge: jax.Array  # the edge's axis

    def offer(self, take: jax.Array, **fields: jax.Array) -> _Closest:
        """The candidate `fields` where `take`, else this one."""
        return self._replace(**{k: jnp.where(take, v, getattr(self, k)) for k, v in fields.items()})


def _closest(
    pos: jax.Array, h: jax.Array, half_len: jax.Array, s: jax.Array, bestdist: jax.Array
) -> _Closest:
    """Stage 1: the closest candidate (``pos`` the capsule's centre, ``h`` its half axis and
    ``s`` the box's half sizes, all in the box's frame)."""
    zero, izero = jnp.zeros((), s.dtype), jnp.zeros((), jnp.int32)
    best = _Closest(bestdist, zero, zero, izero - 4, izero - 1, izero, izero)

    # an end of the segment over (or inside) the box: squared distance to the clamped end
    for sign in (-1, 1):
        tip = pos + sign * h
        out = (tip < -s) | (tip > s)
        face = jnp.where(jnp.any(out), 2 - jnp.argmax(out[::-1]), -1).astype(jnp.int32)
        d = jnp.sum((jnp.clip(tip, -s, s) - tip) ** 2)
        take = (jnp.sum(out) <= 1) & (d < best.dist)
        best = best.offer(
            take, dist=d, segment=jnp.asarray(sign, d.dtype), type=jnp.int32(sign - 2), face=face
        )

    # the segment against each edge: x1 along the edge, x2 along the segment, both in [-1, 1]
    j = _EDGE_AXIS
    start = jnp.asarray(_EDGE_SIGNS, s.dtype) * s
    dif = start - pos
    sj, hj = s[j], h[j]
    ma, mb, mc = sj * sj, -sj * hj, half_len * half_len
    u, v = -sj * dif[np.arange(12), j], dif @ h
    det = ma * mc - mb * mb
    usable = jnp.abs(det) >= _MINVAL
    idet = 1.0 / jnp.where(usable, det, 1.0)
    ima, imc = 1.0 / jnp.where(ma > 0, ma, 1.0), 1.0 / jnp.where(mc > 0, mc, 1.0)
    x1, x2 = (mc * u - mb * v) * idet, (ma * v - mb * u) * idet
    hi1, lo1 = x1 > 1, x1 < -1
    x2 = jnp.where(hi1, (v - mb) * imc, jnp.where(lo1, (v + mb) * imc, x2))
    s1 = jnp.where(hi1, 2, jnp.where(lo1, 0, 1))
    x1 = jnp.clip(x1, -1.0, 1.0)
    hi2, lo2 = x2 > 1, x2 < -1
    x1_again = jnp.where(hi2, (u - mb) * ima, (u + mb) * ima)
    s1 = jnp.where(hi2 | lo2, jnp.where(x1_again > 1, 2, jnp.where(x1_again < -1, 0, s1)), s1)
    x1 = jnp.where(hi2 | lo2, jnp.clip(x1_again, -1.0, 1.0), x1)
    s2 = jnp.where(hi2, 2, jnp.where(lo2, 0, 1))
    x2 = jnp.clip(x2, -1.0, 1.0)
    gap = dif - x2[:, None] * h + jax.nn.one_hot(j, 3, dtype=s.dtype) * (sj * x1)[:, None]
    d = jnp.sum(gap * gap, axis=1)
    cltype = (s1 * 3 + s2).astype(jnp.int32)
    corner = (_EDGE_CORNER + (1 << j) * (cltype // 6)).astype(jnp.int32)
    for e in range(12):
        take = usable[e] & (d[e] < best.dist - _MINVAL)
        best = best.offer(
            take,
            dist=d[e],
            segment=x2[e],
            boxpos=x1[e],
            type=cltype[e],
            corner=corner[e],
            edge=jnp.int32(j[e]),
        )
    return best


def _second_near_corner(
    best: _Closest, axis: jax.Array, h: jax.Array, s: jax.Array, axisdir: jax.Array
) -> jax.Array:
    """A corner of the box is closest: along its edge, or across its face, unless the capsule
    points at or away from the corner."""
    c1 = axisdir ^ best.corner
    forward = _is_one_of(c1, (1, 2, 4))
    mul = jnp.where(forward, 1.0, -1.0)
    de = jnp.where(forward, 1 - best.segment, 1 + best.segment)
    dp = jnp.where(forward, 1 + best.segment, 1 - best.segment)
    c1 = jnp.where(forward, c1, 7 - c1)
    ax = jnp.where(c1 == 1, 0, jnp.where(c1 == 2, 1, 2))
    ax1, ax2 = (ax + 1) % 3, (ax + 2) % 3
    habs = jnp.abs(h)
    along_edge = jnp.minimum(de, _ratio(2 * s[ax], habs[ax])) * mul
    across_face = (
        jnp.minimum(jnp.minimum(dp, _ratio(2 * s[ax1], habs[ax1])), _ratio(2 * s[ax2], habs[ax2]))
        * -mul
    )
    second = jnp.where(axis[ax] * axis[ax] > 0.5, along_edge, across_face)
    return jnp.where(_is_one_of(axisdir ^ best.corner, (0, 7)), -4.0, second)


def _second_on_edge(
    best: _Closest, axis: jax.Array, h: jax.Array, s: jax.Array, axisdir: jax.Array
) -> jax.Array:
    """The middle of an edge is closest: a capsule crossing it (an X) keeps a second point
    over the face it leans on least; one in a T with it gets none."""
    c1 = (axisdir ^ best.corner) & (7 - (1 << best.edge))
    ax = best.edge
    ax1, ax2 = (ax + 1) % 3, (ax + 2) % 3
    ax1 = jnp.where(jnp.abs(axis[ax1]) > jnp.abs(axis[ax2]), ax2, ax1)
    ax2 = 3 - ax - ax1
    up = (c1 >> ax2) & 1
    mul = jnp.where(up == 1, 1.0, -1.0)
    second = jnp.where(up == 1, 1 - best.segment, 1 + best.segment)
    habs = jnp.abs(h)
    second = jnp.minimum(second, _ratio(2 * s[ax2], habs[ax2]))
    e2 = jnp.where(((axisdir >> ax) & 1) == up, 1 - best.boxpos, 1 + best.boxpos)
    second = jnp.minimum(second, _ratio(s[ax] * e2, habs[ax])) * mul
    return jnp.where(_is_one_of(c1, (1, 2, 4)), second, -4.0)


def _second_from_face(best: _Closest, pos: jax.Array, h: jax.Array, s: jax.Array) -> jax.Array:
    """An end over a face is closest: the farthest point towards the other end that is still
    over the box; none where the end is inside the box."""
    mul = jnp.where(best.type == -3, 1.0, -1.0)
    start = pos - h * mul
    others = jnp.arange(3) != best.face
    second = jnp.asarray(2.0, s.dtype)
    for bound in (s, -s):
        e = _ratio(bound - start, h) * mul
        second = jnp.minimum(second, jnp.min(jnp.where(others & (e > 0), e, 2.0)))
    return jnp.where(best.face == -1, -4.0, second * mul)


def collide_capsule_box(
    pos1: jax.Array,
    mat1: jax.Array,
    size1: jax.Array,
    pos2: jax.Array,
    mat2: jax.Array,
    size2: jax.Array,
    margin: jax.Array | float = 0.0,
) -> Contact:
    """Capsule (geom1) against box (geom2): 2 slots, MuJoCo's closest point of the segment
    and, where MuJoCo finds one, its second point, each as sphere-box; unused slots FAR."""
    r, half_len = size1[0], size1[1]
    pos = mat2.T @ (pos1 - pos2)
    axis = mat2.T @ mat1[:, 2]
    h = axis * half_len
    axisdir = jnp.sum(jnp.where(h > 0, jnp.array([1, 2, 4]), 0)).astype(jnp.int32)
    bestdist = margin + 2 * (r + half_len + jnp.sum(size2))  # MuJoCo's (a length, not squared)
    best = _closest(pos, h, half_len, size2, jnp.asarray(bestdist, pos.dtype))

    on_edge = (best.type >= 0) & (best.type // 3 == 1)
    second = jnp.where(
        best.type < 0,
        _second_from_face(best, pos, h, size2),
        jnp.where(
            on_edge,
            _second_on_edge(best, axis, h, size2, axisdir),
            _second_near_corner(best, axis, h, size2, axisdir),
        ),
    )
    found = best.type != -4
    offsets = jnp.stack([best.segment, best.segment + second])
    centres = pos2 + (pos[None] + offsets[:, None] * h) @ mat2.T
    dist, cpos, normal = jax.vmap(_point_box, (0, None, None, None, None))(
        centres, r, pos2, mat2, size2
    )
    keep = found & jnp.stack([True, second > -3])
    return _stack(jnp.where(keep, dist, FAR), cpos, normal)
