"""Forward kinematics: joint positions -> body frames, motion subspaces and spatial inertias.

Follows MuJoCo's mj_kinematics / mj_comPos: a joint moves its body relative to the frame left by
the joints before it in the same body (hinge about its anchor, slide along its axis, ball about
its anchor, free sets the body pose), and spatial quantities (``cdof``, ``cinert``, ``cvel``) are
expressed in world orientation at the centre of mass of the body's tree (``subtree_com`` of the
child of the world holding it), which keeps float32 accurate far from the origin.

The per-step work is vectorised over joints and bodies; only the composition down the tree is a
static loop over tree depth (not over bodies).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from physics import math
from physics.system import JNT_BALL, JNT_FREE, JNT_HINGE, JNT_SLIDE, System


class Kinematics(NamedTuple):
    """Position-dependent quantities of one configuration (MuJoCo's mjData names)."""

    xpos: jax.Array  # [nbody, 3] body frame origins
    xmat: jax.Array  # [nbody, 3, 3] body orientations (columns: body axes in world)
    xipos: jax.Array  # [nbody, 3] body centres of mass
    xanchor: jax.Array  # [njnt, 3] joint anchors
    xaxis: jax.Array  # [njnt, 3] joint axes
    subtree_com: jax.Array  # [nbody, 3] centre of mass of each body's subtree
    cdof: jax.Array  # [nv, 6] motion subspace of each dof (angular; linear at the tree com)
    cinert: jax.Array  # [nbody, 6, 6] spatial inertia at the tree com
    geom_xpos: jax.Array  # [ngeom, 3]
    geom_xmat: jax.Array  # [ngeom, 3, 3]


def _joint_transforms(sys: System, q: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Local rigid transform (translation [njnt+1, 3], rotation [njnt+1, 3, 3]) of each joint.

    Hinge rotates about its anchor, slide translates along its axis, ball rotates about its
    anchor; free joints (handled by the caller) and the extra last row are the identity.
    """
    topo = sys.topology
    jt = np.asarray(topo.jnt_type)
    adr = topo.jnt_qposadr
    groups, trans, rots = [], [], []
    eye = jnp.eye(3, dtype=q.dtype)
    hinge = np.nonzero(jt == JNT_HINGE)[0]
    if hinge.size:
        r = math.axis_angle_to_mat(sys.jnt_axis[hinge], q[adr[hinge]] - sys.qpos0[adr[hinge]])
        p = sys.jnt_pos[hinge]
        groups.append(hinge), trans.append(p - math.mat_vec(r, p)), rots.append(r)
    slide = np.nonzero(jt == JNT_SLIDE)[0]
    if slide.size:
        d = q[adr[slide]] - sys.qpos0[adr[slide]]
        groups.append(slide), trans.append(sys.jnt_axis[slide] * d[:, None])
        rots.append(jnp.broadcast_to(eye, (slide.size, 3, 3)))
    ball = np.nonzero(jt == JNT_BALL)[0]
    if ball.size:
        r = math.quat_to_mat(math.quat_normalize(q[adr[ball][:, None] + np.arange(4)]))
        p = sys.jnt_pos[ball]
        groups.append(ball), trans.append(p - math.mat_vec(r, p)), rots.append(r)
    rest = np.setdiff1d(np.arange(topo.njnt + 1), np.concatenate([np.zeros(0, int), *groups]))
    trans.append(jnp.zeros((rest.size, 3), q.dtype))
    rots.append(jnp.broadcast_to(eye, (rest.size, 3, 3)))
    order = np.argsort(np.concatenate([*groups, rest]))
    return jnp.concatenate(trans)[order], jnp.concatenate(rots)[order]


def _compose(pa: jax.Array, ra: jax.Array, pb: jax.Array, rb: jax.Array) -> tuple:
    return pa + math.mat_vec(ra, pb), math.mat_mul(ra, rb)


@math.jit_when_eager  # load-time callers (dampratio, eq_data, spring lengths)
@math.full_precision
def forward_kinematics(sys: System, q: jax.Array) -> Kinematics:
    """Body and geom frames, motion subspaces and spatial inertias at configuration ``q``."""
    topo = sys.topology
    nb, nj = topo.nbody, topo.njnt
    jbody = np.asarray(topo.jnt_body, np.int32)
    jtype = np.asarray(topo.jnt_type)
    parent = np.maximum(np.asarray(topo.body_parent), 0)

    # Local transform of each body in its parent: offset, then its joints in order. The frame
    # before joint k of a body (where MuJoCo takes that joint's anchor and axis) is kept.
    jtrans, jrot = _joint_transforms(sys, q)
    slot = np.full((nb, max(topo.max_body_joints, 1)), nj)  # nj -> identity
    jslot = np.zeros(nj, np.int32)
    for j, b in enumerate(jbody):
        k = int(np.sum(jbody[:j] == b))
        slot[b, k], jslot[j] = j, k
    lpos, lmat = sys.body_pos, math.quat_to_mat(sys.body_quat)
    pre_pos, pre_mat = [], []
    for k in range(slot.shape[1]):
        pre_pos.append(lpos)
        pre_mat.append(lmat)
        lpos, lmat = _compose(lpos, lmat, jtrans[slot[:, k]], jrot[slot[:, k]])
    free = topo.free_joints
    if free.size:
        adr = topo.jnt_qposadr[free]
        fb = jbody[free]
        fquat = math.quat_normalize(q[adr[:, None] + np.arange(3, 7)])
        keep = np.ones(nb, bool)
        keep[fb] = False
        lpos = jnp.where(
            keep[:, None], lpos, jnp.zeros_like(lpos).at[fb].set(q[adr[:, None] + np.arange(3)])
        )
        lmat = jnp.where(
            keep[:, None, None], lmat, jnp.zeros_like(lmat).at[fb].set(math.quat_to_mat(fquat))
        )

    # Compose down the tree one level (all bodies at one depth) at a time; parents are found
    # in the previous level's results, then levels are put back into body order.
    levels = topo.levels
    world = (jnp.zeros((1, 3), lpos.dtype), jnp.eye(3, dtype=lmat.dtype)[None])
    prev, prev_ids, done = world, np.array([0]), [world]
    for level in levels:
        where = np.searchsorted(prev_ids, parent[level])
        cur = _compose(prev[0][where], prev[1][where], lpos[level], lmat[level])
        done.append(cur)
        prev, prev_ids = cur, level
    order = np.argsort(np.concatenate([[0], *levels]))
    xpos = jnp.concatenate([d[0] for d in done])[order]
    xmat = jnp.concatenate([d[1] for d in done])[order]
    xipos = xpos + math.mat_vec(xmat, sys.body_ipos)

    # Joint anchors and axes, in the frame before each joint.
    pre_pos, pre_mat = jnp.stack(pre_pos, 1), jnp.stack(pre_mat, 1)
    jp, jr = _compose(
        xpos[parent[jbody]], xmat[parent[jbody]], pre_pos[jbody, jslot], pre_mat[jbody, jslot]
    )
    xanchor = jp + math.mat_vec(jr, sys.jnt_pos)
    xaxis = math.mat_vec(jr, sys.jnt_axis)
    is_free = (jtype == JNT_FREE)[:, None]
    xanchor = jnp.where(is_free, xpos[jbody], xanchor)

    # Centres of mass: of each subtree, and the reference point of each body's tree.
    mass = sys.body_mass
    mtree = math.static_matmul(topo.body_ancestor, mass)
    subtree_com = math.static_matmul(topo.body_ancestor, mass[:, None] * xipos)
    subtree_com = subtree_com / jnp.where(mtree > 0, mtree, 1.0)[:, None]
    ref = subtree_com[topo.body_root]

    cdof = _motion_subspace(sys, xmat, xanchor, xaxis, ref)
    inertia = math.mat_mul(math.mat_mul(xmat, sys.body_inertia), jnp.swapaxes(xmat, -1, -2))
    cinert = math.spatial_inertia(mass, inertia, xipos - ref)

    gb = np.asarray(sys.geom_body, np.int32)
    geom_xpos = xpos[gb] + math.mat_vec(xmat[gb], sys.geom_pos)
    geom_xmat = math.mat_mul(xmat[gb], math.quat_to_mat(sys.geom_quat))
    return Kinematics(
        xpos, xmat, xipos, xanchor, xaxis, subtree_com, cdof, cinert, geom_xpos, geom_xmat
    )


def _motion_subspace(
    sys: System, xmat: jax.Array, xanchor: jax.Array, xaxis: jax.Array, ref: jax.Array
) -> jax.Array:
    """cdof: unit spatial velocity of each dof (MuJoCo's mj_comPos conventions).

    Hinge/slide dofs use the joint axis; ball and the rotational part of free joints use the
    body's local axes (their qvel is a local angular velocity); free translations the world axes.
    """
    topo = sys.topology
    dof_jnt, dof_body = topo.dof_jnt, topo.dof_body
    jtype = np.asarray(topo.jnt_type)[dof_jnt]
    k = np.arange(topo.nv) - topo.jnt_dofadr[dof_jnt]  # index of the dof within its joint
    is_free_trans = (jtype == JNT_FREE) & (k < 3)
    is_local = (jtype == JNT_BALL) | ((jtype == JNT_FREE) & (k >= 3))
    is_rot = ((jtype == JNT_HINGE) | is_local).astype(np.float32)[:, None]
    local_col = np.eye(3, dtype=np.float32)[np.where(jtype == JNT_FREE, k - 3, k) % 3]
    axis = jnp.where(
        is_local[:, None],
        math.mat_vec(xmat[dof_body], local_col),
        jnp.where(is_free_trans[:, None], local_col, xaxis[dof_jnt]),
    )
    lin = jnp.cross(axis, ref[dof_body] - xanchor[dof_jnt])
    return jnp.concatenate([is_rot * axis, is_rot * lin + (1 - is_rot) * axis], axis=-1)


def com_velocity(sys: System, cdof: jax.Array, qd: jax.Array) -> jax.Array:
    """cvel [nbody, 6]: spatial velocity of each body (angular; linear at the tree com)."""
    return math.static_matmul(sys.topology.body_dof, cdof * qd[:, None])


@math.full_precision
def site_frames(sys: System, kin: Kinematics) -> tuple[jax.Array, jax.Array]:
    """([nsite, 3] positions, [nsite, 3, 3] orientations) of the sites (MuJoCo's site_xpos,
    site_xmat)."""
    body = np.asarray(sys.site_body, np.int32)
    xmat = kin.xmat[body]
    return kin.xpos[body] + math.mat_vec(xmat, sys.site_pos), math.mat_mul(
        xmat, math.quat_to_mat(sys.site_quat)
    )


@math.full_precision
def point_jacobian(
    sys: System, kin: Kinematics, point: jax.Array, body: int | np.ndarray
) -> jax.Array:
    """[..., 6, nv] Jacobians of world points fixed to bodies: rows (angular; linear at point).

    ``body`` is static (an int, or a numpy int array matching ``point``'s leading shape), so
    many contact points are handled in one call: jacp = J[..., 3:, :], jacr = J[..., :3, :].
    """
    topo = sys.topology
    body = np.asarray(body)
    ref = kin.subtree_com[topo.body_root[body]]  # [..., 3]
    mask = jnp.asarray(topo.body_dof[body])[..., :, None]  # [..., nv, 1]
    ang = kin.cdof[:, :3] * mask
    lin = (kin.cdof[:, 3:] + jnp.cross(kin.cdof[:, :3], (point - ref)[..., None, :])) * mask
    return jnp.swapaxes(jnp.concatenate([ang, lin], axis=-1), -1, -2)


def rotation_addresses(sys: System) -> tuple[np.ndarray, np.ndarray]:
    """The rotations of ball and free joints: [n, 4] qpos indices of each quaternion and
    [n, 3] qvel indices of its angular velocity."""
    topo = sys.topology
    qpos, dofs = [], []
    for j, t in enumerate(np.asarray(topo.jnt_type)):
        if t in (JNT_FREE, JNT_BALL):
            n_lin = 3 if t == JNT_FREE else 0
            qpos.append(topo.jnt_qposadr[j] + n_lin + np.arange(4))
            dofs.append(topo.jnt_dofadr[j] + n_lin + np.arange(3))
    return np.asarray(qpos, np.int32).reshape(-1, 4), np.asarray(dofs, np.int32).reshape(-1, 3)


def integrate_position(sys: System, q: jax.Array, qd: jax.Array, dt: jax.Array) -> jax.Array:
    """q advanced by qd over dt (MuJoCo's mj_integratePos)."""
    topo = sys.topology
    quat, rot = rotation_addresses(sys)
    # linear part: every qpos slot that is not a quaternion gets qd of its dof
    lin = np.zeros((topo.nq, topo.nv), np.float32)
    linear_q = np.setdiff1d(np.arange(topo.nq), quat)
    linear_d = np.setdiff1d(np.arange(topo.nv), rot)
    lin[linear_q, linear_d] = 1.0
    q_new = q + dt * math.static_matmul(lin, qd)
    if quat.size:
        q_new = q_new.at[quat].set(math.quat_integrate(q[quat], qd[rot], dt))
    return q_new
