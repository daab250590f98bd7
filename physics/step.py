"""State, initialisation and time stepping (MuJoCo's Euler integrator).

One substep, like mj_step with the default integrator: forward dynamics at (q, qd), then
semi-implicit Euler with implicit joint damping, qd' = qd + dt * (M + dt*D)^-1 (f + f_c),
and q' integrated with qd' (quaternions on the manifold for ball and free joints).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from physics import contact, dynamics, fluid, kinematics, math
from physics.contact import ContactState
from physics.kinematics import Kinematics
from physics.system import System


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
    return jsl.cho_solve(jsl.cho_factor(m), smooth_force(sys, state, ctrl))


def _substep(sys: System, state: State, ctrl: jax.Array) -> State:
    dt = sys.timestep
    m = dynamics.mass_matrix(sys, state.kin)
    f = smooth_force(sys, state, ctrl)
    res = contact.solve_constraints(sys, state, m, f)
    fc = res.qfrc_constraint
    # MuJoCo's Euler: damping integrated implicitly, (M + dt*D) qacc = M qacc_forward. As
    # M qacc_forward = f + fc, qacc = qacc_forward - (M + dt*D)^-1 dt*D qacc_forward: solving
    # for f + fc instead loses float32 digits to cancellation when constraint forces are large
    # and M is ill-conditioned (M^-1 amplifies fc's rounding); undamped dofs keep the solver's.
    qacc = res.qacc
    if not sys.disable_eulerdamp:  # (<flag eulerdamp="disable">: damping stays explicit)
        damp = dt * sys.dof_damping
        qacc = qacc - jsl.cho_solve(jsl.cho_factor(m + jnp.diag(damp)), damp * qacc)
    qd = state.qd + dt * qacc
    q = kinematics.integrate_position(sys, state.q, qd, dt)
    kin = kinematics.forward_kinematics(sys, q)
    cvel = kinematics.com_velocity(sys, kin.cdof, qd)
    act = dynamics.next_activation(sys, state.act, ctrl, dt)
    return State(q, qd, state.time + dt, kin, cvel, res.qacc, fc, res.contact, res.cfrc_ext, act)


@math.full_precision
def step(sys: System, state: State, ctrl: jax.Array, n_substeps: int = 1) -> State:
    """Advances ``n_substeps`` timesteps with ``ctrl`` held (lax.scan over substeps).

    Jit with ``n_substeps`` static, e.g. ``jax.jit(step, static_argnames="n_substeps")``.
    """
    ctrl = jnp.asarray(ctrl, state.qd.dtype)
    if n_substeps == 1:
        return _substep(sys, state, ctrl)
    state, _ = jax.lax.scan(
        lambda s, _: (_substep(sys, s, ctrl), None), state, None, length=n_substeps
    )
    return state
