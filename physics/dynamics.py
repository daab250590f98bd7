"""Smooth dynamics: mass matrix (CRBA), bias forces (RNE), passive and actuator forces.

All spatial quantities come from :mod:`physics.kinematics` in one common frame per tree, so
tree recursions become products with static 0/1 tree matrices (subtree sums, ancestor sums):
no Python loop over bodies, and each is one small matmul per world.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from physics import kinematics, math, muscle, tendon
from physics.kinematics import Kinematics
from physics.system import DYN_MUSCLE, JNT_FREE, JNT_HINGE, JNT_SLIDE, System


@math.jit_when_eager  # load-time callers (dampratio, eq_data, spring lengths)
@math.full_precision
def mass_matrix(sys: System, kin: Kinematics) -> jax.Array:
    """Joint-space inertia M [nv, nv] including the joints' and tendons' armature (MuJoCo's
    qM / mj_fullM).

    Composite rigid body algorithm: Ic[b] is the summed spatial inertia of b's subtree, and
    M[i, j] = cdof_i . Ic[body(j)] cdof_j for dof i on the path from dof j to the root.
    """
    topo = sys.topology
    ic = math.static_matmul(topo.body_ancestor, kin.cinert)  # subtree sums
    f = math.mat_vec(ic[topo.dof_body], kin.cdof)  # Ic cdof per dof
    upper = (kin.cdof @ f.T) * jnp.asarray(topo.dof_ancestor)  # one [nv, 6] x [6, nv] dot
    m = upper + upper.T - jnp.diag(jnp.diag(upper))
    m = m + jnp.diag(sys.dof_armature)
    if sys.armature_tendons:  # (J does not read q; only the discarded length does)
        _, jac = tendon.lengths_and_jacobian(sys, kin, sys.qpos0, sys.armature_tendons)
        jac = jnp.asarray(jac, m.dtype)
        armature = jnp.einsum("t,ti,tj->ij", sys.tendon_armature, jac, jac)
        m = m + jnp.where(topo.dof_chain, armature, 0.0)
    return m


def tendon_armature_bias(sys: System, q: jax.Array, qd: jax.Array) -> jax.Array:
    """[nv] the bias force of the tendons' armature, J^T armature (dJ/dt qd), as MuJoCo's
    mj_tendonBias adds to qfrc_bias (0 for a fixed tendon, whose J is constant); dJ/dt is
    taken along the motion, q advanced by qd."""

    def tendon_velocity(t: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(J qd, J) at q advanced by qd over t."""
        moved = kinematics.integrate_position(sys, q, qd, t)
        kin = kinematics.forward_kinematics(sys, moved)
        _, jac = tendon.lengths_and_jacobian(sys, kin, moved, sys.armature_tendons)
        jac = jnp.asarray(jac, qd.dtype)
        return tendon.mat_vec(jac, qd), jac

    zero = jnp.zeros((), qd.dtype)
    _, jdot_qd, jac = jax.jvp(tendon_velocity, (zero,), (jnp.ones_like(zero),), has_aux=True)
    return tendon.mat_vec(jac.T, sys.tendon_armature * jdot_qd)


def velocity_product_acceleration(sys: System, kin: Kinematics, qd: jax.Array) -> jax.Array:
    """[nbody, 6] spatial acceleration of each body when qacc = 0 and without gravity: the
    sum of cdof_dot * qd over the dofs that move it (MuJoCo's cacc terms of RNE)."""
    topo = sys.topology
    vd = kin.cdof * qd[:, None]
    # cdof_dot: each axis moves with the velocity of the frame that carries it
    frame_vel = math.static_matmul(topo.dof_moving_frame.T, vd)
    cdof_dot = math.cross_motion(frame_vel, kin.cdof)
    return math.static_matmul(topo.body_dof, cdof_dot * qd[:, None])


