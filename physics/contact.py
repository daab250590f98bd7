"""Contacts and joint limits as MuJoCo soft constraints, wired into the step.

Static part (numpy, from the System's static fields, once per model/trace):

- candidate geom pairs, enumerated when the model is loaded (:func:`contact_pairs`, stored as
  ``System.contact_pairs``) with MuJoCo's filters: contype/conaffinity, no pair within one
  weld body (a body without joints is welded to its parent), no pair between a weld body and
  its weld parent (unless one is the world), ``<contact><exclude>`` body pairs; geom1 has the
  lower type, as MuJoCo orders pairs;
- each pair's fixed number of contact slots (:func:`physics.collision.num_contacts`) and its
  condim (1: frictionless, the normal row; 3: with friction, MuJoCo's pyramidal cone as four
  edge rows, or with ``cone="elliptic"`` the normal and two tangent rows whose joint cost is
  the elliptic cone's, :class:`physics.constraints.Cones`);
- the limited hinge/slide joints (two rows each: lower, upper).

Per substep (traced, branchless): every candidate pair is collided (one vmapped call per pair
type); a slot is active when ``dist < margin``; contact parameters are mixed as MuJoCo's
``mj_collideGeoms``/``mj_contactParam`` (summed margins, max friction, solref/solimp
mixed by solmix, priority wins);
with ``System.max_contacts`` set, only that many deepest slots (a branchless top-k; all active
ones unless more are active) get solver rows, joint limits are unit rows (no dense products);
rows are built, inactive ones masked, and :func:`physics.constraints.solve` runs a fixed number
(``System.newton_steps``) of Newton steps warm-started from the previous qacc (or qacc_smooth
when that costs less, as MuJoCo chooses). ``body_invweight0``/``dof_invweight0`` (MuJoCo's
diagonal approximations, computed at qpos0 by the loader) give the regularizer of each row.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from physics import collision as col
from physics import constraints as con
from physics import (
    dynamics,
    equality,
    hfield,
    kinematics,
    linalg,
    math,
    noslip,
    tendon,
    xla_cpu,
)
from physics.mesh import Hull
from physics.system import (
    GEOM_HFIELD,
    GEOM_MESH,
    GEOM_PLANE,
    JNT_BALL,
    JNT_HINGE,
    JNT_SLIDE,
    System,
    Topology,
)

# Fixed Newton steps per substep (System.newton_steps), the default of load_mjcf. Warm-started
# from the previous substep's qacc the solve reaches MuJoCo's optimum in 2-3 steps on the
# gymnasium models, which the locomotion envs solve with 4; stiffer contacts and limits need
# more: with dm_control's humanoid parameters (solref .015, solimp .9 .99 .003) 4 and 5 steps
# drift from MuJoCo by O(1) within 100 steps, 6 and 8 stay within 1e-4. The cost is linear in
# the count (Ant: 8 steps run at about 0.7 of 4's speed).
NEWTON_STEPS = 8
# "newton": O(rows) per step; "exact" (closed form) is O(rows^2), which dominated the step
# (ant has 116 rows, mostly masked). Models with friction loss use "exact": its rows bend the
# 1-D cost twice each, and 6 safeguarded Newton steps then often stop short of the minimum
# (measured: 8 of 200 random searches off, and trajectories that left MuJoCo's).
LINE_SEARCH = "newton"


class ContactState(NamedTuple):
    """Contact slots of one substep (all candidate slots; inactive ones have zero force).

    ``force`` is in the contact frame (normal, tangent1, tangent2): the force geom1 exerts on
    geom2 (MuJoCo's ``mj_contactForce``); :func:`contact_forces` gives it in world frame.
    """

    dist: jax.Array  # [ncon] signed distance (FAR for unused slots)
    pos: jax.Array  # [ncon, 3] world position
    frame: jax.Array  # [ncon, 3, 3] rows: normal (geom1 -> geom2), tangent1, tangent2
    force: jax.Array  # [ncon, 3] contact-frame force on geom2, zero when inactive
    # [ncon, 3] contact-frame torque on geom2 (torsional about the normal, rolling about the
    # tangents: condim 4 and 6), zero otherwise; force and torque are MuJoCo's mj_contactForce
    torque: jax.Array


class ConstraintResult(NamedTuple):
    """Output of :func:`solve_constraints`."""

    qfrc_constraint: jax.Array  # [nv]
    qacc: jax.Array  # [nv] constrained acceleration (MuJoCo's qacc, before implicit damping)
    contact: ContactState
    cfrc_ext: jax.Array  # [nbody, 6] contact wrenches (torque at the tree com; force)


# --------------------------------------------------------------------------- static layout


def body_weldid(topology: Topology) -> np.ndarray:
    """MuJoCo's body_weldid: the body itself if it has joints, else its parent's weld body."""
    has_joint = np.zeros(topology.nbody, bool)
    has_joint[list(topology.jnt_body)] = True
    weld = np.zeros(topology.nbody, np.int32)
    for b in range(1, topology.nbody):
        weld[b] = b if has_joint[b] else weld[topology.body_parent[b]]
    return weld


def contact_pairs(
    topology: Topology,
    geom_type: tuple[int, ...],
    geom_body: tuple[int, ...],
    geom_contype: tuple[int, ...],
    geom_conaffinity: tuple[int, ...],
    exclude_pairs: tuple[tuple[int, int], ...] = (),
    explicit: tuple[tuple[int, int], ...] = (),
    filter_parent: bool = True,
) -> tuple[tuple[int, int], ...]:
    """Candidate geom pairs (g1, g2), type[g1] <= type[g2], filtered as MuJoCo's mj_collision:
    the ``explicit`` pairs (<contact><pair>) first, then the geoms' own pairs, less those the
    explicit ones replace. Geoms welded together never collide; with ``filter_parent`` (MuJoCo's
    filterparent flag) neither do those of a body and its parent, unless the parent is welded
    to the world.

    Explicit pairs of types the narrow phase has no function for (a plane or height field
    against a height field, which MuJoCo accepts and never collides) are returned too;
    :func:`unsupported_pairs` lists them.
    """
    weld = body_weldid(topology)
    parent = np.maximum(np.asarray(topology.body_parent), 0)
    weld_parent = weld[parent[weld]]
    excluded = {frozenset(p) for p in exclude_pairs}
    ordered = lambda a, b: (a, b) if geom_type[a] <= geom_type[b] else (b, a)  # noqa: E731
    pairs = [ordered(g1, g2) for g1, g2 in explicit]
    replaced = {frozenset(p) for p in explicit}
    for g1 in range(len(geom_type)):
        for g2 in range(g1 + 1, len(geom_type)):
            if not (
                (geom_contype[g1] & geom_conaffinity[g2])
                or (geom_contype[g2] & geom_conaffinity[g1])
            ):
                continue
            b1, b2 = geom_body[g1], geom_body[g2]
            w1, w2 = weld[b1], weld[b2]
            if w1 == w2:
                continue
            parent_child = w1 == weld_parent[b2] or w2 == weld_parent[b1]
            if filter_parent and w1 != 0 and w2 != 0 and parent_child:
                continue
            if frozenset((b1, b2)) in excluded or frozenset((g1, g2)) in replaced:
                continue
            if geom_type[g1] in _TERRAIN and geom_type[g2] in _TERRAIN:
                continue  # MuJoCo has no plane-plane or plane/hfield-hfield function either
            pairs.append(ordered(g1, g2))
    return tuple(pairs)


_TERRAIN = (GEOM_PLANE, GEOM_HFIELD)


def _collides(t1: int, t2: int) -> bool:
    """Whether geom types t1 <= t2 have a collision function here."""
    return (t1, t2) in col._NUM_CONTACTS or (t1 == GEOM_HFIELD and t2 in hfield.COLLIDES_WITH)


def unsupported_pairs(sys_or_types: tuple[int, ...], pairs: tuple[tuple[int, int], ...]) -> list:
    """Pairs whose geom types have no collision function here."""
    return [(g1, g2) for g1, g2 in pairs if not _collides(sys_or_types[g1], sys_or_types[g2])]


@dataclasses.dataclass(frozen=True)
class _Layout:
    """Static slot and row layout derived from a System."""

    # ((type1, type2, g1 array, g2 array, pair index array, terrain), ...); terrain: None, or
    # for height-field pairs (hfield id, its window of cells) (physics.hfield)
    groups: tuple
    slot_pair: np.ndarray  # [ncon] pair of each slot
    slot_b1: np.ndarray
    slot_b2: np.ndarray
    slot_g2: np.ndarray
    slot_condim: np.ndarray  # [ncon] the contact's condim: 1, 3, 4 or 6
    pair_g1: np.ndarray  # [npair]
    pair_g2: np.ndarray
    pair_win: np.ndarray  # [npair] 0 equal priority, 1 geom1 wins, 2 geom2 wins
    pair_condim: np.ndarray  # [npair]
    lim_jnt: np.ndarray  # [nlim] limited hinge/slide joints
    lim_qadr: np.ndarray
    lim_dadr: np.ndarray
    fric_dof: np.ndarray  # [nfric] dofs with friction loss (a bounded-force row each)
    neq: int  # rows of the equality constraints (physics.equality)
    ten_fric: np.ndarray  # [ntf] constrained tendons with friction loss (a bounded row each)
    ten_lim: np.ndarray  # [ntl] limited constrained tendons (two rows each)
    ball_jnt: np.ndarray  # [nball] limited ball joints (a row on the rotation angle each)

    @property
    def ncon(self) -> int:
        return len(self.slot_pair)

    @property
    def slot_condim1(self) -> np.ndarray:
        """[ncon] bool: frictionless slots (one row)."""
        return self.slot_condim == 1

    @property
    def friction_dims(self) -> int:
        """Friction directions a contact slot has rows for: 2 (sliding), 3 with a condim-4
        (torsional) contact in the model, 5 with a condim-6 (rolling) one."""
        return max(3, int(self.slot_condim.max(initial=3))) - 1

    @property
    def nlim(self) -> int:
        return len(self.lim_jnt)

    @property
    def nfric(self) -> int:
        return len(self.fric_dof)

    @property
    def nball(self) -> int:
        return len(self.ball_jnt)

    @property
    def has_rows(self) -> bool:
        """Whether the model has any constraint row at all."""
        tendons = len(self.ten_fric) + len(self.ten_lim)
        return bool(self.nfric + self.nlim + self.neq + tendons + self.nball + self.ncon)

    @property
    def eq_rows(self) -> slice:
        """Where the equality rows sit: after the friction-loss and joint-limit unit rows."""
        start = self.nfric + 2 * self.nlim
        return slice(start, start + self.neq)


def _group_key(sys: System, g1: int, g2: int) -> tuple:
    """Pairs of one key collide in one vmapped call: (type1, type2, hfield id or -1, window)."""
    t1, t2 = sys.geom_type[g1], sys.geom_type[g2]
    if t1 != GEOM_HFIELD:
        return t1, t2, -1, (0, 0)
    h = sys.geom_hfield[g1]
    return t1, t2, h, hfield.window(sys.hfield_size[h], sys.hfield_grid[h], sys.geom_rbound[g2])


def _layout(sys: System) -> _Layout:
    pairs = () if sys.disable_contact else sys.contact_pairs
    gbody = np.asarray(sys.geom_body, np.int32)
    groups, slot_pair = [], []
    pair_g1 = np.asarray([p[0] for p in pairs], np.int32)
    pair_g2 = np.asarray([p[1] for p in pairs], np.int32)
    pair_keys = [_group_key(sys, g1, g2) for g1, g2 in pairs]
    for key in sorted(set(pair_keys)):
        idx = np.asarray([i for i, k in enumerate(pair_keys) if k == key], np.int32)
        t1, t2, hf, win = key
        terrain = None if hf < 0 else (hf, win)
        groups.append((t1, t2, pair_g1[idx], pair_g2[idx], idx, terrain))
        n = col.num_contacts(t1, t2) if terrain is None else hfield.num_contacts(win)
        slot_pair.append(np.repeat(idx, n))
    slot_pair = np.concatenate(slot_pair) if slot_pair else np.zeros(0, np.int32)
    prio = np.asarray(sys.geom_priority, np.int32)
    cond = np.asarray(sys.geom_condim, np.int32)
    win = np.where(prio[pair_g1] > prio[pair_g2], 1, np.where(prio[pair_g1] < prio[pair_g2], 2, 0))
    condim = np.where(
        win == 1,
        cond[pair_g1],
        np.where(win == 2, cond[pair_g2], np.maximum(cond[pair_g1], cond[pair_g2])),
    )
    if len(pairs):
        condim[: len(sys.pair_condim)] = sys.pair_condim  # explicit pairs state theirs
    topo = sys.topology
    jt = np.asarray(topo.jnt_type)
    lim = np.asarray(
        [j for j in range(topo.njnt) if sys.jnt_limited[j] and jt[j] in (JNT_HINGE, JNT_SLIDE)],
        np.int32,
    )
    ball = np.asarray(
        [j for j in range(topo.njnt) if sys.jnt_limited[j] and jt[j] == JNT_BALL], np.int32
    )
    if sys.disable_limit:
        lim, ball = np.zeros(0, np.int32), np.zeros(0, np.int32)
    return _Layout(
        groups=tuple(groups),
        slot_pair=slot_pair,
        slot_b1=gbody[pair_g1[slot_pair]] if len(pairs) else np.zeros(0, np.int32),
        slot_b2=gbody[pair_g2[slot_pair]] if len(pairs) else np.zeros(0, np.int32),
        slot_g2=pair_g2[slot_pair] if len(pairs) else np.zeros(0, np.int32),
        slot_condim=condim[slot_pair] if len(pairs) else np.zeros(0, np.int32),
        pair_g1=pair_g1,
        pair_g2=pair_g2,
        pair_win=win,
        pair_condim=condim,
        lim_jnt=lim,
        lim_qadr=topo.jnt_qposadr[lim],
        lim_dadr=topo.jnt_dofadr[lim],
        fric_dof=np.zeros(0, np.int32)
        if sys.disable_frictionloss
        else np.asarray(sys.dof_friction, np.int32),
        neq=equality.num_rows(sys),
        ten_fric=np.zeros(0, np.int32)
        if sys.disable_frictionloss
        else np.asarray(sys.tendon_friction, np.int32),
        ten_lim=np.zeros(0, np.int32)
        if sys.disable_limit
        else np.flatnonzero(np.asarray(sys.tendon_limited, bool)).astype(np.int32),
        ball_jnt=ball,
    )


def check_supported(sys: System) -> list[str]:
    """Problems that make a model's constraints unsupported (empty when all is fine)."""
    problems = []
    for g1, g2 in unsupported_pairs(sys.geom_type, sys.contact_pairs):
        problems.append(
            f"no collision function for geoms {sys.geom_names[g1]!r} (type "
            f"{sys.geom_type[g1]}) and {sys.geom_names[g2]!r} (type "
            f"{sys.geom_type[g2]})"
        )
    lay = _layout(
        dataclasses.replace(
            sys,
            contact_pairs=tuple(
                p for p in sys.contact_pairs if p not in unsupported_pairs(sys.geom_type, (p,))
            ),
        )
    )
    bad = [i for i, condim in enumerate(lay.pair_condim) if condim not in (1, 3, 4, 6)]
    if bad:  # one problem for all such pairs (a model can have hundreds), a few named
        named = [(sys.geom_names[lay.pair_g1[i]], sys.geom_names[lay.pair_g2[i]]) for i in bad]
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        problems.append(
            f"{len(bad)} geom pair(s) would make contacts of condim other than 1, 3, 4 and 6: "
            f"{', '.join(map(str, named[:3]))}{more}"
        )
    return problems


# --------------------------------------------------------------------------- load-time constants


def _qpos0_terms(sys: System) -> tuple[kinematics.Kinematics, jax.Array, jax.Array]:
    kin = kinematics.forward_kinematics(sys, sys.qpos0)
    m = dynamics.mass_matrix(sys, kin)
    return kin, m, kinematics.point_jacobian(sys, kin, kin.xipos, np.arange(sys.nbody))


_qpos0_quick = jax.jit(_qpos0_terms, compiler_options=xla_cpu.LOAD_TIME_COMPILE)
_qpos0_full = jax.jit(_qpos0_terms)


def _at_qpos0(sys: System) -> tuple[kinematics.Kinematics, jax.Array, jax.Array]:
    """Kinematics, mass matrix and centre-of-mass Jacobians at qpos0, as one program: run
    eagerly, their few hundred operations were each compiled on their own (4-6 s per model).
    Compiled at XLA's quickest setting on the CPU, where the options are measured; other
    backends compile it as usual."""
    return (_qpos0_quick if jax.default_backend() == "cpu" else _qpos0_full)(sys)


SINGULAR_PIVOT = 1e-6
"""A pivot of M's factorization below this fraction of its diagonal entry marks a (near)
singular dof: the gymnasium, Brax and MJX test models have 1.5e-2 and more; joints that move a
body along directions its other joints span give 0 (-5e-8 in float32 rounding)."""


class InvWeights(NamedTuple):
    """Load-time constants from M^-1 at qpos0 (see :func:`invweights`)."""

    body: jax.Array  # [nbody, 2] translational, rotational
    dof: jax.Array  # [nv]
    eq: jax.Array  # [neq, 2]
    tendon: jax.Array  # [ntc]
    singular_dofs: np.ndarray  # dofs whose pivot is below SINGULAR_PIVOT of M's diagonal


@math.full_precision
def invweights(sys: System) -> InvWeights:
    """body_invweight0, dof_invweight0, eq_invweight0 and tendon_invweight0 at qpos0, as
    MuJoCo's mj_setConst (the equalities' from the first two: physics.equality; a constrained
    tendon's J M^-1 J^T), and the dofs where M is (near) singular.

    Per body, the mean diagonal of J M^-1 J^T for the translational and rotational Jacobians
    at its centre of mass (0 for bodies welded to the world; 1/mass and 0 for a child of the
    world moved by slide joints only, without children: MuJoCo's "simple" body). Per dof, the mean
    diagonal of M^-1 over its group: a free joint's translations, its rotations, a ball joint,
    a hinge/slide alone; 1/mass for the slides of a simple body (armature left out, as MuJoCo).
    """
    topo = sys.topology
    kin0, m, jac = _at_qpos0(sys)
    m, jac = np.asarray(m, np.float64), np.asarray(jac, np.float64)
    minv, ratio = linalg.inverse_like_mujoco(m)
    diag = np.einsum("bin,nm,bim->bi", jac, minv, jac)  # [nbody, 6]: angular, linear
    tran, rot = diag[:, 3:].mean(-1), diag[:, :3].mean(-1)
    weld = body_weldid(topo)
    jt = np.asarray(topo.jnt_type)
    simple = set()
    for b in range(1, topo.nbody):
        js = [j for j in range(topo.njnt) if topo.jnt_body[j] == b]
        if weld[b] == 0:
            tran[b] = rot[b] = 0.0
        elif (
            topo.body_parent[b] == 0
            and b not in topo.body_parent
            and js
            and all(jt[j] == JNT_SLIDE for j in js)
        ):
            tran[b], rot[b] = 1.0 / max(float(sys.body_mass[b]), con.MINVAL), 0.0
            simple.add(b)
    body = np.stack([tran, rot], axis=-1)
    dof = np.zeros(topo.nv)
    dm = np.diag(minv) if topo.nv else np.zeros(0)
    for j, t in enumerate(jt):
        adr = topo.jnt_dofadr[j]
        if topo.jnt_body[j] in simple:
            dof[adr] = tran[topo.jnt_body[j]]
            continue
        for size in {0: (3, 3), JNT_BALL: (3,)}.get(int(t), (1,)):
            dof[adr : adr + size] = dm[adr : adr + size].mean()
            adr += size
    eq = equality.invweight0(sys, kin0, body, dof, minv)
    ten = tendon.invweight0(sys, kin0, sys.constrained_tendons, minv)
    body, dof, eq, ten = (jnp.asarray(x, sys.body_mass.dtype) for x in (body, dof, eq, ten))
    return InvWeights(body, dof, eq, ten, np.flatnonzero(ratio < SINGULAR_PIVOT))


# --------------------------------------------------------------------------- per step


def _pair_params(sys: System, lay: _Layout) -> tuple:
    """Per-pair (friction [npair, 5]: sliding (2), torsional, rolling (2); margin, solref,
    solreffriction, solimp) as MuJoCo's mj_collideGeoms/mj_contactParam; an explicit pair
    (the first len(sys.pair_condim)) states its own.

    With the override flag every contact takes the option's o_friction, o_margin, o_solref
    and o_solimp instead (measured in MuJoCo 4.0.1: a pair's solreffriction too).

    geom `gap` is left out: in MuJoCo 4.0 it only widens the detection of inactive contacts
    (reported, never solved), and a contact's rows start at the summed margin."""
    g1, g2, win = lay.pair_g1, lay.pair_g2, lay.pair_win
    w1, w2 = (win == 1)[:, None], (win == 2)[:, None]

    def pick(a1: jax.Array, a2: jax.Array, mixed: jax.Array) -> jax.Array:
        return jnp.where(w1, a1, jnp.where(w2, a2, mixed))

    f1, f2 = sys.geom_friction[g1], sys.geom_friction[g2]
    friction = pick(f1, f2, jnp.maximum(f1, f2))
    s1, s2 = sys.geom_solmix[g1], sys.geom_solmix[g2]
    ok1, ok2 = s1 >= con.MINVAL, s2 >= con.MINVAL
    mix = jnp.where(
        ok1 & ok2,
        s1 / jnp.where(ok1 & ok2, s1 + s2, 1.0),
        jnp.where(~ok1 & ~ok2, 0.5, jnp.where(ok1, 1.0, 0.0)),
    )
    mix = jnp.where(win == 1, 1.0, jnp.where(win == 2, 0.0, mix))[:, None]
    r1, r2 = sys.geom_solref[g1], sys.geom_solref[g2]
    standard = (r1[:, :1] > 0) & (r2[:, :1] > 0)
    solref = jnp.where(standard, mix * r1 + (1 - mix) * r2, jnp.minimum(r1, r2))
    solref = pick(r1, r2, solref)
    solimp = mix * sys.geom_solimp[g1] + (1 - mix) * sys.geom_solimp[g2]
    margin = sys.geom_margin[g1] + sys.geom_margin[g2]  # MuJoCo sums the margins
    friction = friction[:, np.array([0, 0, 1, 2, 2])]
    solreffriction = jnp.zeros_like(solref)
    nexp = len(sys.pair_condim)
    if nexp:
        friction = friction.at[:nexp].set(sys.pair_friction)
        margin = margin.at[:nexp].set(sys.pair_margin)
        solref = solref.at[:nexp].set(sys.pair_solref)
        solreffriction = solreffriction.at[:nexp].set(sys.pair_solreffriction)
        solimp = solimp.at[:nexp].set(sys.pair_solimp)
    if sys.enable_override:  # MuJoCo's mj_assign*: the option's values, a pair's included
        n = margin.shape[0]
        friction = jnp.broadcast_to(sys.o_friction, (n, 5))
        margin = jnp.broadcast_to(sys.o_margin, (n,))
        solref = jnp.broadcast_to(sys.o_solref, (n, 2))
        solreffriction = jnp.zeros_like(solref)  # 0 0: the friction rows take solref, o_solref
        solimp = jnp.broadcast_to(sys.o_solimp, (n, 5))
    return friction, margin, solref, solreffriction, solimp


def _hulls(sys: System, geom_type: int, geoms: np.ndarray) -> Hull | None:
    """The convex hull rows of mesh geoms (None for other types)."""
    if geom_type != GEOM_MESH:
        return None
    rows = np.asarray(sys.geom_hull)[geoms]
    return jax.tree.map(lambda table: table[rows], sys.mesh_hull)


def _collide_all(
    sys: System, kin: kinematics.Kinematics, lay: _Layout, margin: jax.Array
) -> col.Contact:
    parts = []
    for t1, t2, g1, g2, idx, terrain in lay.groups:
        hull1, hull2 = _hulls(sys, t1, g1), _hulls(sys, t2, g2)
        if terrain is not None:
            parts.append(_collide_terrain(sys, kin, t2, g1, g2, margin[idx], hull2, *terrain))
            continue
        fn = jax.vmap(
            lambda p1, m1, s1, p2, m2, s2, mg, h2, h1, t1=t1, t2=t2: col.collide(
                t1, t2, p1, m1, s1, p2, m2, s2, mg, h2, h1
            )
        )
        c = fn(
            kin.geom_xpos[g1],
            kin.geom_xmat[g1],
            sys.geom_size[g1],
            kin.geom_xpos[g2],
            kin.geom_xmat[g2],
            sys.geom_size[g2],
            margin[idx],
            hull2,
            hull1,
        )
        parts.append(jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), c))
    return jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)


