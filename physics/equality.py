"""Equality constraints (MuJoCo's ``<equality>``): connect, and joint or fixed-tendon couplings.

Each active equality adds bilateral soft-constraint rows (force of either sign, always on) to
the constraint solve, as MuJoCo's mj_instantiateEquality builds them:

- connect: 3 rows, the world-frame gap p1 - p2 between an anchor fixed to body1 and one fixed
  to body2 (where the body1 anchor sits at qpos0); Jacobian jacp1 - jacp2. The impedance of
  all three comes from the gap's norm (MuJoCo's getposdim), and their reference acceleration
  also cancels the anchors' relative acceleration at qacc = 0 (dJ/dt qvel, as MuJoCo 4.0
  does for connects), so a rotating linkage is held closed without lag.
- joint / tendon: 1 row, v1 - ref1 - (c0 + c1 x + c2 x^2 + c3 x^3 + c4 x^4), x = v2 - ref2,
  for the values v of two hinge/slide joints or fixed tendons (ref: the value at qpos0; the
  polynomial is just c0 when only one object is named); Jacobian J1 - p'(x) J2.

Rows use the equality's solref/solimp and, as diagonal approximation of J M^-1 J^T, the sum of
its objects' invweight0 (bodies: translational; joints: their dof's; tendons: J M^-1 J^T at
qpos0).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from physics import kinematics, math
from physics.dynamics import transmission, velocity_product_acceleration
from physics.system import EQ_CONNECT, EQ_JOINT, System


class EqualityRows(NamedTuple):
    """Rows of every equality constraint: connects (3 rows each) first, then couplings."""

    J: jax.Array  # [n, nv]
    pos: jax.Array  # [n] constraint violation
    jdot_qd: jax.Array  # [n] dJ/dt qvel, subtracted from the reference acceleration
    impedance_pos: jax.Array  # [n] what the impedance is computed from
    diag: jax.Array  # [n] diagonal approximation of J M^-1 J^T
    solref: jax.Array  # [n, 2]
    solimp: jax.Array  # [n, 5]


def split(sys: System) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the connect equalities and of the couplings (joint or tendon)."""
    kind = np.asarray(sys.eq_type, np.int32)
    return np.flatnonzero(kind == EQ_CONNECT), np.flatnonzero(kind != EQ_CONNECT)


def num_rows(sys: System) -> int:
    """Rows the equality constraints add (0 when the equality flag is disabled)."""
    if sys.disable_equality:
        return 0
    connect, coupling = split(sys)
    return 3 * len(connect) + len(coupling)


def _bodies(sys: System, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.asarray([sys.eq_obj1[i][0] for i in idx], np.int32),
        np.asarray([sys.eq_obj2[i][0] for i in idx], np.int32),
    )


def _anchors(sys: System, kin: kinematics.Kinematics, idx: np.ndarray) -> tuple:
    """World anchors (p1, p2 [n, 3]) of the connects `idx` and their bodies."""
    b1, b2 = _bodies(sys, idx)
    data = sys.eq_data[idx]
    p1 = kin.xpos[b1] + math.mat_vec(kin.xmat[b1], data[:, :3])
    p2 = kin.xpos[b2] + math.mat_vec(kin.xmat[b2], data[:, 3:6])
    return p1, p2, b1, b2


def _sides(sys: System, idx: np.ndarray) -> tuple:
    """Value maps (to_q [n, nq], moment [n, nv]) of side 1 and side 2 of the couplings `idx`."""
    return (
        transmission(sys, tuple(sys.eq_obj1[i] for i in idx)),
        transmission(sys, tuple(sys.eq_obj2[i] for i in idx)),
    )


def _point_acceleration(
    sys: System,
    kin: kinematics.Kinematics,
    cvel: jax.Array,
    cacc: jax.Array,
    p: jax.Array,
    b: np.ndarray,
) -> jax.Array:
    """Acceleration of world points `p` fixed to bodies `b` given the bodies' spatial
    velocities and accelerations (about each tree's com)."""
    r = p - kin.subtree_com[sys.topology.body_root[b]]
    w, v = cvel[b, :3], cvel[b, 3:] + jnp.cross(cvel[b, :3], r)
    return cacc[b, 3:] + jnp.cross(cacc[b, :3], r) + jnp.cross(w, v)


