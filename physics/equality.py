"""Equality constraints (MuJoCo's ``<equality>``): connect, weld, joint and tendon couplings.

Each active equality adds bilateral soft-constraint rows (force of either sign, always on) to
the constraint solve, as MuJoCo's mj_instantiateEquality builds them:

- connect: 3 rows, the world-frame gap p1 - p2 between an anchor fixed to body1 and one fixed
  to body2 (where the body1 anchor sits at qpos0); Jacobian jacp1 - jacp2. The impedance of
  all three comes from the gap's norm (MuJoCo's getposdim), and their reference acceleration
  also cancels the anchors' relative acceleration at qacc = 0 (dJ/dt qvel, as MuJoCo 4.0
  does for connects and welds, dJ/dt from one jvp of the rows along the motion), so a
  rotating linkage is held closed without lag.
- weld: 6 rows, the gap between body1's anchor (where body2's sits at qpos0, or the given
  relpose's position) and body2's, then torquescale times the vector part of the orientation
  error conj(q2) q1 relpose (taken the short way round), with MuJoCo's quaternion Jacobian.
- between sites (site1, site2 instead of bodies): a connect's anchors are the sites, a weld's
  anchors the sites and its relpose site1 conj(site2), so it aligns the sites' frames.
- joint / tendon: 1 row, v1 - ref1 - (c0 + c1 x + c2 x^2 + c3 x^3 + c4 x^4), x = v2 - ref2,
  for the values v of two hinge/slide joints or tendons (ref: the value at qpos0, eq_ref; the
  polynomial is just c0 when only one object is named); Jacobian J1 - p'(x) J2.

Rows use the equality's solref/solimp and, as diagonal approximation of J M^-1 J^T, the sum of
its objects' invweight0 (bodies: translational, or rotational for a weld's last 3 rows; joints:
their dof's; tendons: J M^-1 J^T at qpos0).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from physics import kinematics, math, tendon
from physics.system import EQ_CONNECT, EQ_JOINT, EQ_TENDON, EQ_WELD, NO_TENDON, System


class EqualityRows(NamedTuple):
    """Rows of every equality constraint: connects (3 rows each), welds (6), couplings (1)."""

    J: jax.Array  # [n, nv]
    pos: jax.Array  # [n] constraint violation
    jdot_qd: jax.Array  # [n] dJ/dt qvel, subtracted from the reference acceleration
    impedance_pos: jax.Array  # [n] what the impedance is computed from
    diag: jax.Array  # [n] diagonal approximation of J M^-1 J^T
    solref: jax.Array  # [n, 2]
    solimp: jax.Array  # [n, 5]


def split(sys: System) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices of the connects, the welds and the couplings (joint or tendon)."""
    kind = np.asarray(sys.eq_type, np.int32)
    return (
        np.flatnonzero(kind == EQ_CONNECT),
        np.flatnonzero(kind == EQ_WELD),
        np.flatnonzero((kind == EQ_JOINT) | (kind == EQ_TENDON)),
    )


def num_rows(sys: System) -> int:
    """Rows the equality constraints add (0 when the equality flag is disabled)."""
    if sys.disable_equality:
        return 0
    connect, weld, coupling = split(sys)
    return 3 * len(connect) + 6 * len(weld) + len(coupling)


def _bodies(sys: System, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.asarray([sys.eq_obj1[i][0] for i in idx], np.int32),
        np.asarray([sys.eq_obj2[i][0] for i in idx], np.int32),
    )