def _collide_terrain(
    sys: System,
    kin: kinematics.Kinematics,
    t2: int,
    g1: np.ndarray,
    g2: np.ndarray,
    margin: jax.Array,
    hull2: Hull | None,
    hf: int,
    win: tuple[int, int],
) -> col.Contact:
    """The contacts of height field ``hf``'s pairs with geoms of type t2 (one window size)."""
    grid, size = sys.hfield_grid[hf], sys.hfield_size[hf]
    fn = jax.vmap(
        lambda p1, m1, p2, m2, s2, mg, h2: hfield.collide_hfield(
            t2, sys.hfield_data[hf], grid, size, win, p1, m1, p2, m2, s2, mg, h2
        )
    )
    c = fn(
        kin.geom_xpos[g1],
        kin.geom_xmat[g1],
        kin.geom_xpos[g2],
        kin.geom_xmat[g2],
        sys.geom_size[g2],
        margin,
        hull2,
    )
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), c)


MINMU = 1e-5  # mjMINMU: friction coefficients are at least this


def rows_per_contact(sys: System, lay: _Layout | None = None) -> int:
    """Rows of a contact slot: two pyramid edges per friction direction, or the elliptic
    cone's normal and one row per friction direction (directions: see _Layout.friction_dims;
    contacts of a lower condim leave the rest unused). ``lay``: the model's layout, if at
    hand."""
    dims = (lay or _layout(sys)).friction_dims
    return 1 + dims if sys.cone == "elliptic" else 2 * dims