@math.full_precision
def rows(
    sys: System, kin: kinematics.Kinematics, q: jax.Array, qd: jax.Array, cvel: jax.Array
) -> EqualityRows:
    """The equality rows at configuration `q` and velocity `qd` (with its kinematics `kin` and
    body velocities `cvel`)."""
    connect, coupling = split(sys)
    Js, pos, jdot, imp, diag, ref, sol = [], [], [], [], [], [], []
    if connect.size:
        p1, p2, b1, b2 = _anchors(sys, kin, connect)
        gap = p1 - p2
        jac = kinematics.point_jacobian(sys, kin, p1, b1) - kinematics.point_jacobian(
            sys, kin, p2, b2
        )
        cacc = velocity_product_acceleration(sys, kin, qd)
        rel = _point_acceleration(sys, kin, cvel, cacc, p1, b1) - _point_acceleration(
            sys, kin, cvel, cacc, p2, b2
        )
        Js.append(jac[:, 3:].reshape(-1, sys.nv))
        pos.append(gap.reshape(-1))
        jdot.append(rel.reshape(-1))
        norm = jnp.sqrt(jnp.sum(gap * gap, axis=-1) + 1e-30)  # finite gradient at a closed gap
        imp.append(jnp.repeat(norm, 3))
        diag.append(jnp.repeat(sys.eq_invweight0[connect], 3))
        ref.append(jnp.repeat(sys.eq_solref[connect], 3, axis=0))
        sol.append(jnp.repeat(sys.eq_solimp[connect], 3, axis=0))
    if coupling.size:
        (to_q1, moment1), (to_q2, moment2) = _sides(sys, coupling)
        c = sys.eq_data[coupling]
        x = math.static_matmul(to_q2, q - sys.qpos0)  # zero where there is no side 2
        poly = c[:, 0] + x * (c[:, 1] + x * (c[:, 2] + x * (c[:, 3] + x * c[:, 4])))
        slope = c[:, 1] + x * (2 * c[:, 2] + x * (3 * c[:, 3] + x * 4 * c[:, 4]))
        violation = math.static_matmul(to_q1, q - sys.qpos0) - poly
        Js.append(jnp.asarray(moment1) - slope[:, None] * jnp.asarray(moment2))
        pos.append(violation)
        jdot.append(jnp.zeros_like(violation))
        imp.append(violation)
        diag.append(sys.eq_invweight0[coupling])
        ref.append(sys.eq_solref[coupling])
        sol.append(sys.eq_solimp[coupling])
    cat = jnp.concatenate
    return EqualityRows(cat(Js), cat(pos), cat(jdot), cat(imp), cat(diag), cat(ref), cat(sol))


def second_anchors(sys: System) -> np.ndarray:
    """eq_data with each connect's body2 anchor set where its body1 anchor is at qpos0 (as
    MuJoCo compiles a connect given body1's anchor only)."""
    data = np.array(sys.eq_data, np.float64)
    connect, _ = split(sys)
    if connect.size:
        kin = kinematics.forward_kinematics(sys, sys.qpos0)
        p1, _, _, b2 = _anchors(sys, kin, connect)
        xpos, xmat = np.asarray(kin.xpos)[b2], np.asarray(kin.xmat)[b2]
        data[connect, 3:6] = np.einsum("nji,nj->ni", xmat, np.asarray(p1) - xpos)
    return data


def invweight0(
    sys: System, body_invweight0: np.ndarray, dof_invweight0: np.ndarray, minv: np.ndarray
) -> np.ndarray:
    """[neq] diagonal approximation of each equality's rows (MuJoCo's mj_diagApprox): bodies'
    translational invweight0 (connect); each joint's dof invweight0, each tendon's
    J M^-1 J^T at qpos0 (couplings; `minv` = M^-1 there)."""
    out = np.zeros(len(sys.eq_type))
    connect, coupling = split(sys)
    if connect.size:
        b1, b2 = _bodies(sys, connect)
        out[connect] = body_invweight0[b1, 0] + body_invweight0[b2, 0]
    for i in coupling:
        for side in (s for s in (sys.eq_obj1[i], sys.eq_obj2[i]) if s):
            if sys.eq_type[i] == EQ_JOINT:  # side: ((joint, 1.0),)
                out[i] += dof_invweight0[sys.topology.jnt_dofadr[side[0][0]]]
            else:
                _, moment = transmission(sys, (side,))
                out[i] += float(moment[0] @ minv @ moment[0])
    return out