@math.full_precision
def bias_force(sys: System, kin: Kinematics, cvel: jax.Array, qd: jax.Array) -> jax.Array:
    """Coriolis, centrifugal and gravity forces (MuJoCo's qfrc_bias, RNE with qacc = 0)."""
    topo = sys.topology
    gravity = jnp.concatenate([jnp.zeros(3, sys.gravity.dtype), -sys.gravity])
    cacc = velocity_product_acceleration(sys, kin, qd) + gravity
    momentum = math.mat_vec(kin.cinert, cvel)
    fbody = math.mat_vec(kin.cinert, cacc) + math.cross_force(cvel, momentum)
    cfrc = math.static_matmul(topo.body_ancestor, fbody)  # subtree sums
    return jnp.sum(kin.cdof * cfrc[topo.dof_body], axis=-1)


@math.full_precision
def gravity_compensation(sys: System, kin: Kinematics) -> jax.Array:
    """MuJoCo's qfrc_gravcomp: for each body with gravcomp, that fraction of its weight held
    up by a force at its centre of mass, in joint space."""
    bodies = np.asarray(sys.gravcomp_bodies, np.int32)
    jac = kinematics.point_jacobian(sys, kin, kin.xipos[bodies], bodies)[:, 3:]
    weight = -(sys.body_gravcomp[bodies] * sys.body_mass[bodies])[:, None] * sys.gravity
    return jnp.einsum("bin,bi->n", jac, weight)


def _actuated_gravcomp(sys: System) -> np.ndarray:
    """[nv] bool: dofs whose gravity compensation counts as actuator force (actuatorgravcomp)."""
    return np.asarray(sys.jnt_actgravcomp, bool)[sys.topology.dof_jnt]


@math.full_precision
def passive_force(sys: System, kin: Kinematics, q: jax.Array, qd: jax.Array) -> jax.Array:
    """Joint damping and stiffness, tendon springs and dampers and gravity compensation
    (MuJoCo's qfrc_passive) at configuration `q` (its kinematics `kin`) and velocity `qd`;
    springs and dampers each left out under MuJoCo's spring and damper flags.

    A ball joint's spring turns it back by its rotation from qpos_spring (the rotation vector
    of q_spring^-1 q); a free joint's also pulls its position back, as MuJoCo's mj_passive."""
    topo = sys.topology
    jt = np.asarray(topo.jnt_type)
    scalar = np.nonzero((jt == JNT_HINGE) | (jt == JNT_SLIDE))[0]
    force = jnp.zeros_like(qd) if sys.disable_damper else -sys.dof_damping * qd
    if scalar.size and not sys.disable_spring:
        qa, da = topo.jnt_qposadr[scalar], topo.jnt_dofadr[scalar]
        spring = -sys.jnt_stiffness[scalar] * (q[qa] - sys.qpos_spring[qa])
        force = force.at[da].add(spring)
    offset = q - sys.qpos_spring
    for j in () if sys.disable_spring else sys.ball_free_springs:
        qa, da = int(topo.jnt_qposadr[j]), int(topo.jnt_dofadr[j])
        if jt[j] == JNT_FREE:
            force = force.at[da : da + 3].add(-sys.jnt_stiffness[j] * offset[qa : qa + 3])
            qa, da = qa + 3, da + 3
        turn = math.quat_mul(math.quat_conj(sys.qpos_spring[qa : qa + 4]), q[qa : qa + 4])
        force = force.at[da : da + 3].add(-sys.jnt_stiffness[j] * math.quat_to_rotvec(turn))
    if sys.spring_tendons and not (sys.disable_spring and sys.disable_damper):
        length, moment = tendon.lengths_and_jacobian(sys, kin, q, sys.spring_tendons)
        rest = jnp.clip(length, sys.tendon_lengthspring[:, 0], sys.tendon_lengthspring[:, 1])
        along = jnp.zeros_like(length)
        if not sys.disable_spring:
            along = along + sys.tendon_stiffness * (rest - length)
        if not sys.disable_damper:
            along = along - sys.tendon_damping * tendon.mat_vec(moment, qd)
        force = force + tendon.mat_vec(moment.T, along)
    if sys.gravcomp_bodies:
        force = force + jnp.where(_actuated_gravcomp(sys), 0.0, gravity_compensation(sys, kin))
    return force