class ContactRows(NamedTuple):
    """What the contact rows were built from, for the solve and its contact forces."""

    collision: ContactState  # all slots (pos: the active slots' points)
    friction: jax.Array  # [nsel, dims] the solved slots' friction per direction (0: none)
    frictionless: jax.Array  # [nsel] condim 1
    active: jax.Array  # [ncon]
    sel: jax.Array | np.ndarray  # the solved slots
    cones: con.Cones | None  # elliptic cones of the solved slots
    normal: jax.Array  # [nsel, nv] the solved slots' normal rows (their separation speed's)


def _rows(sys: System, state, lay: _Layout):  # noqa: ANN001, ANN202
    """Constraint rows: (J, unit rows, pos - margin, impedance positions (None: pos), mask,
    diag, solref, solimp, equality rows, contact extras). The impedance comes from pos except
    where a constraint takes one for all its rows: an equality's whole violation, an elliptic
    contact's distance (its friction rows sit at position 0).

    Friction-loss rows (one per dof with friction loss: position 0, always on) and joint-limit
    rows are unit rows (see :func:`physics.constraints.solve`), in that order, not part of J;
    the rows of J are the equality rows (always on), the tendons' friction-loss rows (always
    on) and limit rows (lower, upper), the ball-joint limits, then the contacts.
    """
    kin, nv = state.kin, sys.nv
    Js, poss, masks, diags, refs, imps = [], [], [], [], [], []
    own_impedance = {}  # block index in poss -> the positions its impedance comes from
    contact = eq = None
    unit_dofs, unit_signs = [], []
    if lay.nfric:
        dof = lay.fric_dof
        unit_dofs.append(dof)
        unit_signs.append(np.ones(lay.nfric))
        poss.append(jnp.zeros(lay.nfric, state.qd.dtype))
        masks.append(jnp.ones(lay.nfric, bool))
        diags.append(sys.dof_invweight0[dof])
        refs.append(sys.dof_solref[dof])
        imps.append(sys.dof_solimp[dof])
    if lay.nlim:
        lo, hi = sys.jnt_range[lay.lim_jnt, 0], sys.jnt_range[lay.lim_jnt, 1]
        q = state.q[lay.lim_qadr]
        margin = sys.jnt_margin[lay.lim_jnt]
        pos = jnp.concatenate([q - lo, hi - q])
        margin2 = jnp.concatenate([margin, margin])
        unit_dofs.append(np.tile(lay.lim_dadr, 2))
        unit_signs.append(np.repeat([1.0, -1.0], lay.nlim))
        poss.append(pos - margin2)
        masks.append(pos < margin2)
        diags.append(jnp.tile(sys.dof_invweight0[lay.lim_dadr], 2))
        refs.append(jnp.tile(sys.jnt_solref[lay.lim_jnt], (2, 1)))
        imps.append(jnp.tile(sys.jnt_solimp[lay.lim_jnt], (2, 1)))
    if lay.neq:
        eq = equality.rows(sys, kin, state.q, state.qd)
        Js.append(eq.J)
        poss.append(eq.pos)
        own_impedance[len(poss) - 1] = eq.impedance_pos
        masks.append(jnp.ones(lay.neq, bool))
        diags.append(eq.diag)
        refs.append(eq.solref)
        imps.append(eq.solimp)
    if len(lay.ten_fric) or len(lay.ten_lim):
        length, moment = tendon.lengths_and_jacobian(sys, kin, state.q, sys.constrained_tendons)
    if len(lay.ten_fric):  # dry friction along the tendon: position 0, always on
        t = lay.ten_fric
        Js.append(moment[t])
        poss.append(jnp.zeros(len(t), state.q.dtype))
        masks.append(jnp.ones(len(t), bool))
        diags.append(sys.tendon_invweight0[t])
        refs.append(sys.tendon_solref_friction[t])
        imps.append(sys.tendon_solimp_friction[t])
    if len(lay.ten_lim):  # as joint limits, on the tendon's length
        t = lay.ten_lim
        lo, hi = sys.tendon_range[t, 0], sys.tendon_range[t, 1]
        dist = jnp.concatenate([length[t] - lo, hi - length[t]])
        margin = jnp.tile(sys.tendon_margin[t], 2)
        Js.append(jnp.concatenate([moment[t], -moment[t]]))
        poss.append(dist - margin)
        masks.append(dist < margin)
        diags.append(jnp.tile(sys.tendon_invweight0[t], 2))
        refs.append(jnp.tile(sys.tendon_solref_limit[t], (2, 1)))
        imps.append(jnp.tile(sys.tendon_solimp_limit[t], (2, 1)))
    if lay.nball:  # MuJoCo: max(range) - rotation angle, Jacobian -axis on the joint's dofs
        j, topo = lay.ball_jnt, sys.topology
        quat = state.q[topo.jnt_qposadr[j][:, None] + np.arange(4)]
        rotvec = math.quat_to_rotvec(quat)
        angle = jnp.sqrt(jnp.sum(rotvec * rotvec, axis=-1) + 1e-30)
        dist = jnp.max(sys.jnt_range[j], axis=-1) - angle
        rows = jnp.zeros((len(j), nv), rotvec.dtype)
        cols = topo.jnt_dofadr[j][:, None] + np.arange(3)
        Js.append(rows.at[np.arange(len(j))[:, None], cols].set(-rotvec / angle[:, None]))
        margin = sys.jnt_margin[j]
        poss.append(dist - margin)
        masks.append(dist < margin)
        diags.append(sys.dof_invweight0[topo.jnt_dofadr[j]])
        refs.append(sys.jnt_solref[j])
        imps.append(sys.jnt_solimp[j])
    if lay.ncon:
        friction, margin, solref, solreffriction, solimp = _pair_params(sys, lay)
        c = _collide_all(sys, kin, lay, margin)
        sp = lay.slot_pair
        friction, margin, solref, solimp = friction[sp], margin[sp], solref[sp], solimp[sp]
        solreffriction = solreffriction[sp]
        active = c.dist < margin
        cpos = jnp.where(active[:, None], c.pos, kin.geom_xpos[lay.slot_g2])
        sel = _solved_slots(c.dist - margin, sys.max_contacts)
        dims = lay.friction_dims  # 2: sliding; 3: + torsional; 5: + rolling
        part = slice(None) if dims > 2 else slice(3, None)  # angular rows only if needed
        jac = kinematics.point_jacobian(sys, kin, cpos, lay.slot_b2)[:, part]
        if np.any(lay.slot_b1 != 0):
            jac = jac - kinematics.point_jacobian(sys, kin, cpos, lay.slot_b1)[:, part]
        jac, frame, c1 = jac[sel], c.frame[sel], jnp.asarray(lay.slot_condim1)[sel]
        lin = jnp.einsum("cij,cjn->cin", frame, jac[:, -3:])  # normal, tangent 1, tangent 2
        jf = lin[:, 1:]
        if dims > 2:  # about the normal (torsional), about the tangents (rolling)
            jf = jnp.concatenate([jf, jnp.einsum("cij,cjn->cin", frame, jac[:, :3])], axis=1)
            jf = jf[:, :dims]
        f = friction[sel]
        fdir = f[:, :dims]
        has = np.arange(dims) < lay.slot_condim[:, None] - 1  # [ncon, dims] the slot's own
        has = jnp.asarray(has)[sel]
        fdir = jnp.where(has, jnp.maximum(fdir, MINMU), 0.0)  # MuJoCo's floor, mjMINMU
        mu_s = jnp.maximum(f[:, 0], MINMU)  # (the cone's mu and the pyramid's A_ii)
        tran = sys.body_invweight0[lay.slot_b1, 0] + sys.body_invweight0[lay.slot_b2, 0]
        tran = tran[sel]
        pos = jnp.where(active, c.dist - margin, 0.0)[sel]
        k = rows_per_contact(sys, lay)
        cones = None
        if sys.cone == "elliptic":  # rows normal, friction; friction rows at position 0
            J = jnp.concatenate([lin[:, :1], jf], axis=1)
            # A_ii of a friction row: tran mu_slide^2 / (mu_row^2 impratio), as MuJoCo 4.0
            ratio = mu_s[:, None] ** 2 / (jnp.where(has, fdir, 1.0) ** 2 * sys.impratio)
            diag = tran[:, None] * jnp.concatenate([jnp.ones_like(ratio[:, :1]), ratio], axis=1)
            row_pos = pos[:, None] * (jnp.arange(k) == 0)
            imp_pos = jnp.repeat(pos, k)  # one impedance per contact, from its distance
            cones = con.Cones(mu_s / jnp.sqrt(sys.impratio), fdir, ~c1)
            rows_ok = jnp.concatenate([jnp.ones_like(has[:, :1]), has], axis=1)
        else:
            J = jax.vmap(con.pyramid_jacobian)(lin[:, 0], jf, fdir)  # [nsel, 2 dims, nv]
            diag = jax.vmap(con.pyramid_diag_approx, (0, 0, None, None))(
                tran, mu_s, sys.impratio, k
            )
            row_pos = jnp.repeat(pos[:, None], k, axis=1)
            imp_pos = None
            rows_ok = jnp.repeat(has, 2, axis=1)
        if np.any(lay.slot_condim1):
            J = jnp.where(c1[:, None, None], lin[:, :1], J)
            diag = jnp.where(c1[:, None], tran[:, None], diag)
            rows_ok = jnp.where(c1[:, None], jnp.arange(k) == 0, rows_ok)
        Js.append(J.reshape(-1, nv))
        poss.append(row_pos.reshape(-1))
        if imp_pos is not None:
            own_impedance[len(poss) - 1] = imp_pos
        masks.append((active[sel][:, None] & rows_ok).reshape(-1))
        diags.append(diag.reshape(-1))
        row_ref = jnp.repeat(solref[sel][:, None], k, axis=1)
        if sys.cone == "elliptic" and len(sys.pair_condim):  # a pair's solreffriction
            own = solreffriction[sel]
            own = jnp.where(jnp.any(own != 0, axis=-1, keepdims=True), own, solref[sel])
            row_ref = row_ref.at[:, 1:].set(own[:, None])
        refs.append(row_ref.reshape(-1, 2))
        imps.append(jnp.repeat(solimp[sel], k, axis=0))
        contact = ContactRows(c._replace(pos=cpos), fdir, c1, active, sel, cones, lin[:, 0])
    cat = jnp.concatenate
    J = cat(Js) if Js else jnp.zeros((0, nv), state.qd.dtype)
    unit_rows = (np.concatenate(unit_dofs), np.concatenate(unit_signs)) if unit_dofs else None
    imp_pos = None  # positions the impedances come from, where a block has its own
    if own_impedance:
        imp_pos = cat([own_impedance.get(i, p) for i, p in enumerate(poss)])
    rows = cat(poss), imp_pos, cat(masks), cat(diags), cat(refs), cat(imps)
    return J, unit_rows, *rows, eq, contact


