"""Ellipsoid contacts (physics/smooth.py) against the geometry and against MuJoCo 4.0.

MuJoCo collides ellipsoids with its GJK/EPA. Where EPA meets a flat face it stops short of the
exact answer by up to ~1e-4 (a normal tilted off a flat floor, a point moved along a face), so
trajectories are compared to 1e-4 where only curved surfaces touch and to 2e-3 where a face
takes part; the geometry itself is checked exactly: no direction separates two geoms more
than the reported normal does.
"""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import physics
from physics import collision as col
from physics import smooth
from physics.step import step
from tests.physics.shapes import free_pair_qpos
from tests.physics.test_hfield import _free, _terrains, _track

EGG = '<geom type="ellipsoid" size=".25 .15 .1"/>'
TET = '<asset><mesh name="tet" vertex="-.5 -.5 0  .5 -.5 0  0 .5 0  0 0 -.3"/></asset>'
PARTNERS = {  # the other geom of a random pose, and what the model needs for it
    "sphere": ('<geom type="sphere" size=".15"/>', ""),
    "capsule": ('<geom type="capsule" size=".1 .2"/>', ""),
    "ellipsoid": ('<geom type="ellipsoid" size=".2 .12 .08"/>', ""),
    "cylinder": ('<geom type="cylinder" size=".15 .1"/>', ""),
    "box": ('<geom type="box" size=".2 .15 .1"/>', ""),
    "mesh": ('<geom type="mesh" mesh="tet"/>', TET),
}


def _touching(partner: str, n: int, rng: np.random.Generator):
    """n random poses of the egg and a partner that MuJoCo reports overlapping by 0.5 to 30 mm:
    (MuJoCo's model, our System, the geoms' positions [n, 2, 3] and rotations [n, 2, 3, 3]
    (our kinematics: a mesh's frame is its principal axes, whose signs MuJoCo picks its own
    way), MuJoCo's (distance, normal, point) per pose)."""
    geom, asset = PARTNERS[partner]
    xml = f"""<mujoco>{asset}<worldbody><body><freejoint/>{EGG}</body>
      <body><freejoint/>{geom}</body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    poses, theirs = [], []
    while len(poses) < n:
        d.qpos[:] = free_pair_qpos(rng, 0.35)
        mujoco.mj_forward(m, d)
        if d.ncon != 1 or not -0.03 < d.contact[0].dist < -5e-4:
            continue
        poses.append(d.qpos.copy())
        c = d.contact[0]  # (a view of d: copied before the next pose overwrites it)
        theirs.append((c.dist, c.frame[:3].copy(), c.pos.copy()))
    sys = physics.load_mjcf(xml)
    kin = jax.vmap(lambda q: physics.forward_kinematics(sys, q))(
        jnp.asarray(np.stack(poses), jnp.float32)
    )
    return m, sys, (kin.geom_xpos, kin.geom_xmat), theirs


def _hull(sys: physics.System, geom: int):
    """A mesh geom's convex hull row (None for other geoms)."""
    row = sys.geom_hull[geom]
    return None if row < 0 else jax.tree.map(lambda t: t[row], sys.mesh_hull)


def _shapes(m: mujoco.MjModel, sys: physics.System, pos, mat):
    """The pair as (type1, type2) and their Shapes, geom1 the lower type (MuJoCo's order)."""
    g1, g2 = sorted((0, 1), key=lambda g: m.geom_type[g])
    shapes = [
        smooth.Shape.of(
            int(m.geom_type[g]),
            pos[g],
            mat[g],
            jnp.asarray(m.geom_size[g], jnp.float32),
            _hull(sys, g),
        )
        for g in (g1, g2)
    ]
    return (int(m.geom_type[g1]), int(m.geom_type[g2])), shapes, (g1, g2)


