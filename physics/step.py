"""State, initialisation and time stepping, with MuJoCo's integrators.

One substep is mj_step with the model's ``<option integrator>``:

* Euler (MuJoCo's default): forward dynamics at (q, qd), then semi-implicit Euler with implicit
  joint damping, qd' = qd + dt (M + dt D)^-1 (f + f_c), q' integrated with qd' (quaternions on
  the manifold for ball and free joints).
* implicitfast: the same with every velocity-dependent smooth force implicit,
  (M - dt dF/dqd) with dF/dqd the derivative of the passive, fluid and actuator forces
  (MuJoCo's qDeriv without the Coriolis term; symmetric, so a Cholesky factorization).
* implicit: as implicitfast with the derivative of the Coriolis and centrifugal forces too
  (an LU solve).
* RK4: the classical fourth-order Runge-Kutta on (q, qd, act), with a full forward evaluation
  (constraints included) at each of its four stages, and joint rotations on the manifold
  (Runge-Kutta-Munthe-Kaas), as MuJoCo 4.0 integrates them.

The derivatives are jax's exact Jacobians of the force functions, which is what MuJoCo's
analytic ones (mjd_smooth_vel) compute for the forces this engine has.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from physics import contact, dynamics, fluid, kinematics, linalg, math
from physics.contact import ConstraintResult, ContactState
from physics.kinematics import Kinematics
from physics.system import INTEGRATORS, System


class State(NamedTuple):
    """A world's state: MuJoCo's qpos/qvel plus quantities computed from them.

    ``kin`` and ``cvel`` always belong to the current ``q``/``qd``. ``qacc``,
    ``qfrc_constraint``, ``contact`` and ``cfrc_ext`` are those of the substep that produced
    this state (zeros and inactive contacts after init), like MuJoCo's mjData after mj_step:
    ``qacc`` is the constrained acceleration before the implicit-damping correction (MuJoCo's
    qacc, also the solver's warm start), ``contact`` holds every candidate contact slot
    (see :func:`physics.contact.contact_geoms`), ``cfrc_ext`` the per-body contact wrenches.
    """

    q: jax.Array  # [nq] qpos order: free = pos(3) + quat(4, w first), ball = quat(4)
    qd: jax.Array  # [nv] qvel order: free = world linear(3) + local angular(3)
    time: jax.Array  # []
    kin: Kinematics
    cvel: jax.Array  # [nbody, 6] (angular; linear at the tree com)
    qacc: jax.Array  # [nv]
    qfrc_constraint: jax.Array  # [nv]
    contact: ContactState  # [ncon] slots: dist, pos, frame, contact-frame force
    cfrc_ext: jax.Array  # [nbody, 6] contact wrenches (torque at the tree com, force)
    act: jax.Array  # [na] actuator activations (actuators with activation dynamics)

    @property
    def xpos(self) -> jax.Array:
        """[nbody, 3] body frame origins."""
        return self.kin.xpos

    @property
    def xquat(self) -> jax.Array:
        """[nbody, 4] body orientations (w, x, y, z), converted from xmat on demand."""
        return math.mat_to_quat(self.kin.xmat)

    @property
    def xmat(self) -> jax.Array:
        """[nbody, 3, 3] body rotation matrices."""
        return self.kin.xmat

    @property
    def xipos(self) -> jax.Array:
        """[nbody, 3] body centres of mass."""
        return self.kin.xipos


@math.full_precision
def body_velocity(sys: System, state: State) -> tuple[jax.Array, jax.Array]:
    """World-frame (angular, linear) velocity of each body; linear at the body's centre of mass."""
    ref = state.kin.subtree_com[sys.topology.body_root]
    ang, lin = state.cvel[:, :3], state.cvel[:, 3:]
    return ang, lin + jnp.cross(ang, state.kin.xipos - ref)


@math.full_precision
def center_of_mass(sys: System, state: State) -> jax.Array:
    """[3] centre of mass of all moving bodies."""
    mass = sys.body_mass
    return (mass @ state.kin.xipos) / jnp.sum(mass)


@math.full_precision
def init(sys: System, q: jax.Array | None = None, qd: jax.Array | None = None) -> State:
    """State at ``q`` (default: qpos0) and ``qd`` (default: zeros)."""
    dtype = sys.body_mass.dtype
    q = sys.qpos0 if q is None else jnp.asarray(q, dtype)
    qd = jnp.zeros(sys.nv, dtype) if qd is None else jnp.asarray(qd, dtype)
    kin = kinematics.forward_kinematics(sys, q)
    cvel = kinematics.com_velocity(sys, kin.cdof, qd)
    zero = jnp.zeros(sys.nv, dtype)
    return State(
        q,
        qd,
        jnp.zeros((), dtype),
        kin,
        cvel,
        zero,
        zero,
        contact.empty_contact(sys, dtype),
        jnp.zeros((sys.nbody, 6), dtype),
        jnp.zeros(sys.na, dtype),
    )


@math.full_precision
def smooth_force(sys: System, state: State, ctrl: jax.Array) -> jax.Array:
    """qfrc_smooth = passive + actuator - bias (all forces but constraints)."""
    bias = dynamics.bias_force(sys, state.kin, state.cvel, state.qd)
    if any(segments for _, segments in sys.armature_tendons):  # static: spatial tendons only
        bias = bias + dynamics.tendon_armature_bias(sys, state.q, state.qd)
    passive = dynamics.passive_force(sys, state.kin, state.q, state.qd)
    if sys.fluid:  # static: models without a medium trace nothing more
        passive = passive + fluid.fluid_force(sys, state.kin, state.cvel)
    return (
        passive + dynamics.actuator_force(sys, state.kin, state.q, state.qd, ctrl, state.act) - bias
    )


@math.full_precision
def constraint_force(
    sys: System, state: State, mass: jax.Array, qfrc_smooth: jax.Array
) -> jax.Array:
    """qfrc_constraint [nv]: joint-limit and contact forces of the soft-constraint solver.

    Given the mass matrix M and qfrc_smooth, the generalized constraint force (J^T lambda) so
    that M qacc = qfrc_smooth + qfrc_constraint (:func:`physics.contact.solve_constraints`
    gives the contacts and forces too).
    """
    return contact.solve_constraints(sys, state, mass, qfrc_smooth).qfrc_constraint


@math.full_precision
def forward(sys: System, state: State, ctrl: jax.Array) -> jax.Array:
    """Contact-free qacc = M^-1 qfrc_smooth (MuJoCo's mj_forward qacc with constraints off)."""
    m = dynamics.mass_matrix(sys, state.kin)
    return linalg.cho_solve(m, smooth_force(sys, state, ctrl))


def _at(sys: System, state: State, q: jax.Array, qd: jax.Array, act: jax.Array) -> State:
    """`state` moved to (q, qd, act): kinematics recomputed, the rest (the solver's warm
    start among it) kept."""
    kin = kinematics.forward_kinematics(sys, q)
    cvel = kinematics.com_velocity(sys, kin.cdof, qd)
    return state._replace(q=q, qd=qd, kin=kin, cvel=cvel, act=act)


def _forward(
    sys: System, state: State, ctrl: jax.Array
) -> tuple[jax.Array, jax.Array, ConstraintResult]:
    """Forward dynamics at `state` (mj_forward): the mass matrix, the smooth force and the
    constraint solve, whose qacc is the constrained acceleration."""
    m = dynamics.mass_matrix(sys, state.kin)
    adhesion = None
    if sys.actuator_adhesion:  # static: their forces act through this step's contacts
        adhesion = dynamics.adhesion_forces(sys, ctrl, state.act)
    qfrc_smooth = smooth_force(sys, state, ctrl)
    return m, qfrc_smooth, contact.solve_constraints(sys, state, m, qfrc_smooth, adhesion)


def _advance(
    sys: System,
    state: State,
    qacc: jax.Array,
    act_dot: jax.Array,
    res: ConstraintResult,
    qd_for_q: jax.Array | None = None,
) -> State:
    """MuJoCo's mj_advance: qd += dt qacc, q integrated with `qd_for_q` (default: the new
    qd, semi-implicit), act advanced at `act_dot`; the step's solve `res` is recorded."""
    dt = sys.timestep
    qd = state.qd + dt * qacc
    q = kinematics.integrate_position(sys, state.q, qd if qd_for_q is None else qd_for_q, dt)
    act = dynamics.advance_activation(sys, state.act, act_dot, dt)
    new = _at(sys, state, q, qd, act)
    return new._replace(
        time=state.time + dt,
        qacc=res.qacc,
        qfrc_constraint=res.qfrc_constraint,
        contact=res.contact,
        cfrc_ext=res.cfrc_ext,
    )


def _free_blocks(sys: System) -> np.ndarray:
    """[nv, nv] bool: the 6x6 blocks of free joints that move rigid subtrees (no other joint
    below them): MuJoCo's free bodies, whose blocks implicitfast solves with their bias
    derivative."""
    topo = sys.topology
    mask = np.zeros((sys.nv, sys.nv), bool)
    for j in topo.free_joints:
        dofs = topo.body_dof[:, topo.jnt_dofadr[j]] > 0  # bodies this joint moves...
        if np.count_nonzero(topo.body_dof[dofs].sum(0)) == 6:  # ...move by its dofs alone
            r = slice(topo.jnt_dofadr[j], topo.jnt_dofadr[j] + 6)
            mask[r, r] = True
    return mask


@math.full_precision
def velocity_derivative(sys: System, state: State, ctrl: jax.Array) -> jax.Array:
    """[nv, nv] d qfrc_smooth / d qd at `state`, as MuJoCo's implicit integrators take it
    (qDeriv): the passive, fluid and actuator forces' Jacobian, minus the bias forces' for
    implicit. implicitfast leaves the bias (Coriolis, centrifugal, gyroscopic) term out, except
    on the blocks of childless free bodies, which MuJoCo solves apart with it, and takes the
    fluid forces' derivative symmetrized, as MuJoCo's mjd_ellipsoidFluid does. Joint actuator
    force limits (actuatorfrcrange) are not differentiated, as in MuJoCo. Like MuJoCo's
    qDeriv it is kept on M's sparsity (dof pairs on one path to the root): a tendon across
    branches (a gripper's two fingers) couples them in its damping and actuator terms, and
    MuJoCo leaves those couplings out."""
    kin = state.kin

    def velocity_forces(qd: jax.Array) -> jax.Array:
        f = dynamics.passive_force(sys, kin, state.q, qd)
        return f + dynamics.actuator_force(
            sys, kin, state.q, qd, ctrl, state.act, clip_joint_totals=False
        )

    def fluid_forces(qd: jax.Array) -> jax.Array:
        return fluid.fluid_force(sys, kin, kinematics.com_velocity(sys, kin.cdof, qd))

    def bias(qd: jax.Array) -> jax.Array:
        return dynamics.bias_force(sys, kin, kinematics.com_velocity(sys, kin.cdof, qd), qd)

    deriv = jax.jacfwd(velocity_forces)(state.qd)
    if sys.fluid:
        medium = jax.jacfwd(fluid_forces)(state.qd)
        if sys.integrator == "implicitfast":
            # MuJoCo symmetrizes each fluid ellipsoid's 6x6 derivative B for implicitfast;
            # J^T sym(B) J is the symmetric part of J^T B J, and the inertia-box model's B is
            # diagonal, so symmetrizing the whole fluid term does the same. A childless free
            # body's block, which MuJoCo 4 solves apart by LU, keeps it as it is (measured)
            medium = jnp.where(_free_blocks(sys), medium, 0.5 * (medium + medium.T))
        deriv = deriv + medium
    if sys.integrator == "implicit":
        deriv = deriv - jax.jacfwd(bias)(state.qd)
    elif (free := _free_blocks(sys)).any():
        deriv = deriv - jnp.where(free, jax.jacfwd(bias)(state.qd), 0.0)
    return jnp.where(sys.topology.dof_chain, deriv, 0.0)


def _implicit_acceleration(
    sys: System, state: State, ctrl: jax.Array, m: jax.Array, qfrc: jax.Array, qacc: jax.Array
) -> jax.Array:
    """The Euler and implicit integrators' acceleration (M + dt B)^-1 (f + f_c), B the
    implicit damping: diag(joint damping) for Euler (eulerdamp), -qDeriv for the implicit
    ones; `qfrc` is f + f_c, `qacc` the solve's.

    A converged solve has M qacc = f + f_c, and the acceleration is written
    qacc - (M + dt B)^-1 dt B qacc: solving for f + f_c instead loses float32 digits to
    cancellation when constraint forces are large and M is ill-conditioned (M^-1 amplifies
    f_c's rounding). A solve the model caps (`System.capped_solve`) stops short of that
    balance, and MuJoCo integrates f + f_c then, as here: with `<option iterations="1">` and
    Euler, Ant's first contact otherwise moved qvel 3.0 away from MuJoCo's."""
    dt = sys.timestep
    if sys.integrator == "Euler":
        if sys.disable_eulerdamp or sys.disable_damper:  # (damping explicit, or none)
            return qacc
        damp = dt * sys.dof_damping
        damped, matrix = damp * qacc, m + jnp.diag(damp)
        solve = linalg.cho_solve
    else:
        damp = -dt * velocity_derivative(sys, state, ctrl)
        damped, matrix = damp @ qacc, m + damp
        symmetric = sys.integrator == "implicitfast" and not _free_blocks(sys).any()
        solve = linalg.cho_solve if symmetric else jnp.linalg.solve
    if not sys.capped_solve:
        return qacc - solve(matrix, damped)
    if sys.integrator == "Euler":  # MuJoCo's Euler integrates implicitly only with damping
        return jnp.where(jnp.any(damp > 0), solve(matrix, qfrc), qacc)
    return solve(matrix, qfrc)


# The classical Runge-Kutta tableau: row i weighs the stages before stage i (stage 0 is the
# state itself)
_RK4_A = ((0, 0, 0, 0), (0.5, 0, 0, 0), (0, 0.5, 0, 0), (0, 0, 1, 0))
_RK4_B = (1 / 6, 1 / 3, 1 / 3, 1 / 6)


def _dexp_inv(sys: System, offset: jax.Array, qd: jax.Array) -> jax.Array:
    """qd with each joint rotation's angular velocity w carried to the Lie algebra at the
    rotation offset o (the stage's, dt-scaled): w + o x w / 2 + o x (o x w) / 12, the
    Runge-Kutta-Munthe-Kaas correction MuJoCo's RK4 applies to ball and free joints."""
    rot = kinematics.rotation_addresses(sys)[1]
    if not rot.size:
        return qd
    o, w = offset[rot], qd[rot]
    ow = jnp.cross(o, w)
    return qd.at[rot].set(w + 0.5 * ow + jnp.cross(o, ow) / 12.0)


def _rk4_substep(sys: System, state: State, ctrl: jax.Array) -> State:
    """MuJoCo's mj_RungeKutta(4): stage i evaluates forward dynamics at X0 + dt sum_j A_ij F_j,
    the step takes X0 + dt sum_j B_j F_j. Joint rotations move on the manifold as MuJoCo's
    Runge-Kutta-Munthe-Kaas scheme does: a stage's angular velocity enters the sums through
    the inverse exponential map at that stage's rotation offset (`_dexp_inv`). The stages scan
    over one traced forward evaluation; the state records the last stage's solve (as MuJoCo's
    mjData holds it after the step), whose qacc is also the next warm start."""
    dt = sys.timestep
    a = jnp.asarray(_RK4_A, state.qd.dtype)

    def stage(carry, i):  # noqa: ANN001, ANN202
        vels, qaccs, act_dots = carry  # [4, ...]: each stage's (corrected) qd, qacc, act_dot
        w = a[i]
        vel = w @ vels
        q = kinematics.integrate_position(sys, state.q, vel, dt)
        q = jnp.where(i == 0, state.q, q)  # stage 0 is exactly the state
        x = _at(sys, state, q, state.qd + dt * (w @ qaccs), state.act + dt * (w @ act_dots))
        _, _, res = _forward(sys, x, ctrl)
        act_dot = dynamics.activation_rate(sys, x.act, ctrl)
        vels = vels.at[i].set(_dexp_inv(sys, dt * vel, x.qd))
        return (vels, qaccs.at[i].set(res.qacc), act_dots.at[i].set(act_dot)), res

    zeros = jnp.zeros((4,) + state.qd.shape, state.qd.dtype)
    init = (zeros, zeros, jnp.zeros((4,) + state.act.shape, state.act.dtype))
    (vels, qaccs, act_dots), res = jax.lax.scan(stage, init, jnp.arange(4))
    b = jnp.asarray(_RK4_B, state.qd.dtype)
    last = jax.tree_util.tree_map(lambda x: x[-1], res)
    return _advance(sys, state, b @ qaccs, b @ act_dots, last, qd_for_q=b @ vels)


def _substep(sys: System, state: State, ctrl: jax.Array) -> State:
    if sys.integrator == "RK4":
        return _rk4_substep(sys, state, ctrl)
    m, qfrc_smooth, res = _forward(sys, state, ctrl)
    qfrc = qfrc_smooth + res.qfrc_constraint
    qacc = _implicit_acceleration(sys, state, ctrl, m, qfrc, res.qacc)
    return _advance(sys, state, qacc, dynamics.activation_rate(sys, state.act, ctrl), res)


@math.full_precision
def step(sys: System, state: State, ctrl: jax.Array, n_substeps: int = 1) -> State:
    """Advances ``n_substeps`` timesteps with ``ctrl`` held (lax.scan over substeps).

    Jit with ``n_substeps`` static, e.g. ``jax.jit(step, static_argnames="n_substeps")``.
    """
    if sys.integrator not in INTEGRATORS:  # e.g. a System edited with dataclasses.replace
        raise ValueError(f"integrator={sys.integrator!r} must be one of {INTEGRATORS}")
    ctrl = jnp.asarray(ctrl, state.qd.dtype)
    if n_substeps == 1:
        return _substep(sys, state, ctrl)
    state, _ = jax.lax.scan(
        lambda s, _: (_substep(sys, s, ctrl), None), state, None, length=n_substeps
    )
    return state