def _solved_slots(gap_to_margin: jax.Array, max_contacts: int | None) -> jax.Array | np.ndarray:
    """Slots whose rows enter the solver: all (None), or the ``max_contacts`` deepest.

    A slot is active when ``dist - margin < 0``; taking the smallest values keeps every active
    slot as long as at most ``max_contacts`` are active, and the deepest ones otherwise.
    """
    ncon = gap_to_margin.shape[0]
    if max_contacts is None or max_contacts >= ncon:
        return np.arange(ncon)
    return jax.lax.top_k(-gap_to_margin, max_contacts)[1]


def _islands(sys: System, J: jax.Array, unit: con.UnitRows | None) -> con.Islands | None:
    """The trees each row touches, for a capped solve's per-island line search (MuJoCo's
    mj_island): a limit its joint's, other rows those of the dofs their Jacobian row moves.
    (MuJoCo takes a contact's or weld's trees from its bodies; that differs only where one
    body's dofs cannot move the contact point at all.) None where MuJoCo solves all dofs as
    one: a solve run to the optimum (where islands change nothing), one tree, islands off."""
    topo = sys.topology
    if not sys.capped_solve or sys.disable_island or topo.ntree < 2:
        return None
    on_tree = topo.dof_tree[:, None] == np.arange(topo.ntree)  # [nv, ntree]
    rows = (jnp.abs(J) > 0).astype(J.dtype) @ jnp.asarray(on_tree, J.dtype) > 0
    unit_rows = np.zeros((0, topo.ntree), bool) if unit is None else on_tree[unit[0]]
    return con.Islands(topo.dof_tree, jnp.concatenate([jnp.asarray(unit_rows), rows]))