def _body_pair_rows(
    sys: System, kin: kinematics.Kinematics, connect: np.ndarray, weld: np.ndarray
) -> tuple[jax.Array, jax.Array]:
    """(pos [n], J [n, nv]) of the connects' and welds' rows at kinematics `kin`."""
    pos, J = [], []
    for idx, anchor1, anchor2, is_weld in ((connect, 0, 3, False), (weld, 3, 0, True)):
        if not idx.size:
            continue
        b1, b2 = _bodies(sys, idx)
        data = sys.eq_data[idx]
        p1 = kin.xpos[b1] + math.mat_vec(kin.xmat[b1], data[:, anchor1 : anchor1 + 3])
        p2 = kin.xpos[b2] + math.mat_vec(kin.xmat[b2], data[:, anchor2 : anchor2 + 3])
        jac = kinematics.point_jacobian(sys, kin, p1, b1) - kinematics.point_jacobian(
            sys, kin, p2, b2
        )  # [n, 6, nv]: angular, linear
        gap, jac_gap = p1 - p2, jac[:, 3:]
        if is_weld:  # orientation error: the vector part of conj(q2) q1 relpose
            relative = math.quat_mul(math.mat_to_quat(kin.xmat[b1]), data[:, 6:10])
            to_2 = math.quat_conj(math.mat_to_quat(kin.xmat[b2]))
            error = math.quat_mul(to_2, relative)
            # q and -q are one rotation: take the error's short way round (MuJoCo's quaternions
            # keep a continuous sign; ours come from rotation matrices)
            sign = jnp.where(error[:, :1] < 0, -1.0, 1.0) * data[:, 10:11]  # * torquescale
            axes = jnp.swapaxes(jac[:, :3], 1, 2)  # [n, nv, 3]
            pure = jnp.concatenate([jnp.zeros_like(axes[..., :1]), axes], axis=-1)
            rate = math.quat_mul(math.quat_mul(to_2[:, None], pure), relative[:, None])
            jac_rot = 0.5 * jnp.swapaxes(rate[..., 1:], 1, 2) * sign[:, :, None]
            gap = jnp.concatenate([gap, sign * error[:, 1:]], axis=-1)
            jac_gap = jnp.concatenate([jac_gap, jac_rot], axis=1)
        pos.append(gap)
        J.append(jac_gap)
    return jnp.concatenate([p.reshape(-1) for p in pos]), jnp.concatenate(
        [j.reshape(-1, sys.nv) for j in J]
    )


@math.full_precision
def rows(sys: System, kin: kinematics.Kinematics, q: jax.Array, qd: jax.Array) -> EqualityRows:
    """The equality rows at configuration `q` (its kinematics `kin`) and velocity `qd`."""
    connect, weld, coupling = split(sys)
    Js, pos, jdot, imp, diag, ref, sol = [], [], [], [], [], [], []
    if connect.size or weld.size:

        def along_motion(t: jax.Array) -> tuple[jax.Array, jax.Array]:  # the rows at q(t)
            moved = kinematics.integrate_position(sys, q, qd, t)
            return _body_pair_rows(sys, kinematics.forward_kinematics(sys, moved), connect, weld)

        zero = jnp.zeros((), q.dtype)  # one jvp: the rows at q and dJ/dt
        (gap, jac), (_, jac_rate) = jax.jvp(along_motion, (zero,), (jnp.ones_like(zero),))
        Js.append(jac)
        pos.append(gap)
        jdot.append(jac_rate @ qd)
        start = 0
        for idx, k in ((connect, 3), (weld, 6)):
            if not idx.size:
                continue
            block = gap[start : start + k * idx.size].reshape(idx.size, k)
            start += k * idx.size
            # one impedance per constraint, from its whole violation (MuJoCo's getposdim)
            norm = jnp.sqrt(jnp.sum(block * block, axis=-1) + 1e-30)
            imp.append(jnp.repeat(norm, k))
            # translational rows take invweight0's column 0, rotational ones column 1
            diag.append(sys.eq_invweight0[idx][:, np.repeat([0, 1], 3)[:k]].reshape(-1))
            ref.append(jnp.repeat(sys.eq_solref[idx], k, axis=0))
            sol.append(jnp.repeat(sys.eq_solimp[idx], k, axis=0))
    if coupling.size:
        (value1, jac1), (value2, jac2) = _sides(sys, kin, q, coupling)
        c, at_qpos0 = sys.eq_data[coupling], sys.eq_ref[coupling]
        x = value2 - at_qpos0[:, 1]  # zero where there is no side 2
        poly = c[:, 0] + x * (c[:, 1] + x * (c[:, 2] + x * (c[:, 3] + x * c[:, 4])))
        slope = c[:, 1] + x * (2 * c[:, 2] + x * (3 * c[:, 3] + x * 4 * c[:, 4]))
        violation = value1 - at_qpos0[:, 0] - poly
        Js.append(jac1 - slope[:, None] * jac2)
        pos.append(violation)
        jdot.append(jnp.zeros_like(violation))
        imp.append(violation)
        diag.append(sys.eq_invweight0[coupling, 0])
        ref.append(sys.eq_solref[coupling])
        sol.append(sys.eq_solimp[coupling])
    cat = jnp.concatenate
    return EqualityRows(cat(Js), cat(pos), cat(jdot), cat(imp), cat(diag), cat(ref), cat(sol))