def _clamped(sys: System, ctrl: jax.Array) -> jax.Array:
    """ctrl clipped to ctrlrange, unless MuJoCo's clampctrl flag is disabled."""
    if sys.disable_clampctrl:
        return ctrl
    return jnp.clip(ctrl, sys.actuator_ctrlrange[:, 0], sys.actuator_ctrlrange[:, 1])


def _stateful(sys: System) -> np.ndarray:
    """Actuators with activation dynamics, in the order of their act entries."""
    return np.flatnonzero(np.asarray(sys.actuator_dyntype, np.int32) > 0)


def activation_rate(sys: System, act: jax.Array, ctrl: jax.Array) -> jax.Array:
    """act_dot [na] under ctrl (clipped to ctrlrange), as MuJoCo's mj_fwdActuation: ctrl for
    an integrator, (ctrl - act) / tau for a filter (exact or not), a muscle's
    (physics.muscle.activation_rate)."""
    idx = _stateful(sys)
    if not idx.size:
        return act
    if sys.disable_actuation:  # (<flag actuation="disable">: act stays where it is)
        return jnp.zeros_like(act)
    kind = np.asarray(sys.actuator_dyntype, np.int32)[idx]
    u = _clamped(sys, ctrl)[idx]
    tau = jnp.maximum(sys.actuator_dynprm[idx, 0], 1e-15)
    rate = jnp.where(kind == 1, u, (u - act) / tau)
    if (kind == DYN_MUSCLE).any():
        rate = jnp.where(
            kind == DYN_MUSCLE, muscle.activation_rate(u, act, sys.actuator_dynprm[idx]), rate
        )
    return rate


def advance_activation(sys: System, act: jax.Array, act_dot: jax.Array, dt: jax.Array) -> jax.Array:
    """act [na] after dt at rate act_dot, as MuJoCo's mj_advance: act += dt act_dot, except a
    filterexact's exact decay act += act_dot tau (1 - exp(-dt / tau)); then clipped to
    actrange."""
    idx = _stateful(sys)
    if not idx.size:
        return act
    kind = np.asarray(sys.actuator_dyntype, np.int32)[idx]
    tau = jnp.maximum(sys.actuator_dynprm[idx, 0], 1e-15)
    step = jnp.where(kind == 3, tau * (1.0 - jnp.exp(-dt / tau)), dt)
    lo, hi = sys.actuator_actrange[idx, 0], sys.actuator_actrange[idx, 1]
    return jnp.clip(act + act_dot * step, lo, hi)


def next_activation(sys: System, act: jax.Array, ctrl: jax.Array, dt: jax.Array) -> jax.Array:
    """act [na] after dt under ctrl: `advance_activation` at `activation_rate`."""
    return advance_activation(sys, act, activation_rate(sys, act, ctrl), dt)