def _cost(
    M: jax.Array,
    qacc_smooth: jax.Array,
    J: jax.Array,
    unit_rows: con.UnitRows | None,
    aref: jax.Array,
    D: jax.Array,
    R: jax.Array,
    bounds: con.Bounds | None,
    cones: con.Cones | None,
    qacc: jax.Array,
) -> jax.Array:
    dq = qacc - qacc_smooth
    jar = con.row_values(J, unit_rows, qacc) - aref
    return 0.5 * dq @ M @ dq + con.total_cost(jar, D, R, bounds, cones)


@math.full_precision
def solve_constraints(
    sys: System,
    state,  # noqa: ANN001
    mass: jax.Array,
    qfrc_smooth: jax.Array,
    adhesion: jax.Array | None = None,
) -> ConstraintResult:
    """Joint-limit and contact forces at ``state`` (one substep's constraint solve).

    ``adhesion`` [len(sys.actuator_adhesion)]: the forces of the body-transmission actuators,
    which act through the contacts found here (:func:`adhesion_force`)."""
    lay = _layout(sys)
    dtype = qfrc_smooth.dtype
    nb = sys.nbody
    empty = empty_contact(sys, dtype)
    if not lay.has_rows:
        return ConstraintResult(
            jnp.zeros_like(qfrc_smooth),
            linalg.cho_solve(mass, qfrc_smooth),
            empty,
            jnp.zeros((nb, 6), dtype),
        )
    J, unit, pos, imp_pos, mask, diag, solref, solimp, eq, contact = _rows(sys, state, lay)
    if adhesion is not None and contact is not None:
        qfrc_smooth = qfrc_smooth + adhesion_force(sys, lay, contact, adhesion)
    qacc_smooth = linalg.cho_solve(mass, qfrc_smooth)
    vel = con.row_values(J, unit, state.qd)
    cones = None if contact is None else contact.cones
    aref, R = con.soft_rows(pos, vel, diag, solref, solimp, sys.timestep, imp_pos)
    if eq is not None:
        aref = aref.at[lay.eq_rows].add(-eq.jdot_qd)
    D = jnp.where(mask, 1.0 / R, 0.0)
    bounds = None
    if lay.nfric or lay.neq or len(lay.ten_fric):
        # friction loss: |force| <= frictionloss; equality: any force; the others: force >= 0
        floss = sys.dof_frictionloss[lay.fric_dof]
        ten_floss = sys.tendon_frictionloss[lay.ten_fric]
        n_rest = len(aref) - lay.nfric - 2 * lay.nlim - lay.neq - len(lay.ten_fric)
        inf = jnp.inf
        # (row count, lo, hi) in row order; lo and hi are arrays for the friction-loss rows
        blocks = [(lay.nfric, -floss, floss), (2 * lay.nlim, 0.0, inf), (lay.neq, -inf, inf)]
        blocks += [(len(lay.ten_fric), -ten_floss, ten_floss), (n_rest, 0.0, inf)]
        bounds = tuple(
            jnp.concatenate(
                [jnp.broadcast_to(jnp.asarray(b[k], floss.dtype), (b[0],)) for b in blocks]
            )
            for k in (1, 2)
        )
    warm = state.qacc
    use_warm = _cost(mass, qacc_smooth, J, unit, aref, D, R, bounds, cones, warm) < _cost(
        mass, qacc_smooth, J, unit, aref, D, R, bounds, cones, qacc_smooth
    )
    x0 = jnp.where(use_warm, warm, qacc_smooth)
    res = con.solve(
        mass,
        qacc_smooth,
        J,
        aref,
        R,
        mask,
        qacc_init=x0,
        iterations=sys.newton_steps,
        # friction-loss rows bend the 1-D cost twice each (module comment on LINE_SEARCH);
        # equality rows, unbounded both ways, never bend it
        line_search="exact" if lay.nfric or len(lay.ten_fric) else LINE_SEARCH,
        unit_rows=unit,
        bounds=bounds,
        cones=cones,
        hessian_form=sys.hessian_form,
        mujoco_search=sys.mujoco_search,
        islands=_islands(sys, J, unit),
    )
    if sys.noslip_iterations and (lay.nfric or len(lay.ten_fric) or contact is not None):
        res = _noslip(sys, lay, mass, qacc_smooth, J, unit, aref, res.efc_force, bounds, contact)
    if contact is None:
        return ConstraintResult(res.qfrc_constraint, res.qacc, empty, jnp.zeros((nb, 6), dtype))
    c, fdir, c1 = contact.collision, contact.friction, contact.frictionless  # solved slots
    active, sel = contact.active, contact.sel
    k = rows_per_contact(sys, lay)
    f = res.efc_force[-k * len(sel) :].reshape(len(sel), k)  # the contacts' rows come last
    if cones is not None:  # the rows are the force in the contact frame
        local = f
    else:  # [nsel, 1 + dims]: normal, then along each friction direction
        local = jax.vmap(con.pyramid_force)(f, fdir)
    if np.any(lay.slot_condim1):  # frictionless: the normal row alone
        local = jnp.where(c1[:, None], f[:, :1] * (jnp.arange(local.shape[1]) == 0), local)
    # MuJoCo's mj_contactForce: (normal, tangent 1, tangent 2, torsional, rolling 1, rolling 2)
    local = jnp.zeros((lay.ncon, 6), local.dtype).at[sel, : local.shape[1]].set(local)
    local = jnp.where(active[:, None], local, 0.0)
    cstate = ContactState(c.dist, c.pos, c.frame, local[:, :3], local[:, 3:])
    return ConstraintResult(
        res.qfrc_constraint, res.qacc, cstate, _cfrc_ext(sys, state.kin, lay, cstate)
    )