@pytest.mark.parametrize("partner", list(PARTNERS))
def test_depth_is_the_minimum_translation_and_mujocos(partner):
    """On random overlapping poses: no direction of 100k separates the geoms more than ours
    by 0.1 mm (our depth is the minimum translation distance), our normal separates
    them by our depth, and distance, normal and point are MuJoCo's in 9 poses of 10 (EPA
    stops short on some)."""
    rng = np.random.default_rng(0)
    m, sys, (pos, mat), theirs = _touching(partner, 30, rng)
    (t1, t2), _, (g1, g2) = _shapes(m, sys, pos[0], mat[0])
    size1, size2 = (jnp.asarray(m.geom_size[g], jnp.float32) for g in (g1, g2))
    hulls = {"hull2": _hull(sys, g2)} if t2 == col.GEOM_MESH else {}

    def ours(p, r):
        return col.collide(t1, t2, p[g1], r[g1], size1, p[g2], r[g2], size2, **hulls)

    def best_sampled(p, r, dirs):
        _, (a, b), _ = _shapes(m, sys, p, r)
        return -jnp.min(jax.vmap(lambda n: smooth._gap(a, b, n))(dirs))

    contact = jax.jit(jax.vmap(ours))(pos, mat)
    dist, normal, point = (np.asarray(x[:, 0]) for x in (contact.dist, contact.normal, contact.pos))
    dirs = rng.normal(size=(100_000, 3))
    dirs = jnp.asarray(dirs / np.linalg.norm(dirs, axis=1, keepdims=True), jnp.float32)
    sampled = np.asarray(jax.jit(jax.vmap(best_sampled, (0, 0, None)))(pos, mat, dirs))
    assert np.all(dist >= sampled - 1e-4), np.max(sampled - dist)
    gap_at_ours = jax.jit(jax.vmap(lambda p, r, n: -smooth._gap(*_shapes(m, sys, p, r)[1], n)))
    np.testing.assert_allclose(gap_at_ours(pos, mat, jnp.asarray(normal)), dist, atol=1e-6)
    their_dist, their_normal, their_pos = (np.array(x) for x in zip(*theirs, strict=True))
    close = (
        (np.abs(dist - their_dist) < 1e-4)
        & (np.linalg.norm(normal - their_normal, axis=1) < 1e-2)
        & (np.linalg.norm(point - their_pos, axis=1) < 1e-3)
    )
    assert close.mean() >= 0.9, np.nonzero(~close)


def test_apart_within_a_margin_like_mujocos_gjk():
    """Apart but within the geoms' margin: the exact gap, MuJoCo's GJK distance."""
    margin = ' margin=".1"/>'
    bodies = "".join(
        f'<body pos="{p}" euler="{e}"><freejoint/>{g.replace("/>", margin)}</body>'
        for g, p, e in [
            (EGG, "0 0 0", "0 0 0"),
            ('<geom type="box" size=".1 .1 .05"/>', ".33 .1 .05", "20 50 10"),
            ('<geom type="capsule" size=".05 .1"/>', "-.2 .2 .1", "80 10 0"),
            ('<geom type="ellipsoid" size=".1 .05 .08"/>', "0 -.1 .25", "30 0 60"),
        ]
    )
    xml = f"<mujoco><worldbody>{bodies}</worldbody></mujoco>"
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    sys = physics.load_mjcf(xml)
    state = physics.init(sys, jnp.asarray(d.qpos, jnp.float32))
    ours = physics.step(sys, state, jnp.zeros(0), n_substeps=1)  # contacts of the start pose
    theirs = {tuple(sorted(c.geom)): c for c in d.contact[: d.ncon]}
    theirs = {k: c for k, c in theirs.items() if {0, 3} & set(k)}  # the ellipsoids' pairs
    assert len(theirs) >= 3 and all(c.dist > 0 for c in theirs.values())
    found = np.asarray(ours.contact.dist)
    for c in theirs.values():
        assert np.min(np.abs(found - c.dist)) < 1e-5, (c.dist, found)


def _body(geom: str, pos: str, euler: str = "0 0 0") -> str:
    return f'<body pos="{pos}" euler="{euler}"><freejoint/>{geom}</body>'