def site_moments(sys: System, kin: Kinematics) -> tuple[np.ndarray, jax.Array, jax.Array]:
    """(actuators, moment arms [n, nv], lengths [n]) of the site actuators, as MuJoCo's
    mjTRN_SITE: the gear wrench (force, torque) turned from the site's frame into the
    world's, through the site's Jacobian; length 0. With a refsite, the wrench is in the
    refsite's frame, through the Jacobian relative to it, and the length is the gear's dot
    product with the site's position and rotation (vector) relative to the refsite."""
    actuators, site, gear, ref = (np.asarray(x) for x in zip(*sys.actuator_site, strict=True))
    gear = gear.astype(np.float64)
    pos, mat = kinematics.site_frames(sys, kin)
    site_body = np.asarray(sys.site_body, np.int32)
    jac = kinematics.point_jacobian(sys, kin, pos[site], site_body[site])  # [n, 6, nv]
    frame = mat[site]
    length = jnp.zeros(len(site), pos.dtype)
    if (ref >= 0).any():  # relative to the refsite (its Jacobian taken off, its frame's wrench)
        has, r = jnp.asarray(ref >= 0), np.maximum(ref, 0)
        jac_ref = kinematics.point_jacobian(sys, kin, pos[r], site_body[r])
        jac = jnp.where(has[:, None, None], jac - jac_ref, jac)
        frame = jnp.where(has[:, None, None], mat[r], frame)
        offset = math.mat_vec(jnp.swapaxes(mat[r], -1, -2), pos[site] - pos[r])
        q_site, q_ref = math.mat_to_quat(mat[site]), math.mat_to_quat(mat[r])
        turn = math.quat_to_rotvec(math.quat_mul(math.quat_conj(q_ref), q_site))
        relative = jnp.sum(offset * gear[:, :3], -1) + jnp.sum(turn * gear[:, 3:], -1)
        length = jnp.where(has, relative, 0.0)
    torque = math.mat_vec(frame, jnp.asarray(gear[:, 3:], pos.dtype))
    force = math.mat_vec(frame, jnp.asarray(gear[:, :3], pos.dtype))
    rows = jnp.einsum("ni,nim->nm", jnp.concatenate([torque, force], -1), jac)
    return actuators, rows, length


def ball_free_moments(sys: System, q: jax.Array) -> tuple[np.ndarray, jax.Array, jax.Array]:
    """(actuators, moment arms [n, nv], lengths [n]) of the actuators on ball and free joints,
    as MuJoCo's mjTRN_JOINT and mjTRN_JOINTINPARENT: the moment arm is the gear's rotation axis
    on the joint's three rotational dofs (gear[0:3] on a ball joint; gear[3:6] on a free joint,
    whose gear[0:3] push along its world-frame translational dofs). The axis is in the joint's
    frame, or with jointinparent in the parent's, turned into the joint's by the joint's
    rotation. A ball joint's length is its rotation vector's component along the axis; a free
    joint's is 0."""
    qposadr, dofadr = sys.topology.jnt_qposadr, sys.topology.jnt_dofadr
    actuators, rows, lengths = [], [], []
    for actuator, joint, gear, in_parent in sys.actuator_ball_free:
        free = sys.topology.jnt_type[joint] == JNT_FREE
        start = int(qposadr[joint]) + 3 * free
        quat = q[start : start + 4]
        axis = jnp.asarray(gear[3:] if free else gear[:3], q.dtype)
        if in_parent:
            axis = math.mat_vec(math.quat_to_mat(quat).T, axis)
        rotation = int(dofadr[joint]) + 3 * free
        row = jnp.zeros(sys.nv, q.dtype).at[rotation : rotation + 3].set(axis)
        if free:
            row = row.at[rotation - 3 : rotation].set(jnp.asarray(gear[:3], q.dtype))
        actuators.append(actuator)
        rows.append(row)
        lengths.append(jnp.zeros((), q.dtype) if free else math.quat_to_rotvec(quat) @ axis)
    return np.asarray(actuators, np.int32), jnp.stack(rows), jnp.stack(lengths)