def adhesion_force(sys: System, lay: _Layout, contact: ContactRows, force: jax.Array) -> jax.Array:
    """[nv] MuJoCo's body transmission (adhesion): actuator u's moment arms are minus the mean
    normal row of the active contacts that touch its body (geom1's or geom2's), so a positive
    ``force`` [len(sys.actuator_adhesion)] pulls the body toward what it touches, split
    evenly over those contacts (none: no force). Only solved contacts count (max_contacts)."""
    active = contact.active[contact.sel]
    b1, b2 = jnp.asarray(lay.slot_b1)[contact.sel], jnp.asarray(lay.slot_b2)[contact.sel]
    bodies = jnp.asarray([body for _, body in sys.actuator_adhesion])
    touch = active & ((b1 == bodies[:, None]) | (b2 == bodies[:, None]))  # [nadh, nsel]
    count = jnp.maximum(jnp.sum(touch, axis=1), 1)
    moment = -(touch.astype(force.dtype) @ contact.normal) / count[:, None]
    return moment.T @ force


def _noslip(  # noqa: ANN202
    sys: System,
    lay: _Layout,
    mass: jax.Array,
    qacc_smooth: jax.Array,
    J: jax.Array,
    unit,  # noqa: ANN001
    aref: jax.Array,
    force: jax.Array,
    bounds,  # noqa: ANN001
    contact: ContactRows | None,
):
    """The main solve's result after MuJoCo's noslip sweeps (physics.noslip) on its forces:
    row forces, J^T force and qacc = qacc_smooth + M^-1 J^T force."""
    nv = sys.nv
    full = jnp.concatenate([jnp.asarray(con.unit_matrix(unit, nv), J.dtype), J])
    nunit = full.shape[0] - J.shape[0]
    ten_fric = nunit + lay.neq + np.arange(len(lay.ten_fric))  # after the equality rows
    dry = np.concatenate([np.arange(lay.nfric), ten_fric]).astype(int)
    k = rows_per_contact(sys, lay)
    if contact is None:
        mu, has, start = jnp.zeros((0, 0), force.dtype), jnp.zeros((0, 0), bool), len(force)
    else:  # friction is 0 on the directions a contact lacks
        mu, has = contact.friction, contact.friction > 0
        start = len(force) - k * len(contact.sel)  # the contacts' rows come last
    rows = noslip.FrictionRows(
        dry,
        bounds[1][dry] if len(dry) else jnp.zeros((0,), force.dtype),
        start,
        k,
        sys.cone == "elliptic",
        mu,
        has,
    )
    A = noslip.delassus(mass, full)
    force = noslip.noslip(A, full @ qacc_smooth - aref, force, rows, sys.noslip_iterations)
    qfrc = full.T @ force
    return con.SolverResult(qacc_smooth + linalg.cho_solve(mass, qfrc), qfrc, force)