SMALL_EGG = '<geom type="ellipsoid" size=".15 .1 .07"/>'
FLOOR = '<geom type="box" size=".5 .5 .1"/>'
DOME = '<geom type="ellipsoid" size=".3 .2 .1"/>'
SCENES = {  # name: (asset, world, tolerance on q after 300 steps)
    "egg rests on a box": ("", FLOOR + _body(SMALL_EGG, "0 0 .17"), 1e-5),
    "egg stacked on an egg": (
        "",
        '<geom type="plane" size="2 2 .1"/>'
        + _body('<geom type="ellipsoid" size=".2 .15 .1"/>', "0 0 .1")
        + _body(SMALL_EGG, ".02 0 .3", "0 .2 .1"),
        1e-4,
    ),
    "ball drops on an egg": ("", DOME + _body('<geom size=".05"/>', ".1 .05 .3"), 1e-4),
    "tilted egg drops on a box": ("", FLOOR + _body(SMALL_EGG, "0 0 .4", ".5 .3 0"), 2e-3),
    "capsule drops on an egg": (
        "",
        DOME + _body('<geom type="capsule" size=".04 .1"/>', ".05 0 .3", ".3 1.2 0"),
        2e-3,
    ),
    "egg drops on a mesh": (
        TET,
        '<geom type="mesh" mesh="tet"/>' + _body(SMALL_EGG, ".05 0 .3", ".4 .2 0"),
        2e-3,
    ),
}


@pytest.mark.parametrize("scene", list(SCENES), ids=list(SCENES))
def test_scenes_track_mujoco(scene):
    """Resting, stacking and dropping in the step: 300 steps (0.6 s) against MuJoCo; the egg
    placed at rest on a box stays put (no sinking past the soft margin, no jitter)."""
    asset, world, tol = SCENES[scene]
    xml = f'<mujoco><compiler angle="radian"/>{asset}<worldbody>{world}</worldbody></mujoco>'
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    run = jax.jit(
        lambda s: jax.lax.scan(lambda s, _: (step(sys, s, jnp.zeros(0)), None), s, length=300)[0]
    )
    state = run(physics.init(sys, m.qpos0))
    mujoco.mj_step(m, d, nstep=300)
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=tol)
    if "rests" in scene:
        assert np.abs(np.asarray(state.qd)).max() < 1e-4
        np.testing.assert_allclose(np.asarray(state.q), m.qpos0, atol=1e-3)


def test_eggs_on_terrain_track_mujoco_and_rest_exactly():
    """Down the tilted, turned hill and onto the ramp, one contact per prism as MuJoCo; at
    rest over a flat cell's diagonal the egg has MuJoCo's two contacts and stays put, where
    MuJoCo's EPA tilts one normal by 2e-3 and lets it creep."""
    xml = _terrains(
        '<body><freejoint/><geom type="ellipsoid" size="0.15 0.1 0.07"/></body>',
        ("hill", "flat", "ramp"),
    )
    tilt = np.array([0.95, 0.2, 0.1, 0.2]) / np.linalg.norm([0.95, 0.2, 0.1, 0.2])
    moving = [_free(0.3, -0.2, 0.6), _free(0.5, 0.5, 0.4, tilt), _free(-2.87, 0.07, 0.2, tilt)]
    resting = _free(-3 + 0.1, 0.1, 0.0695)
    ours, theirs, n_ours, n_theirs = _track(xml, [*moving, resting], 200)
    np.testing.assert_allclose(ours[:3], theirs[:3], atol=2e-3)
    np.testing.assert_array_equal(n_ours, n_theirs)
    assert n_ours[3] == 2
    np.testing.assert_allclose(ours[3, :2], resting[:2], atol=1e-6)
    assert 0.0695 < ours[3, 2] < 0.07


def test_egg_contacts_have_finite_gradients():
    """d(height after landing on a box)/d(drop height): finite and nonzero."""
    xml = f"<mujoco><worldbody>{FLOOR}{_body(SMALL_EGG, '0 0 .3', '.3 .2 0')}</worldbody></mujoco>"
    sys = physics.load_mjcf(xml)
    q0 = physics.init(sys).q

    def landed(z0: jax.Array) -> jax.Array:
        sim = lambda s, _: (step(sys, s, jnp.zeros(0)), None)  # noqa: E731
        return jax.lax.scan(sim, physics.init(sys, q0.at[2].set(z0)), length=60)[0].q[0]

    grad = jax.jit(jax.grad(landed))(jnp.float32(0.2))
    assert np.isfinite(grad) and grad != 0
