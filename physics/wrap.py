"""Tendons wrapping around spheres and cylinders (MuJoCo's mju_wrap), branch-free.

A spatial tendon's site-geom-site stretch either passes the geom in a straight line or wraps
it: from the first site along a tangent to the surface, over the surface (an arc of a great
circle on a sphere, of a helix on a cylinder), and off along a tangent to the second site.
The problem is solved in 2D, in the plane through a sphere's centre and both sites, or in a
cylinder's cross-section (the height is then spread along the path in proportion to its
length), as MuJoCo does:

- without a side site, the tendon wraps where the straight line would cut the circle, along
  the shorter of the two tangent paths;
- with a side site outside the geom, the tendon keeps off the ray from the centre away from
  the side site: it also wraps where the straight line would cross that ray, along the
  shorter tangent path that does not;
- with a side site inside the geom, the tendon may pass through the geom's inside and touch
  the surface at one point, the one that makes the path shortest (a fixed number of
  bisection steps here).

Every case is computed and the right one selected, so a batch of worlds follows one program.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from physics import math

MINVAL = 1e-15  # MuJoCo's mjMINVAL
_BISECTIONS = 48  # halvings of the arc searched for an inside wrap's touch point (to 1e-14)


class Wrap(NamedTuple):
    """The path of site-geom-site stretches [...] over their geoms."""

    wrapped: jax.Array  # [...] bool: the path touches the geom (else it is straight)
    arc: jax.Array  # [...] length of the path on the surface (0 where not wrapped)
    tangent: jax.Array  # [..., 2, 3] where the path meets and leaves the surface (world)


def _norm(v: jax.Array) -> jax.Array:
    """|v| over the last axis, with a finite gradient at 0."""
    sq = jnp.sum(v * v, axis=-1)
    return jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0)


def _normalize(v: jax.Array) -> jax.Array:
    """v / |v| over the last axis; MuJoCo's (1, 0, ...) for a vector shorter than MINVAL."""
    n = _norm(v)[..., None]
    unit = jnp.zeros_like(v).at[..., 0].set(1.0)
    return jnp.where(n < MINVAL, unit, v / jnp.where(n < MINVAL, 1.0, n))


