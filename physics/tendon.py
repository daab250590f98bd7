"""Tendon lengths and their Jacobians (MuJoCo's ten_length, ten_J).

A tendon's length is the sum of its terms (a `TendonPath`, see physics.system):

- fixed: sum of coef * q over (joint, coef) pairs of hinge/slide joints, a constant Jacobian;
- spatial: segments between sites, scale * |x_b - x_a| each (scale = 1/divisor of the
  pulley branch the segment is in), with Jacobian scale * u^T (jacp_b - jacp_a) along the
  segment's unit vector u. Two sites on one body add a constant length and no Jacobian (as
  MuJoCo: u is left zero for a segment shorter than 1e-15). A segment with a geom between
  its sites takes the path around the geom where that is shorter (physics.wrap).

Springs, dampers, limits and friction loss act on these lengths the same way for both kinds.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from physics import kinematics, math, wrap
from physics.system import GEOM_CYLINDER, System, TendonPath

MINVAL = 1e-15  # MuJoCo's mjMINVAL


def transmission(
    sys: System, pairs: tuple[tuple[tuple[int, float], ...], ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Constant maps of linear joint transmissions (actuators, fixed tendons): each row's
    length from q [n, nq] and its moment arms over the dofs [n, nv], from (joint, coef) pairs."""
    topo = sys.topology
    to_q = np.zeros((len(pairs), topo.nq), sys.body_mass.dtype)
    moment = np.zeros((len(pairs), topo.nv), sys.body_mass.dtype)
    for row, joints in enumerate(pairs):
        for joint, coef in joints:
            to_q[row, topo.jnt_qposadr[joint]] += coef
            moment[row, topo.jnt_dofadr[joint]] += coef
    return to_q, moment


@functools.partial(math.jit_when_eager, static_argnames="tendons")  # load-time callers
def lengths_and_jacobian(
    sys: System, kin: kinematics.Kinematics, q: jax.Array, tendons: tuple[TendonPath, ...]
) -> tuple[jax.Array, jax.Array]:
    """(length [n], J [n, nv]) of `tendons` at configuration `q` (its kinematics `kin`); J is
    a numpy constant when every path is fixed (see `mat_vec`) and this is traced, an array
    when it is called eagerly."""
    to_q, moment = transmission(sys, tuple(joints for joints, _ in tendons))
    length = math.static_matmul(to_q, q)
    segments = [(t, *seg) for t, (_, segs) in enumerate(tendons) for seg in segs]
    if not segments:
        return length, moment
    owner, site_a, site_b, scale, geom, side = (np.asarray(x) for x in zip(*segments, strict=True))
    pos, _ = kinematics.site_frames(sys, kin)
    site_body = np.asarray(sys.site_body, np.int32)
    jacp_a = kinematics.point_jacobian(sys, kin, pos[site_a], site_body[site_a])[:, 3:]
    jacp_b = kinematics.point_jacobian(sys, kin, pos[site_b], site_body[site_b])[:, 3:]
    dist, seg_jac = _straight(pos[site_a], pos[site_b], jacp_a, jacp_b)
    wrapping = np.nonzero(geom >= 0)[0]
    if wrapping.size:  # where a path wraps its geom, it replaces the straight segment
        wrapped, w_dist, w_jac = _wrapped(sys, kin, pos, geom[wrapping], side[wrapping],
                                          site_a[wrapping], site_b[wrapping],
                                          jacp_a[wrapping], jacp_b[wrapping])  # fmt: skip
        dist = dist.at[wrapping].set(jnp.where(wrapped, w_dist, dist[wrapping]))
        seg_jac = seg_jac.at[wrapping].set(jnp.where(wrapped[:, None], w_jac, seg_jac[wrapping]))
    sum_to_tendon = np.zeros((len(tendons), len(segments)))
    sum_to_tendon[owner, np.arange(len(segments))] = scale
    length = length + math.static_matmul(sum_to_tendon, dist)
    jac = jnp.asarray(moment, q.dtype) + math.static_matmul(sum_to_tendon, seg_jac)
    return length, jac


def _straight(
    a: jax.Array, b: jax.Array, jacp_a: jax.Array, jacp_b: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(|b - a| [n], its Jacobian [n, nv]) of straight segments from points a to b [n, 3]
    with point Jacobians jacp [n, 3, nv]."""
    gap = b - a
    sq = jnp.sum(gap * gap, axis=-1)
    dist = jnp.where(sq > 0.0, jnp.sqrt(jnp.where(sq > 0.0, sq, 1.0)), 0.0)  # (finite gradient)
    unit = jnp.where(dist[:, None] > MINVAL, gap / jnp.maximum(dist, MINVAL)[:, None], 0.0)
    return dist, jnp.einsum("si,sin->sn", unit, jacp_b - jacp_a)


def _wrapped(
    sys: System,
    kin: kinematics.Kinematics,
    site_pos: jax.Array,
    geom: np.ndarray,
    side: np.ndarray,
    site_a: np.ndarray,
    site_b: np.ndarray,
    jacp_a: jax.Array,
    jacp_b: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(wrapped [n], length [n], Jacobian [n, nv]) of site-geom-site stretches whose path
    wraps their geom: tangent + arc + tangent (physics.wrap). The Jacobian is MuJoCo's:
    the tangent points held fixed to the geom's body, so the arc moves rigidly and only the
    two tangent segments count (exact for a shortest path, whose length is stationary in the
    tangent points)."""
    path = wrap.wrap(
        site_pos[site_a], site_pos[site_b], kin.geom_xpos[geom], kin.geom_xmat[geom],
        sys.geom_size[geom, 0], np.asarray(sys.geom_type)[geom] == GEOM_CYLINDER,
        site_pos[np.maximum(side, 0)], side >= 0,
    )  # fmt: skip
    body = np.asarray(sys.geom_body, np.int32)[geom]
    jac_t = kinematics.point_jacobian(sys, kin, path.tangent, np.stack([body, body], -1))
    jac_t = jac_t[..., 3:, :]  # [n, 2, 3, nv]
    on, on_jac = _straight(site_pos[site_a], path.tangent[:, 0], jacp_a, jac_t[:, 0])
    off, off_jac = _straight(path.tangent[:, 1], site_pos[site_b], jac_t[:, 1], jacp_b)
    return path.wrapped, on + path.arc + off, on_jac + off_jac


def invweight0(
    sys: System, kin0: kinematics.Kinematics, tendons: tuple[TendonPath, ...], minv: np.ndarray
) -> np.ndarray:
    """[n] J M^-1 J^T of each tendon at qpos0 (kinematics `kin0`, `minv` = M^-1 there):
    MuJoCo's tendon_invweight0, the diagonal approximation of its rows."""
    _, jac = lengths_and_jacobian(sys, kin0, sys.qpos0, tendons)
    jac = np.asarray(jac, np.float64)
    return np.einsum("tn,nm,tm->t", jac, minv, jac)


def mat_vec(jac: jax.Array | np.ndarray, x: jax.Array) -> jax.Array:
    """jac @ x, unrolled over jac's nonzero columns when it is a numpy constant (fixed
    tendons, joint actuators: the common case stays as cheap as a hand-written sum)."""
    return math.static_matmul(jac, x) if isinstance(jac, np.ndarray) else jac @ x
