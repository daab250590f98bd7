"""Tendon lengths and their Jacobians (MuJoCo's ten_length, ten_J).

A tendon's length is the sum of its terms (a `TendonPath`, see physics.system):

- fixed: sum of coef * q over (joint, coef) pairs of hinge/slide joints, a constant Jacobian;
- spatial: straight segments between sites, scale * |x_b - x_a| each (scale = 1/divisor of the
  pulley branch the segment is in), with Jacobian scale * u^T (jacp_b - jacp_a) along the
  segment's unit vector u. Two sites on one body add a constant length and no Jacobian (as
  MuJoCo: u is left zero for a segment shorter than 1e-15).

Springs, dampers, limits and friction loss act on these lengths the same way for both kinds.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from physics import kinematics, math
from physics.system import System, TendonPath

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
    jac = jnp.asarray(moment, q.dtype)
    owner, site_a, site_b, scale = (np.asarray(x) for x in zip(*segments, strict=True))
    sites = np.union1d(site_a, site_b)
    pos, _ = kinematics.site_frames(sys, kin)
    pos = pos[sites]
    body = np.asarray(sys.site_body, np.int32)[sites]
    jacp = kinematics.point_jacobian(sys, kin, pos, body)[:, 3:]  # [n_sites, 3, nv]
    a, b = np.searchsorted(sites, site_a), np.searchsorted(sites, site_b)
    gap = pos[b] - pos[a]
    sq = jnp.sum(gap * gap, axis=-1)
    dist = jnp.where(sq > 0.0, jnp.sqrt(jnp.where(sq > 0.0, sq, 1.0)), 0.0)  # (finite gradient)
    unit = jnp.where(dist[:, None] > MINVAL, gap / jnp.maximum(dist, MINVAL)[:, None], 0.0)
    seg_jac = jnp.einsum("si,sin->sn", unit, jacp[b] - jacp[a])
    sum_to_tendon = np.zeros((len(tendons), len(segments)))
    sum_to_tendon[owner, np.arange(len(segments))] = scale
    length = length + math.static_matmul(sum_to_tendon, dist)
    return length, jac + math.static_matmul(sum_to_tendon, seg_jac)


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