def empty_contact(sys: System, dtype: jnp.dtype = jnp.float32) -> ContactState:
    """All-inactive contact slots (the state after init)."""
    n = _layout(sys).ncon
    return ContactState(
        jnp.full((n,), col.FAR, dtype),
        jnp.zeros((n, 3), dtype),
        jnp.broadcast_to(jnp.eye(3, dtype=dtype), (n, 3, 3)),
        jnp.zeros((n, 3), dtype),
        jnp.zeros((n, 3), dtype),
    )


def _world_force(c: ContactState) -> jax.Array:
    return jnp.einsum("ci,cij->cj", c.force, c.frame)


def _cfrc_ext(sys: System, kin: kinematics.Kinematics, lay: _Layout, c: ContactState) -> jax.Array:
    """MuJoCo's cfrc_ext from contacts: per body (torque about its tree's com, force)."""
    topo = sys.topology
    fw = _world_force(c)
    nb, n = topo.nbody, lay.ncon
    out = jnp.zeros((nb, 6), fw.dtype)
    for body, sign in ((lay.slot_b2, 1.0), (lay.slot_b1, -1.0)):
        if not np.any(body != 0):
            continue
        ref = kin.subtree_com[topo.body_root[body]]
        torque = jnp.cross(c.pos - ref, fw)
        if lay.friction_dims > 2:  # torsional and rolling friction's own torque
            torque = torque + jnp.einsum("ci,cij->cj", c.torque, c.frame)
        wrench = jnp.concatenate([torque, fw], axis=-1)
        scatter = np.zeros((nb, n), np.float32)
        scatter[body, np.arange(n)] = sign
        scatter[0] = 0.0
        # one dot, not math.static_matmul: that unrolls a multiply-add per slot, and models
        # with thousands of slots (leap_hand: 11k) made a program too big to compile
        out = out + jnp.matmul(scatter, wrench, precision=jax.lax.Precision.HIGHEST)
    return out


# --------------------------------------------------------------------------- accessors


@math.full_precision
def contact_forces(sys: System, state) -> jax.Array:  # noqa: ANN001
    """[ncon, 3] world-frame force of each candidate contact slot on geom2 (zero if inactive).

    Forces of the last substep that produced ``state``; geom1/geom2 of slot i are
    ``contact_geoms(sys)[i]``.
    """
    del sys
    return _world_force(state.contact)


def contact_geoms(sys: System) -> np.ndarray:
    """[ncon, 2] (geom1, geom2) of each contact slot, in the order of ``state.contact``."""
    lay = _layout(sys)
    return np.stack([lay.pair_g1[lay.slot_pair], lay.pair_g2[lay.slot_pair]], axis=-1)


@math.full_precision
def external_contact_forces(sys: System, state) -> jax.Array:  # noqa: ANN001
    """[nbody, 6] MuJoCo's cfrc_ext from contacts (after mj_rnePostConstraint).

    Per body: (torque about the centre of mass of the body's tree, force) of all contacts on
    it, from the last substep (Gymnasium's Ant/Humanoid contact cost and observation).
    """
    del sys
    return state.cfrc_ext