def slider_crank_moments(sys: System, kin: Kinematics) -> tuple[np.ndarray, jax.Array, jax.Array]:
    """(actuators, moment arms [n, nv], lengths [n]) of the slider-crank actuators, as
    MuJoCo's mjTRN_SLIDERCRANK: a rod of length r joins the crank site to a slider moving along
    the slider site's z axis a; with v the crank site's offset from the slider site, the length
    is v.a - sqrt((v.a)^2 + r^2 - |v|^2), or v.a where the rod cannot reach (a negative root),
    and the moment arms its derivative through both sites' Jacobians."""
    slider_cranks = zip(*sys.actuator_slider_crank, strict=True)
    actuators, crank, slider, rod = (np.asarray(x) for x in slider_cranks)
    pos, mat = kinematics.site_frames(sys, kin)
    site_body = np.asarray(sys.site_body, np.int32)
    axis = mat[slider][..., 2]  # [n, 3]
    vec = pos[crank] - pos[slider]
    av = jnp.sum(vec * axis, -1)
    det = av * av + jnp.asarray(rod, vec.dtype) ** 2 - jnp.sum(vec * vec, -1)
    reach = det > 0
    root = jnp.sqrt(jnp.where(reach, det, 1.0))
    length = jnp.where(reach, av - root, av)
    scale = jnp.where(reach, 1 - av / root, 1.0)[:, None]
    d_vec = axis * scale + jnp.where(reach[:, None], vec / root[:, None], 0.0)
    d_axis = vec * scale
    jac_crank = kinematics.point_jacobian(sys, kin, pos[crank], site_body[crank])
    jac_slider = kinematics.point_jacobian(sys, kin, pos[slider], site_body[slider])
    # d axis = omega x axis, so d_axis . d axis = omega . (axis x d_axis)
    rows = jnp.einsum("ni,nim->nm", d_vec, jac_crank[:, 3:] - jac_slider[:, 3:])
    rows = rows + jnp.einsum("ni,nim->nm", jnp.cross(axis, d_axis), jac_slider[:, :3])
    return actuators, rows, length