def _cross2(a: jax.Array, b: jax.Array) -> jax.Array:
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _dot(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.sum(a * b, axis=-1)


def _sqrt(x: jax.Array) -> jax.Array:
    """sqrt(x) for x > 0, else 0, with a finite gradient everywhere."""
    return jnp.where(x > 0, jnp.sqrt(jnp.where(x > 0, x, 1.0)), 0.0)


def _safe(x: jax.Array, ok: jax.Array) -> jax.Array:
    """x where ok, else 1: a denominator that cannot make a NaN (or its gradient) where the
    result is masked away."""
    return jnp.where(ok, x, 1.0)


def _perp(v: jax.Array) -> jax.Array:
    return jnp.stack([v[..., 1], -v[..., 0]], axis=-1)


def _crosses_ray(p: jax.Array, q: jax.Array, direction: jax.Array) -> jax.Array:
    """Whether the 2D segment p-q [..., 2] meets the ray from the origin along `direction`."""
    c0, c1 = _cross2(direction, p), _cross2(direction, q)
    at = c0 / _safe(c0 - c1, c0 != c1)
    return (c0 * c1 <= 0) & (_dot(direction, p + at[..., None] * (q - p)) >= 0)


def _arc_passes(t0: jax.Array, angle: jax.Array, sign: float, direction: jax.Array) -> jax.Array:
    """Whether the arc from t0 [..., 2] over `angle`, clockwise for sign +1, passes the ray
    from the centre along `direction` [..., 2]."""
    ahead = jnp.arctan2(-sign * _cross2(t0, direction), _dot(t0, direction))
    return jnp.mod(ahead, 2 * jnp.pi) <= angle


def _arc_angle(t0: jax.Array, t1: jax.Array, sign: float) -> jax.Array:
    """Angle of the arc from t0 to t1 [..., 2] of the tangent path `sign` (+1: the first):
    the short way, or the long way round where that path turns the other way."""
    u0, u1 = _normalize(t0), _normalize(t1)
    angle = jnp.arctan2(jnp.abs(_cross2(u0, u1)), _dot(u0, u1))  # in [0, pi]
    turn = sign * _cross2(t1, t0)
    return jnp.where(turn < 0, 2 * jnp.pi - angle, angle)


def circle_wrap(
    end0: jax.Array, end1: jax.Array, side: jax.Array, has_side: jax.Array, radius: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """2D wrap of the path end0 -> end1 [..., 2] around a circle at the origin:
    (arc length, or -1 where the path stays straight; [..., 2] first and [..., 2] second
    tangent point). Where `has_side`, the path keeps off the ray from the centre away from
    `side` [..., 2] (the side site's direction): it wraps where the straight path would cross
    that ray, and of the two tangent paths takes the shorter one that does not. (Measured
    against MuJoCo 4.0.1; MuJoCo's older sources and MJX instead test on which side of the
    centre the straight path passes and take the tangent path whose ends point nearer the
    side site, which disagrees where a path wraps over half the circle.)"""
    sq0, sq1, sqrad = _dot(end0, end0), _dot(end1, end1), radius * radius
    dif = end1 - end0
    dd = _dot(dif, dif)
    along = jnp.clip(-_dot(dif, end0) / _safe(dd, dd >= MINVAL), 0.0, 1.0)
    nearest = end0 + along[..., None] * dif  # the straight path's point nearest the centre
    away = -side
    clear = (_dot(nearest, nearest) > sqrad) & ~(has_side & _crosses_ray(end0, end1, away))
    ok = (sq0 >= sqrad) & (sq1 >= sqrad) & (radius >= MINVAL) & (dd >= MINVAL) & ~clear
    root0, root1 = _sqrt(sq0 - sqrad)[..., None], _sqrt(sq1 - sqrad)[..., None]
    r, r2 = radius[..., None], sqrad[..., None]
    paths = []
    for sign in (1.0, -1.0):  # the two tangent paths: clockwise round the centre, and not
        t0 = (r2 * end0 + sign * r * root0 * _perp(end0)) / _safe(sq0, ok)[..., None]
        t1 = (r2 * end1 - sign * r * root1 * _perp(end1)) / _safe(sq1, ok)[..., None]
        angle = _arc_angle(t0, t1, sign)
        blocked = _crosses_ray(end0, t0, away) | _crosses_ray(t1, end1, away)
        blocked = has_side & (blocked | _arc_passes(t0, angle, sign, away))
        length = _norm(end0 - t0) + radius * angle + _norm(t1 - end1)
        # without a side site, the shorter by MuJoCo's measure (the chord between the tangent
        # points: the same order, and the same choice in a tie)
        chord = _dot(t1 - t0, t1 - t0)
        score = jnp.where(has_side, -length - jnp.where(blocked, 1e4, 0.0), -chord)
        paths.append((t0, t1, angle, score))
    (t0, t1, angle, score), (u0, u1, turn, score_second) = paths
    second = score_second >= score  # (a tie, sites in line with the centre: the second)
    t0 = jnp.where(second[..., None], u0, t0)
    t1 = jnp.where(second[..., None], u1, t1)
    angle = jnp.where(second, turn, angle)
    return jnp.where(ok, radius * angle, -1.0), t0, t1


def inside_wrap(end0: jax.Array, end1: jax.Array, radius: jax.Array) -> tuple[jax.Array, jax.Array]:
    """2D path end0 -> end1 [..., 2] through a circle at the origin, touching it once (a side
    site inside the geom): (0, or -1 where the path stays straight because it crosses the
    circle anyway; [..., 2] the touch point). The touch point is the point of the circle
    nearest in path length, |end0 - p| + |p - end1|, found by bisecting the arc between the
    ends' directions on the sign of the length's slope (measured: MuJoCo 4.0.1 returns this
    minimum; its older sources and MJX take a Newton iteration that falls back to the
    point between the ends where it fails)."""
    len0, len1 = _norm(end0), _norm(end1)
    dif = end1 - end0
    dd = _dot(dif, dif)
    along = -_dot(dif, end0) / _safe(dd, dd > MINVAL)
    crosses = (dd > MINVAL) & (along > 0) & (along < 1)
    crosses = crosses & (_norm(end0 + along[..., None] * dif) <= radius)
    ok = (len0 > radius) & (len1 > radius) & (radius >= MINVAL) & ~crosses
    start = jnp.arctan2(end0[..., 1], end0[..., 0])
    span = jnp.arctan2(_cross2(end0, end1), _dot(end0, end1))  # signed angle end0 -> end1

    def point(t: jax.Array) -> jax.Array:
        angle = start + t * span
        return radius[..., None] * jnp.stack([jnp.cos(angle), jnp.sin(angle)], axis=-1)

    def bisect(_: int, bracket: tuple) -> tuple:
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        p = point(mid)
        tangent = -span[..., None] * _perp(p)  # d p / d t
        slope = -_dot(_normalize(end0 - p), tangent) - _dot(_normalize(end1 - p), tangent)
        rising = slope > 0
        return jnp.where(rising, lo, mid), jnp.where(rising, mid, hi)

    zero = jnp.zeros_like(radius)
    lo, hi = jax.lax.fori_loop(0, _BISECTIONS, bisect, (zero, zero + 1))
    return jnp.where(ok, 0.0, -1.0), point(0.5 * (lo + hi))


def wrap(
    x0: jax.Array,
    x1: jax.Array,
    geom_pos: jax.Array,
    geom_mat: jax.Array,
    radius: jax.Array,
    cylinder: np.ndarray,
    side: jax.Array,
    has_side: np.ndarray,
) -> Wrap:
    """The path from x0 to x1 [n, 3] over geoms at `geom_pos` [n, 3], `geom_mat` [n, 3, 3]
    with `radius` [n]: spheres, or cylinders where the static `cylinder` [n] says so; `side`
    [n, 3] is the side site's position where the static `has_side` [n] says so."""
    any_side = bool(np.any(has_side))
    cylinder, has_side = jnp.asarray(cylinder), jnp.asarray(has_side)
    to_local = jnp.swapaxes(geom_mat, -1, -2)
    p0 = math.mat_vec(to_local, x0 - geom_pos)
    p1 = math.mat_vec(to_local, x1 - geom_pos)
    s = math.mat_vec(to_local, side - geom_pos)
    near_centre = (_norm(p0) < MINVAL) | (_norm(p1) < MINVAL)

    # the 2D frame: a sphere's plane through the centre and both ends, a cylinder's section
    axis0 = _normalize(p0)
    normal = jnp.cross(p0, p1)
    mag = jnp.abs(axis0)
    pick = jnp.where(
        (mag[..., 1] > mag[..., 0]) & (mag[..., 1] > mag[..., 2]),
        1,
        jnp.where((mag[..., 2] > mag[..., 0]) & (mag[..., 2] > mag[..., 1]), 2, 0),
    )
    other = 1.0 - jax.nn.one_hot(pick, 3, dtype=p0.dtype)  # (p0, p1 parallel: any normal)
    normal = jnp.where((_norm(normal) < MINVAL)[..., None], jnp.cross(axis0, other), normal)
    axis1 = _normalize(jnp.cross(_normalize(normal), axis0))
    eye = jnp.eye(3, dtype=p0.dtype)
    axis0 = jnp.where(cylinder[..., None], eye[0], axis0)
    axis1 = jnp.where(cylinder[..., None], eye[1], axis1)

    def flat(p: jax.Array) -> jax.Array:
        return jnp.stack([_dot(p, axis0), _dot(p, axis1)], axis=-1)

    end0, end1 = flat(p0), flat(p1)
    side2 = radius[..., None] * _normalize(flat(s))
    arc, t0, t1 = circle_wrap(end0, end1, side2, has_side, radius)
    if any_side:  # a side site inside the geom: the path through it
        inside = has_side & (_norm(s) < radius)
        touch, point = inside_wrap(end0, end1, radius)
        arc = jnp.where(inside, touch, arc)
        t0 = jnp.where(inside[..., None], point, t0)
        t1 = jnp.where(inside[..., None], point, t1)
    wrapped = ~near_centre & (arc >= 0)
    arc = jnp.where(wrapped, arc, 0.0)
    res0 = axis0 * t0[..., :1] + axis1 * t0[..., 1:]
    res1 = axis0 * t1[..., :1] + axis1 * t1[..., 1:]

    # a cylinder: the height is spread along the path (a helix on the surface)
    run0 = _norm(p0[..., :2] - res0[..., :2])
    run1 = _norm(p1[..., :2] - res1[..., :2])
    total = run0 + arc + run1
    rise = (p1[..., 2] - p0[..., 2]) / _safe(total, total > MINVAL)
    z0, z1 = p0[..., 2] + rise * run0, p0[..., 2] + rise * (run0 + arc)
    helix = _norm(jnp.stack([arc, z1 - z0], axis=-1))
    arc = jnp.where(cylinder, helix, arc)
    res0 = jnp.where(cylinder[..., None], res0.at[..., 2].set(z0), res0)
    res1 = jnp.where(cylinder[..., None], res1.at[..., 2].set(z1), res1)
    tangent = geom_pos[..., None, :] + math.mat_vec(
        geom_mat[..., None, :, :], jnp.stack([res0, res1], axis=-2)
    )
    return Wrap(wrapped, arc, tangent)
