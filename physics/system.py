"""The System pytree: everything a step needs to know about a model.

Arrays (masses, offsets, axes, ...) are pytree leaves, so they can be traced, vmapped over (domain
randomisation) or differentiated. The kinematic tree (parents, joint types, index maps) is static
Python data held in :class:`Topology`, from which the index arrays and 0/1 tree matrices that let
the per-step code run vectorised over bodies are derived once per model.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from physics.constraints import MujocoSearch
from physics.mesh import Hull

# Joint and geom type codes are MuJoCo's (mjtJoint, mjtGeom).
JNT_FREE, JNT_BALL, JNT_SLIDE, JNT_HINGE = 0, 1, 2, 3
# Equality constraint types (MuJoCo's mjtEq; EQ_TENDON couples tendons).
EQ_CONNECT, EQ_WELD, EQ_JOINT, EQ_TENDON = 0, 1, 2, 3
JNT_NQ = {JNT_FREE: 7, JNT_BALL: 4, JNT_SLIDE: 1, JNT_HINGE: 1}
JNT_NV = {JNT_FREE: 6, JNT_BALL: 3, JNT_SLIDE: 1, JNT_HINGE: 1}
GEOM_PLANE, GEOM_HFIELD, GEOM_SPHERE, GEOM_CAPSULE, GEOM_ELLIPSOID = 0, 1, 2, 3, 4
GEOM_CYLINDER, GEOM_BOX, GEOM_MESH = 5, 6, 7
DYN_MUSCLE = 4  # MuJoCo's mjDYN_MUSCLE (mjtDyn)
INTEGRATORS = ("Euler", "RK4", "implicit", "implicitfast")  # MuJoCo's mjtIntegrator order


@dataclasses.dataclass(frozen=True)
class Topology:
    """Static structure of the kinematic tree (hashable: it is a jit-static part of System).

    Bodies, joints and dofs are numbered in MuJoCo's order (depth-first, document order); body 0
    is the world.
    """

    body_parent: tuple[int, ...]  # parent body of each body (-1 for the world)
    jnt_type: tuple[int, ...]
    jnt_body: tuple[int, ...]

    @property
    def nbody(self) -> int:
        return len(self.body_parent)

    @property
    def njnt(self) -> int:
        return len(self.jnt_type)

    @functools.cached_property
    def jnt_qposadr(self) -> np.ndarray:
        return np.cumsum([0] + [JNT_NQ[t] for t in self.jnt_type])[:-1].astype(np.int32)

    @functools.cached_property
    def jnt_dofadr(self) -> np.ndarray:
        return np.cumsum([0] + [JNT_NV[t] for t in self.jnt_type])[:-1].astype(np.int32)

    @property
    def nq(self) -> int:
        return int(sum(JNT_NQ[t] for t in self.jnt_type))

    @property
    def nv(self) -> int:
        return int(sum(JNT_NV[t] for t in self.jnt_type))

    @functools.cached_property
    def dof_jnt(self) -> np.ndarray:
        return np.repeat(np.arange(self.njnt), [JNT_NV[t] for t in self.jnt_type]).astype(np.int32)

    @functools.cached_property
    def dof_body(self) -> np.ndarray:
        return np.asarray(self.jnt_body, np.int32)[self.dof_jnt]

    @functools.cached_property
    def body_depth(self) -> np.ndarray:
        depth = np.zeros(self.nbody, np.int32)
        for b in range(1, self.nbody):
            depth[b] = depth[self.body_parent[b]] + 1
        return depth

    @functools.cached_property
    def body_root(self) -> np.ndarray:
        """The child of the world whose tree holds each body (0 for the world)."""
        root = np.zeros(self.nbody, np.int32)
        for b in range(1, self.nbody):
            p = self.body_parent[b]
            root[b] = b if p == 0 else root[p]
        return root

    @functools.cached_property
    def body_tree(self) -> np.ndarray:
        """MuJoCo's body_treeid: the kinematic tree of each body's dofs, numbered in dof order,
        -1 for bodies no joint moves. A tree starts at a jointed body whose ancestors have no
        joints (so a fixed base's jointed branches are trees of their own)."""
        jointed = np.zeros(self.nbody, bool)
        jointed[list(self.jnt_body)] = True
        top = np.full(self.nbody, -1, np.int32)  # each body's topmost jointed ancestor
        for b in range(1, self.nbody):
            p = self.body_parent[b]
            top[b] = top[p] if top[p] >= 0 else (b if jointed[b] else -1)
        roots = [int(r) for r in dict.fromkeys(top[self.dof_body])]  # in dof order
        tree = np.full(self.nbody, -1, np.int32)
        for number, root in enumerate(roots):
            tree[top == root] = number
        return tree

    @property
    def ntree(self) -> int:
        return int(self.body_tree.max(initial=-1)) + 1

    @functools.cached_property
    def dof_tree(self) -> np.ndarray:
        return self.body_tree[self.dof_body]

    @functools.cached_property
    def levels(self) -> tuple[np.ndarray, ...]:
        """Bodies grouped by depth (world excluded): a level only depends on earlier levels."""
        d = self.body_depth
        return tuple(np.nonzero(d == k)[0].astype(np.int32) for k in range(1, int(d.max()) + 1))

    @functools.cached_property
    def body_ancestor(self) -> np.ndarray:
        """A[i, j] = 1 if body i is body j or one of its ancestors (world excluded)."""
        a = np.zeros((self.nbody, self.nbody), np.float32)
        for j in range(1, self.nbody):
            i = j
            while i > 0:
                a[i, j] = 1.0
                i = self.body_parent[i]
        return a

    @functools.cached_property
    def body_dof(self) -> np.ndarray:
        """[nbody, nv]: 1 where the dof moves the body (it sits on the body or an ancestor)."""
        return self.body_ancestor[self.dof_body, :].T.copy()

    @functools.cached_property
    def dof_ancestor(self) -> np.ndarray:
        """[nv, nv]: 1 where dof i is dof j or precedes it on j's path to the root."""
        b = self.dof_body
        same_or_before = np.arange(self.nv)[:, None] <= np.arange(self.nv)[None, :]
        anc = self.body_ancestor[b[:, None], b[None, :]] > 0
        strict = anc & (b[:, None] != b[None, :])
        return (strict | ((b[:, None] == b[None, :]) & same_or_before)).astype(np.float32)

    @functools.cached_property
    def dof_chain(self) -> np.ndarray:
        """[nv, nv] bool: dof pairs on one path to the root, M's sparsity (and MuJoCo's
        qDeriv's)."""
        return (self.dof_ancestor + self.dof_ancestor.T) > 0

    @functools.cached_property
    def dof_moving_frame(self) -> np.ndarray:
        """[nv, nv]: 1 where dof i moves the frame that carries dof j's axis.

        Strict ancestors, except that the three rotational dofs of a ball or free joint share
        one body-fixed frame (MuJoCo computes their cdof_dot from the velocity before them).
        """
        m = self.dof_ancestor - np.eye(self.nv, dtype=np.float32)
        for j, t in enumerate(self.jnt_type):
            if t in (JNT_BALL, JNT_FREE):
                r = self.jnt_dofadr[j] + (3 if t == JNT_FREE else 0) + np.arange(3)
                m[np.ix_(r, r)] = 0.0
        return m

    @functools.cached_property
    def free_joints(self) -> np.ndarray:
        return np.asarray([j for j, t in enumerate(self.jnt_type) if t == JNT_FREE], np.int32)

    @functools.cached_property
    def max_body_joints(self) -> int:
        return max([self.jnt_body.count(b) for b in range(self.nbody)] + [0])


TendonPath = tuple[tuple[tuple[int, float], ...], tuple[tuple[int, int, float, int, int], ...]]
"""A tendon's length terms: its (joint, coef) pairs (a fixed tendon: sum of coef q; a joint
is ((j, 1.0),)) and its (site a, site b, scale, geom, side site) segments (a spatial tendon:
sum of scale |x_b - x_a|, scale 1/divisor of the pulley branch; where geom >= 0, the path
from a to b over that sphere or cylinder, kept on side site's side where side >= 0); see
physics.tendon."""
NO_TENDON: TendonPath = ((), ())
"""The empty path (length 0): the missing second object of a one-sided coupling."""


def _static(**kw: object) -> dataclasses.Field:
    return dataclasses.field(metadata={"static": True}, **kw)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class System:
    """A model ready to simulate; built by :func:`physics.load_mjcf`.

    Quantities use MuJoCo's names and meanings. Inertias are full 3x3 tensors about the centre
    of mass in the body frame. Unlimited ranges are (-inf, inf).
    """

    # options
    timestep: jax.Array  # []
    gravity: jax.Array  # [3]
    density: jax.Array  # [] of the medium (fluid forces, physics.fluid)
    viscosity: jax.Array  # [] of the medium
    wind: jax.Array  # [3] velocity of the medium
    # MuJoCo's contact override (<flag override="enable">, static enable_override): every
    # contact, geom pair or explicit pair, takes these in place of its own parameters
    o_margin: jax.Array  # []
    o_solref: jax.Array  # [2] (friction rows too: it also replaces a pair's solreffriction)
    o_solimp: jax.Array  # [5]
    o_friction: jax.Array  # [5] sliding (2), torsional, rolling (2)
    # bodies
    body_pos: jax.Array  # [nbody, 3] offset in the parent frame
    body_quat: jax.Array  # [nbody, 4]
    body_mass: jax.Array  # [nbody]
    body_ipos: jax.Array  # [nbody, 3] centre of mass in the body frame
    body_inertia: jax.Array  # [nbody, 3, 3] about the centre of mass, body frame
    body_iframe: jax.Array  # [nbody, 3, 3] principal axes (columns) in the body frame
    # MuJoCo's gravcomp: this fraction of the body's weight is cancelled by a passive force at
    # its centre of mass (gravcomp_bodies: the bodies with one)
    body_gravcomp: jax.Array  # [nbody]
    # joints and dofs
    # [njnt, 2] the joint's total actuator force is clipped to this ((-inf, inf): no limit)
    jnt_actfrcrange: jax.Array
    jnt_pos: jax.Array  # [njnt, 3] anchor in the body frame
    jnt_axis: jax.Array  # [njnt, 3] unit axis in the body frame (hinge, slide)
    jnt_range: jax.Array  # [njnt, 2] (radians for hinge and ball)
    jnt_margin: jax.Array  # [njnt]
    jnt_solref: jax.Array  # [njnt, 2] solreflimit
    jnt_solimp: jax.Array  # [njnt, 5] solimplimit
    jnt_stiffness: jax.Array  # [njnt]
    dof_armature: jax.Array  # [nv]
    dof_damping: jax.Array  # [nv]
    dof_frictionloss: jax.Array  # [nv] dry friction: |force| <= frictionloss (a constraint row)
    dof_solref: jax.Array  # [nv, 2] solreffriction
    dof_solimp: jax.Array  # [nv, 5] solimpfriction
    qpos0: jax.Array  # [nq] reference configuration (joint ref; free body pose)
    qpos_spring: jax.Array  # [nq] spring rest configuration (springref)
    # geoms
    geom_size: jax.Array  # [ngeom, 3]
    geom_pos: jax.Array  # [ngeom, 3] in the body frame
    geom_quat: jax.Array  # [ngeom, 4]
    geom_friction: jax.Array  # [ngeom, 3] sliding, torsional, rolling
    geom_margin: jax.Array  # [ngeom]
    geom_solref: jax.Array  # [ngeom, 2]
    geom_solimp: jax.Array  # [ngeom, 5]
    geom_solmix: jax.Array  # [ngeom]
    # [ngeom, 12] MuJoCo's geom_fluid: on (1 for fluidshape="ellipsoid"), the fluidcoef drag and
    # lift coefficients (blunt, slender, angular, Kutta, Magnus), virtual mass [3] and virtual
    # inertia [3] of the equivalent ellipsoid (physics.fluid)
    geom_fluid: jax.Array
    # convex hulls of the mesh geoms that collide (a physics.mesh.Hull of tables with a leading
    # [nhull] axis, padded to one size; geom_hull gives each geom's row)
    mesh_hull: Hull
    # height fields (<asset><hfield>): [nhfield, rows, cols] terrain heights in the hfield's
    # frame (MuJoCo's normalised elevation times size[2]), zero-padded to one shape; a leaf, so
    # terrains can be randomised per world. Their grids and sizes are static (hfield_grid,
    # hfield_size), as is the window each pair searches (physics.hfield)
    hfield_data: jax.Array
    # explicit contact pairs (<contact><pair>): the first len(pair_condim) of contact_pairs,
    # with their own parameters in place of the two geoms' mix
    pair_friction: jax.Array  # [npair, 5] sliding (2), torsional, rolling (2)
    pair_solref: jax.Array  # [npair, 2]
    pair_solreffriction: jax.Array  # [npair, 2] an elliptic cone's friction rows; 0 0: solref
    pair_solimp: jax.Array  # [npair, 5]
    pair_margin: jax.Array  # [npair]
    # sites: frames fixed to bodies (where spatial tendons run; what environments measure)
    site_pos: jax.Array  # [nsite, 3] in the body frame
    site_quat: jax.Array  # [nsite, 4]
    # actuators on hinge/slide joints or tendons:
    # force = gain * ctrl + bias . (1, gear length, gear velocity)
    # tendons with a spring or damper (spring_tendons): force = stiffness * (clip(L, lo, hi) -
    # L) - damping * dL/dt along the tendon (lengthspring (lo, hi): a deadband); L: see
    # physics.tendon
    tendon_stiffness: jax.Array  # [nten]
    tendon_damping: jax.Array  # [nten]
    tendon_lengthspring: jax.Array  # [nten, 2]
    # tendons with armature (armature_tendons): inertia armature * J^T J in M, on M's sparsity
    # (ancestor pairs), as MuJoCo's mj_tendonArmature, and the bias J^T armature (dJ/dt qd)
    tendon_armature: jax.Array  # [nta]
    # tendons with a limit or friction loss (constrained_tendons): constraint rows
    tendon_range: jax.Array  # [ntc, 2] (where limited)
    tendon_margin: jax.Array  # [ntc]
    tendon_solref_limit: jax.Array  # [ntc, 2]
    tendon_solimp_limit: jax.Array  # [ntc, 5]
    tendon_frictionloss: jax.Array  # [ntc] (0: none)
    tendon_solref_friction: jax.Array  # [ntc, 2]
    tendon_solimp_friction: jax.Array  # [ntc, 5]
    actuator_gear: jax.Array  # [nu]
    actuator_gain: jax.Array  # [nu, 3] gain = g0 + g1 * length + g2 * velocity
    actuator_bias: jax.Array  # [nu, 3]
    actuator_ctrlrange: jax.Array  # [nu, 2]
    actuator_forcerange: jax.Array  # [nu, 2]
    # activation dynamics (actuator_dyntype > 0): the force takes act, the actuator's state,
    # in ctrl's place; integrator act' = ctrl, filter(exact) act' = (ctrl - act) / tau, muscle
    # physics.muscle.activation_rate
    actuator_dynprm: jax.Array  # [nu, 3] filters: (tau, 0, 0); muscles: (tau_act, tau_deact, width)
    actuator_actrange: jax.Array  # [nu, 2] act is clipped to it ((-inf, inf): unlimited)
    # muscles (physics.muscle): MuJoCo's gainprm and biasprm of a muscle gain or bias (range,
    # force resolved at load, scale, lmin, lmax, vmax, fpmax, fvmax), and the actuator lengths
    # the muscle is normalized by (MuJoCo's actuator_lengthrange, computed at load)
    actuator_muscle_gainprm: jax.Array  # [nu, 9] (0 where the gain is not a muscle's)
    actuator_muscle_biasprm: jax.Array  # [nu, 9]
    actuator_lengthrange: jax.Array  # [nu, 2]
    # equality constraints, all active: connect (a ball joint between two bodies' anchors), weld
    # (a rigid joint) and joint/tendon couplings, value1 - ref1 = polycoef(value2 - ref2) (refs:
    # values at qpos0). eq_data as MuJoCo's: connect: anchor in body1, anchor in body2; weld:
    # anchor in body2, anchor in body1, relative quaternion, torquescale; else polycoef[:5]
    eq_data: jax.Array  # [neq, 11]
    eq_solref: jax.Array  # [neq, 2]
    eq_solimp: jax.Array  # [neq, 5]
    eq_ref: jax.Array  # [neq, 2] couplings: each side's value (joint position, length) at qpos0
    # constants MuJoCo computes at qpos0 (mj_setConst): diagonal approximations of J M^-1 J^T
    body_invweight0: jax.Array  # [nbody, 2] translation, rotation
    dof_invweight0: jax.Array  # [nv]
    eq_invweight0: jax.Array  # [neq, 2] of its translational, rotational rows (objects' summed)
    tendon_invweight0: jax.Array  # [ntc] J M^-1 J^T of each constrained tendon
    # static structure
    topology: Topology = _static()
    jnt_limited: tuple[bool, ...] = _static()
    geom_type: tuple[int, ...] = _static()
    geom_body: tuple[int, ...] = _static()
    geom_contype: tuple[int, ...] = _static()
    geom_conaffinity: tuple[int, ...] = _static()
    geom_condim: tuple[int, ...] = _static()
    geom_priority: tuple[int, ...] = _static()
    # per actuator, its transmission as a tendon path (a joint j: (((j, 1.0),), ()))
    actuator_transmission: tuple[TendonPath, ...] = _static()
    # tendons with a spring or damper, as physics.tendon paths
    spring_tendons: tuple[TendonPath, ...] = _static()
    exclude_pairs: tuple[tuple[int, int], ...] = _static()  # body pairs from <contact><exclude>
    body_names: tuple[str, ...] = _static()
    jnt_names: tuple[str, ...] = _static()
    geom_names: tuple[str, ...] = _static()
    actuator_names: tuple[str, ...] = _static()
    contact_pairs: tuple[tuple[int, int], ...] = _static(default=())  # candidate geom pairs
    geom_hull: tuple[int, ...] = _static(default=())  # per geom: row of mesh_hull, or -1
    geom_hfield: tuple[int, ...] = _static(default=())  # per geom: its height field, or -1
    # per geom: radius of its bounding sphere at load (sizes a height-field pair's window)
    geom_rbound: tuple[float, ...] = _static(default=())
    hfield_grid: tuple[tuple[int, int], ...] = _static(default=())  # (nrow, ncol) each
    # (x half-size, y half-size, top height, base depth) each, MuJoCo's hfield size
    hfield_size: tuple[tuple[float, float, float, float], ...] = _static(default=())
    gravcomp_bodies: tuple[int, ...] = _static(default=())
    # per joint: its share of gravity compensation counts as actuator force (limited with it)
    jnt_actgravcomp: tuple[bool, ...] = _static(default=())
    jnt_actfrclimited: tuple[bool, ...] = _static(default=())  # an actuatorfrcrange applies
    pair_condim: tuple[int, ...] = _static(default=())  # explicit pairs' condim
    disable_contact: bool = _static(default=False)  # MuJoCo's mjDSBL_CONTACT
    disable_limit: bool = _static(default=False)  # MuJoCo's mjDSBL_LIMIT
    disable_frictionloss: bool = _static(default=False)  # MuJoCo's mjDSBL_FRICTIONLOSS
    disable_equality: bool = _static(default=False)  # MuJoCo's mjDSBL_EQUALITY
    disable_eulerdamp: bool = _static(default=False)  # mjDSBL_EULERDAMP: damping explicit
    disable_spring: bool = _static(default=False)  # mjDSBL_SPRING: no joint or tendon springs
    disable_damper: bool = _static(default=False)  # mjDSBL_DAMPER: no joint or tendon damping
    disable_actuation: bool = _static(default=False)  # mjDSBL_ACTUATION: no actuator force
    disable_clampctrl: bool = _static(default=False)  # mjDSBL_CLAMPCTRL: ctrl not clipped
    # mjDSBL_ISLAND: a capped solve (capped_solve) searches all dofs as one, not per island
    disable_island: bool = _static(default=False)
    enable_override: bool = _static(default=False)  # mjENBL_OVERRIDE: contacts take o_*
    # tendons with a limit or friction loss, as physics.tendon paths, and which are limited
    constrained_tendons: tuple[TendonPath, ...] = _static(default=())
    tendon_limited: tuple[bool, ...] = _static(default=())
    tendon_friction: tuple[int, ...] = _static(default=())  # of those, with friction loss > 0
    actuator_dyntype: tuple[int, ...] = _static(default=())  # MuJoCo's mjtDyn: 0 none, 1..4
    actuator_muscle_gain: tuple[int, ...] = _static(default=())  # actuators with a muscle gain
    actuator_muscle_bias: tuple[int, ...] = _static(default=())  # and with a muscle bias
    # per actuator: its force takes the activation at the step's end (MuJoCo's actearly)
    actuator_actearly: tuple[bool, ...] = _static(default=())
    eq_type: tuple[int, ...] = _static(default=())  # EQ_CONNECT, EQ_WELD, EQ_JOINT, EQ_TENDON
    # connect, weld: the two bodies ((b1,), (b2,)); joint/tendon: each side's tendon path (a
    # joint is (((j, 1.0),), ()); side 2 is NO_TENDON when the equality names one object)
    eq_obj1: tuple[tuple, ...] = _static(default=())
    eq_obj2: tuple[tuple, ...] = _static(default=())
    dof_friction: tuple[int, ...] = _static(default=())  # dofs with frictionloss > 0
    # actuators on sites: (actuator, site, wrench gear (force xyz, torque xyz) in the site frame,
    # refsite or -1)
    actuator_site: tuple[tuple[int, int, tuple[float, ...], int], ...] = _static(default=())
    # actuators on ball and free joints: (actuator, joint, gear (6 numbers), whether the gear's
    # rotation axis is in the parent's frame: jointinparent)
    actuator_ball_free: tuple[tuple[int, int, tuple[float, ...], bool], ...] = _static(default=())
    # tendons with actuatorfrcrange: (the actuators on the tendon, lo, hi) for each; their
    # forces are scaled together so that their sum stays in [lo, hi]
    tendon_actuator_force_limits: tuple[tuple[tuple[int, ...], float, float], ...] = _static(
        default=()
    )
    armature_tendons: tuple[TendonPath, ...] = _static(default=())  # see tendon_armature
    # ball and free joints with stiffness (their springs turn on the rotation from qpos_spring)
    ball_free_springs: tuple[int, ...] = _static(default=())
    # slider-crank actuators: (actuator, crank site, slider site, connecting rod's length)
    actuator_slider_crank: tuple[tuple[int, int, int, float], ...] = _static(default=())
    # (actuator, body) of body transmissions (MuJoCo's adhesion): the force pulls the body
    # toward what it touches, split evenly over its contacts (physics.contact)
    actuator_adhesion: tuple[tuple[int, int], ...] = _static(default=())
    site_body: tuple[int, ...] = _static(default=())
    site_names: tuple[str, ...] = _static(default=())
    # mocap bodies (children of the world without joints, MuJoCo's mocap="true"): placed by
    # body_pos/body_quat in the world frame, which a caller replaces to move them, as MuJoCo's
    # mocap_pos/mocap_quat (`System.with_mocap`)
    mocap_bodies: tuple[int, ...] = _static(default=())
    solver_iterations: int = _static(default=100)  # <option iterations>: hint for the solver
    noslip_iterations: int = _static(default=0)  # <option noslip_iterations>: physics.noslip
    cone: str = _static(default="pyramidal")
    impratio: float = _static(default=1.0)
    fluid: bool = _static(default=False)  # density or viscosity > 0: fluid forces are computed
    # geoms with fluidshape="ellipsoid": their bodies take the ellipsoid model, not the box one
    fluid_ellipsoids: tuple[int, ...] = _static(default=())
    integrator: str = _static(default="Euler")  # <option integrator>: one of INTEGRATORS
    # Contact slots solved per substep: None solves every active one (as MuJoCo does); a number
    # keeps only that many deepest (faster; exact while no more are active). Random-control
    # rollouts: ant <= 6 active of its 25 slots, humanoid <= 10 of 190 (over 8 in 2 of 9600
    # env steps). Set with load_mjcf(..., max_contacts=K).
    max_contacts: int | None = _static(default=None)
    # Newton steps of the constraint solve per substep (fixed: worlds stay in lockstep). Set with
    # load_mjcf(..., newton_steps=N); see physics.contact.NEWTON_STEPS for how many are enough.
    newton_steps: int = _static(default=8)
    # How each Newton step forms J^T D J (physics.constraints.HESSIAN_FORMS). Set with
    # load_mjcf(..., hessian_form=F).
    hessian_form: str = _static(default="broadcast")
    # The model's <option iterations> caps the Newton solve (at no more than the newton_steps
    # asked for): MuJoCo stops there, short of the optimum, and its integrators then take the
    # forces f + f_c rather than M qacc (physics.step); set by load_mjcf.
    capped_solve: bool = _static(default=False)
    # MuJoCo's own line search with the model's limits, where the solve is capped and its line
    # search limited to few evaluations (files tuned for MJX); None: the engine's own search
    # (physics.contact). Set by load_mjcf.
    mujoco_search: MujocoSearch | None = _static(default=None)

    @property
    def nbody(self) -> int:
        return self.topology.nbody

    @property
    def njnt(self) -> int:
        return self.topology.njnt

    @property
    def nq(self) -> int:
        return self.topology.nq

    @property
    def nv(self) -> int:
        return self.topology.nv

    @property
    def ngeom(self) -> int:
        return len(self.geom_type)

    @property
    def nsite(self) -> int:
        return len(self.site_body)

    @property
    def nu(self) -> int:
        return len(self.actuator_transmission)

    @property
    def na(self) -> int:
        """Activation states: one per actuator with activation dynamics."""
        return sum(1 for t in self.actuator_dyntype if t)

    def body_id(self, name: str) -> int:
        """Index of the body called ``name``."""
        return self.body_names.index(name)

    def joint_id(self, name: str) -> int:
        """Index of the joint called ``name``."""
        return self.jnt_names.index(name)

    def geom_id(self, name: str) -> int:
        """Index of the geom called ``name``."""
        return self.geom_names.index(name)

    def site_id(self, name: str) -> int:
        """Index of the site called ``name``."""
        return self.site_names.index(name)

    def with_mocap(self, pos: jax.Array | None = None, quat: jax.Array | None = None) -> System:
        """This model with its mocap bodies moved, as MuJoCo's mocap_pos and mocap_quat:
        ``pos`` [nmocap, 3] and ``quat`` [nmocap, 4] (w first, normalized here as MuJoCo does)
        in the world frame, in body order. Traceable: under jit or vmap each world may have
        its own targets (a weld to a mocap body then drags what it holds)."""
        ids = np.asarray(self.mocap_bodies, np.int32)
        body_pos, body_quat = self.body_pos, self.body_quat
        for name, value, width in (("pos", pos, 3), ("quat", quat, 4)):
            if value is not None and jnp.shape(value) != (len(ids), width):
                raise ValueError(
                    f"mocap {name} must be [{len(ids)}, {width}] for this model's "
                    f"{len(ids)} mocap bodies, got shape {jnp.shape(value)}"
                )
        if pos is not None:
            body_pos = body_pos.at[ids].set(jnp.asarray(pos, body_pos.dtype))
        if quat is not None:
            quat = jnp.asarray(quat, body_quat.dtype)
            quat = quat / jnp.linalg.norm(quat, axis=-1, keepdims=True)
            body_quat = body_quat.at[ids].set(quat)
        return dataclasses.replace(self, body_pos=body_pos, body_quat=body_quat)