def actuator_moments(sys: System, kin: Kinematics, q: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(lengths [nu], moment arms [nu, nv]) of every actuator's transmission, before the scalar
    gear (`sys.actuator_gear`, 1 where the gear is a vector: sites, ball and free joints)."""
    length, moment = tendon.lengths_and_jacobian(sys, kin, q, sys.actuator_transmission)
    special = []
    if sys.actuator_site:
        special.append(site_moments(sys, kin))
    if sys.actuator_ball_free:
        special.append(ball_free_moments(sys, q))
    if sys.actuator_slider_crank:
        special.append(slider_crank_moments(sys, kin))
    for actuators, rows, lengths in special:
        moment = jnp.asarray(moment, rows.dtype).at[actuators].set(rows)
        length = jnp.asarray(length, rows.dtype).at[actuators].set(lengths)
    return length, moment


@math.full_precision
def actuator_force(
    sys: System,
    kin: Kinematics,
    q: jax.Array,
    qd: jax.Array,
    ctrl: jax.Array,
    act: jax.Array | None = None,
    *,
    clip_joint_totals: bool = True,
) -> jax.Array:
    """Actuator forces in joint space (MuJoCo's qfrc_actuator): with ctrl clipped to ctrlrange,
    force = gain * input + bias . (1, length, velocity), clipped to forcerange, applied through
    the moment arms; input is ctrl, or act for an actuator with activation dynamics (`act`
    [na], the state's). A transmission's length is gear times its joint's position or its
    tendon's length (physics.tendon), its moment arms gear times that length's Jacobian; a
    site's moment arms are its gear wrench's, its length 0 or, with a refsite, measured from it
    (`site_moments`); on a ball or free joint, the gear is a rotation axis
    (`ball_free_moments`); a slider-crank's length and moment arms are its rod geometry's
    (`slider_crank_moments`). Joints with actuatorgravcomp add their gravity compensation; each
    joint's total is clipped to its actuatorfrcrange (unless ``clip_joint_totals`` is False:
    MuJoCo's implicit integrators differentiate the unclipped totals)."""
    out = jnp.zeros(sys.nv, sys.dof_damping.dtype)
    if sys.disable_actuation:  # (<flag actuation="disable">: no force, gravcomp's share too)
        return out
    if sys.nu:
        out = _actuator_dof_force(sys, kin, q, qd, ctrl, act)
    actuated = _actuated_gravcomp(sys)
    if sys.gravcomp_bodies and actuated.any():
        out = out + jnp.where(actuated, gravity_compensation(sys, kin), 0.0)
    if clip_joint_totals and any(sys.jnt_actfrclimited):
        dof_range = sys.jnt_actfrcrange[sys.topology.dof_jnt]
        out = jnp.clip(out, dof_range[:, 0], dof_range[:, 1])
    return out


def adhesion_forces(sys: System, ctrl: jax.Array, act: jax.Array) -> jax.Array:
    """[len(sys.actuator_adhesion)] the forces of the body-transmission actuators (MuJoCo's
    adhesion), which act through the contacts (physics.contact.adhesion_force); 0 with
    actuation disabled. The loader allows them a fixed gain only: force = gain * input,
    clipped to forcerange, with no moment arms to compute here."""
    index = np.asarray([u for u, _ in sys.actuator_adhesion], np.int32)
    if sys.disable_actuation:
        return jnp.zeros(len(index), sys.dof_damping.dtype)
    force = sys.actuator_gain[index, 0] * _inputs(sys, ctrl, act)[index]
    return jnp.clip(force, sys.actuator_forcerange[index, 0], sys.actuator_forcerange[index, 1])


def _inputs(sys: System, ctrl: jax.Array, act: jax.Array | None) -> jax.Array:
    """Each actuator's input [nu]: ctrl (clamped), or act for one with activation dynamics
    (with actearly, the activation at the step's end)."""
    inputs = _clamped(sys, ctrl)
    if sys.na:
        if any(sys.actuator_actearly):  # actearly: the activation of the step's end
            early = np.asarray(sys.actuator_actearly, bool)[_stateful(sys)]
            act = jnp.where(early, next_activation(sys, act, ctrl, sys.timestep), act)
        inputs = inputs.at[_stateful(sys)].set(act)
    return inputs


def _actuator_dof_force(
    sys: System,
    kin: Kinematics,
    q: jax.Array,
    qd: jax.Array,
    ctrl: jax.Array,
    act: jax.Array | None,
) -> jax.Array:
    """The actuators' forces through their moment arms (see actuator_force)."""
    length, moment = actuator_moments(sys, kin, q)
    length = sys.actuator_gear * length
    velocity = sys.actuator_gear * tendon.mat_vec(moment, qd)
    ctrl = _inputs(sys, ctrl, act)
    bias = sys.actuator_bias
    gain = sys.actuator_gain
    gain = gain[:, 0] + gain[:, 1] * length + gain[:, 2] * velocity
    force = gain * ctrl + bias[:, 0] + bias[:, 1] * length + bias[:, 2] * velocity
    if sys.actuator_muscle_gain:  # (a muscle's affine gain and bias are 0)
        i = np.asarray(sys.actuator_muscle_gain)
        lengthrange, prm = sys.actuator_lengthrange[i], sys.actuator_muscle_gainprm[i]
        force = force.at[i].add(muscle.gain(length[i], velocity[i], lengthrange, prm) * ctrl[i])
    if sys.actuator_muscle_bias:
        i = np.asarray(sys.actuator_muscle_bias)
        lengthrange, prm = sys.actuator_lengthrange[i], sys.actuator_muscle_biasprm[i]
        force = force.at[i].add(muscle.bias(length[i], lengthrange, prm))
    force = jnp.clip(force, sys.actuator_forcerange[:, 0], sys.actuator_forcerange[:, 1])
    for actuators, lo, hi in sys.tendon_actuator_force_limits:
        # a tendon's total actuator force past its actuatorfrcrange: every actuator on it
        # scaled by bound / total, as MuJoCo (whose division by a zero total outside the range
        # gives NaN: those forces are left as they are here)
        index = np.asarray(actuators)
        total = jnp.sum(force[index])
        bound = jnp.clip(total, lo, hi)
        inside = (total == bound) | (total == 0)
        scale = jnp.where(inside, 1.0, bound / jnp.where(inside, 1.0, total))
        force = force.at[index].multiply(scale)
    return tendon.mat_vec(moment.T, sys.actuator_gear * force)