def _sides(sys: System, kin: kinematics.Kinematics, q: jax.Array, idx: np.ndarray) -> tuple:
    """(value [n], Jacobian [n, nv]) of side 1 and side 2 of the couplings `idx` at `q`."""
    return (
        tendon.lengths_and_jacobian(sys, kin, q, tuple(sys.eq_obj1[i] for i in idx)),
        tendon.lengths_and_jacobian(sys, kin, q, tuple(sys.eq_obj2[i] for i in idx)),
    )


def reference_values(sys: System) -> np.ndarray:
    """eq_ref: each coupling side's value (joint position, tendon length) at qpos0."""
    ref = np.zeros((len(sys.eq_type), 2))
    _, _, coupling = split(sys)
    if coupling.size:
        kin = kinematics.forward_kinematics(sys, sys.qpos0)
        for side, (value, _) in enumerate(_sides(sys, kin, sys.qpos0, coupling)):
            ref[coupling, side] = np.asarray(value)
    return ref


def compiled_data(sys: System, given: tuple[bool, ...]) -> np.ndarray:
    """eq_data completed from the reference pose qpos0, as MuJoCo compiles it: a connect's
    body2 anchor is where its body1 anchor sits; a weld's body1 anchor (data[3:6]) is where its
    body2 anchor sits, and its relative orientation (data[6:10]) the bodies' own, unless
    `given` (a weld's relpose, or a connect or weld between sites: data kept as it is, a
    weld's quaternion normalised)."""
    data = np.array(sys.eq_data, np.float64)
    connect, weld, _ = split(sys)
    if not (connect.size or weld.size):
        return data
    kin = kinematics.forward_kinematics(sys, sys.qpos0)
    xpos, xmat = np.asarray(kin.xpos, np.float64), np.asarray(kin.xmat, np.float64)
    quat = np.asarray(math.mat_to_quat(kin.xmat), np.float64)
    connect = np.asarray([i for i in connect if not given[i]], np.int64)
    b1, b2 = _bodies(sys, connect)
    world = xpos[b1] + np.einsum("nij,nj->ni", xmat[b1], data[connect, :3])
    data[connect, 3:6] = np.einsum("nji,nj->ni", xmat[b2], world - xpos[b2])
    for i, (a, b) in zip(weld, zip(*_bodies(sys, weld), strict=True), strict=True):
        if given[i]:  # kept as given (quaternion normalised), as MuJoCo does
            data[i, 6:10] /= np.linalg.norm(data[i, 6:10])
        else:
            world = xpos[b] + xmat[b] @ data[i, :3]
            data[i, 3:6] = xmat[a].T @ (world - xpos[a])
            data[i, 6:10] = np.asarray(math.quat_mul(quat[a] * [1, -1, -1, -1], quat[b]))
    return data


def invweight0(
    sys: System,
    kin0: kinematics.Kinematics,
    body_invweight0: np.ndarray,
    dof_invweight0: np.ndarray,
    minv: np.ndarray,
) -> np.ndarray:
    """[neq, 2] diagonal approximation of each equality's (translational, rotational) rows
    (MuJoCo's mj_diagApprox): the bodies' invweight0 (connect, weld); each joint's dof
    invweight0, each tendon's J M^-1 J^T at qpos0 (couplings: tendon.invweight0 with the
    kinematics `kin0` and `minv` = M^-1 there; column 0)."""
    out = np.zeros((len(sys.eq_type), 2))
    connect, weld, coupling = split(sys)
    for idx in (connect, weld):
        if idx.size:
            b1, b2 = _bodies(sys, idx)
            out[idx] = body_invweight0[b1] + body_invweight0[b2]
    for i in coupling:
        for side in (s for s in (sys.eq_obj1[i], sys.eq_obj2[i]) if s != NO_TENDON):
            if sys.eq_type[i] == EQ_JOINT:  # side: (((joint, 1.0),), ())
                out[i, 0] += dof_invweight0[sys.topology.jnt_dofadr[side[0][0][0]]]
            else:
                out[i, 0] += float(tendon.invweight0(sys, kin0, (side,), minv)[0])
    return out
