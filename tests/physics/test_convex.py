"""Cylinder-box and cylinder-cylinder contacts against MuJoCo 4.0 and against the geometry."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import physics
from physics import collision as col
from physics import convex
from physics.step import step
from tests.physics.shapes import free_pair_qpos


def _geom(kind, size, pos="0 0 0", euler="0 0 0"):
    return f'<geom type="{kind}" size="{size}" pos="{pos}" euler="{euler}"/>'


BOX, CAN = _geom("box", ".2 .2 .2"), _geom("cylinder", ".1 .2")
# geom of body 1, geom of body 2, whether MuJoCo's points follow from the geometry (segments
# clipped to a face, one point; a cap clipped against a face gives points of MuJoCo's own
# choice on its 16-gon)
POSES = {
    "can tilted into a box face": (BOX, _geom("cylinder", ".1 .2", "0 0 .35", "30 20 0"), True),
    "can upright on a box": (BOX, _geom("cylinder", ".1 .2", "0 0 .35"), False),
    "can lying on a box": (BOX, _geom("cylinder", ".1 .2", "0 0 .29", "90 0 0"), True),
    "long can lying over a box's edges": (
        BOX,
        _geom("cylinder", ".1 .4", "0 0 .29", "90 0 0"),
        True,
    ),
    "wide can on a box face": (BOX, _geom("cylinder", ".3 .1", "0 0 .29"), True),
    "can across a box edge": (BOX, _geom("cylinder", ".1 .2", ".25 0 .25", "0 45 0"), True),
    "box edge on a cap": (
        _geom("cylinder", ".3 .1"),
        _geom("box", ".1 .1 .1", "0 0 .23", "45 0 0"),
        True,
    ),
    "cans side by side": (CAN, _geom("cylinder", ".1 .2", ".19 0 0"), False),
    "cans stacked": (CAN, _geom("cylinder", ".1 .2", "0 0 .39"), False),
    "cans crossed": (CAN, _geom("cylinder", ".1 .2", ".19 0 0", "90 0 0"), True),
    "can's rim on a can": (CAN, _geom("cylinder", ".1 .2", ".15 0 .35", "0 40 0"), True),
}


def _body(geom, pos="0 0 0", euler="0 0 0"):
    return f'<body pos="{pos}" euler="{euler}"><freejoint/>{geom}</body>'


def _pair(g1, g2):
    """MuJoCo's contacts and ours for two free bodies holding one geom each."""
    xml = f"<mujoco><worldbody>{_body(g1)}{_body(g2)}</worldbody></mujoco>"
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    first = 0 if m.geom_type[0] <= m.geom_type[1] else 1
    i, j = first, 1 - first
    args = [
        jnp.asarray(x, jnp.float32)
        for x in (d.geom_xpos, d.geom_xmat.reshape(-1, 3, 3), m.geom_size)
    ]
    ours = col.collide(
        int(m.geom_type[i]), int(m.geom_type[j]), *(a[i] for a in args), *(a[j] for a in args)
    )
    return d.contact[: d.ncon], jax.tree.map(np.asarray, ours)


@pytest.mark.parametrize("pose", list(POSES), ids=list(POSES))
def test_contacts_like_mujoco(pose):
    """As many contacts as MuJoCo, with its distances and normal; where its points follow from
    the geometry (a segment clipped to a face, one point), its points too."""
    g1, g2, points_determined = POSES[pose]
    cons, ours = _pair(g1, g2)
    live = ours.dist < 0
    assert live.sum() == len(cons), (ours.dist, [c.dist for c in cons])
    np.testing.assert_allclose(np.sort(ours.dist[live]), np.sort([c.dist for c in cons]), atol=1e-4)
    for c in cons:
        np.testing.assert_allclose(ours.frame[live][0, 0], c.frame[:3], atol=3e-3)
        if points_determined:
            assert np.min(np.linalg.norm(ours.pos[live] - c.pos, axis=1)) < 1e-4


def _random_poses(kind2, n, rng):
    """n random poses of a cylinder (radius .12, half-height .2) and a box or thinner cylinder
    that MuJoCo reports touching, with MuJoCo's deepest distance and normal."""
    g2 = (
        '<geom type="box" size=".1 .2 .15"/>'
        if kind2 == col.GEOM_BOX
        else '<geom type="cylinder" size=".08 .25"/>'
    )
    xml = f"""<mujoco><worldbody><body><freejoint/><geom type="cylinder" size=".12 .2"/></body>
      <body><freejoint/>{g2}</body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    poses, theirs = [], []
    while len(poses) < n:
        d.qpos[:] = free_pair_qpos(rng, 0.4)
        mujoco.mj_forward(m, d)
        if d.ncon == 0 or min(c.dist for c in d.contact[: d.ncon]) > -1e-3:
            continue
        deepest = min(d.contact[: d.ncon], key=lambda c: c.dist)
        poses.append((d.geom_xpos.copy(), d.geom_xmat.reshape(-1, 3, 3).copy(), m.geom_size.copy()))
        theirs.append((deepest.dist, deepest.frame[:3].copy()))
    pos, mat, size = (jnp.asarray(np.stack([p[k] for p in poses]), jnp.float32) for k in range(3))
    return pos, mat, size, np.array([t[0] for t in theirs]), np.array([t[1] for t in theirs])


@pytest.mark.parametrize("kind2", [col.GEOM_BOX, col.GEOM_CYLINDER], ids=["box", "cylinder"])
def test_depth_is_the_minimum_translation(kind2):
    """On random touching poses our depth is the minimum translation distance: no direction of
    400k separates the shapes less than our normal does; our normal's gap is our depth; and
    where MuJoCo's own normal separates the shapes by its reported depth and that depth is the
    minimum (where its EPA found it), we report that depth and normal."""
    rng = np.random.default_rng(0)
    pos, mat, size, mj_dist, mj_normal = _random_poses(kind2, 150, rng)
    ours = jax.jit(
        jax.vmap(lambda p, r, s: convex.separating_axis(kind2, p[0], r[0], s[0], p[1], r[1], s[1]))
    )
    dist, normal = map(np.asarray, ours(pos, mat, size))
    gap = jax.jit(
        jax.vmap(lambda p, r, s, n: convex._Gap(kind2, p[0], r[0], s[0], p[1], r[1], s[1])(n))
    )
    dirs = rng.normal(size=(400_000, 3))
    dirs = jnp.asarray(dirs / np.linalg.norm(dirs, axis=1, keepdims=True), jnp.float32)
    sampled = np.array(
        [
            float(jnp.max(gap(pos[i : i + 1], mat[i : i + 1], size[i : i + 1], dirs[None])[0]))
            for i in range(len(dist))
        ]
    )
    assert np.all(dist >= sampled - 2e-5), np.max(sampled - dist)
    np.testing.assert_allclose(
        np.asarray(gap(pos, mat, size, jnp.asarray(normal[:, None]))[:, 0]), dist, atol=1e-6
    )
    at_theirs = np.asarray(gap(pos, mat, size, jnp.asarray(mj_normal[:, None], jnp.float32))[:, 0])
    # MuJoCo's EPA may stop at a face that is not the minimum (4.0.1 does on 3 of these box
    # poses, where a sampled direction separates the shapes less than its normal): compare where
    # its normal attains its depth and no sampled direction beats that depth.
    consistent = (np.abs(at_theirs - mj_dist) < 1e-4) & (mj_dist >= sampled - 1e-4)
    assert consistent.sum() > 0.7 * len(dist)
    np.testing.assert_allclose(dist[consistent], mj_dist[consistent], atol=2e-4)
    assert np.percentile(np.linalg.norm(normal - mj_normal, axis=1)[consistent], 95) < 1e-2


def test_separated_within_margin_like_mujoco():
    """Apart but within a margin: the distance is the exact gap (MuJoCo's GJK). The normal of
    a smooth optimum (a rim against a side) is as good as float32 resolves its flat top."""
    margin = ' margin=".1"/>'
    xml = (
        "<mujoco><worldbody>"
        + _body(_geom("cylinder", ".1 .2").replace("/>", margin))
        + _body(_geom("box", ".05 .1 .08").replace("/>", margin), ".3 .05 .1", "20 50 10")
        + _body(_geom("cylinder", ".05 .1").replace("/>", margin), "-.26 0 .2", "80 10 0")
        + "</worldbody></mujoco>"
    )
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    args = [
        jnp.asarray(x, jnp.float32)
        for x in (d.geom_xpos, d.geom_xmat.reshape(-1, 3, 3), m.geom_size)
    ]
    theirs = {tuple(sorted((c.geom1, c.geom2))): c for c in d.contact[: d.ncon]}
    assert set(theirs) == {(0, 1), (0, 2)} and all(c.dist > 0 for c in theirs.values())
    for j in (1, 2):
        ours = col.collide(
            5, int(m.geom_type[j]), *(a[0] for a in args), *(a[j] for a in args), margin=0.2
        )
        k = int(np.argmin(ours.dist))
        np.testing.assert_allclose(ours.dist[k], theirs[(0, j)].dist, atol=1e-5)
        np.testing.assert_allclose(ours.frame[k, 0], theirs[(0, j)].frame[:3], atol=1e-3)


FLOOR_BOX = '<geom type="box" size=".5 .5 .1"/>'
SCENES = {
    "can stands on a box": FLOOR_BOX + _body(CAN, "0 0 .3"),
    "box rests on a can": _geom("cylinder", ".3 .1") + _body(_geom("box", ".1 .1 .1"), "0 0 .2"),
    "tilted can drops on a box": FLOOR_BOX + _body(CAN, "0 0 .45", "0.6 0.3 0"),
    "two cans stacked on the floor": '<geom type="plane" size="2 2 .1"/>'
    + _body(CAN, "0 0 .2")
    + _body(_geom("cylinder", ".08 .2"), "0.02 0 .6"),
}


@pytest.mark.parametrize("scene", list(SCENES), ids=list(SCENES))
def test_scenes_track_mujoco(scene):
    """Resting, dropping and stacking in the step: 300 steps (0.6 s) against MuJoCo; resting
    bodies stay put (no sinking past the soft margin, no jitter)."""
    xml = f'<mujoco><compiler angle="radian"/><worldbody>{SCENES[scene]}</worldbody></mujoco>'
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    state = physics.init(sys, m.qpos0)
    advance = jax.jit(lambda s: step(sys, s, jnp.zeros(0)))
    for _ in range(300):
        state = advance(state)
        mujoco.mj_step(m, d)
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=1e-3)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, atol=1e-2)
    assert np.sum(np.asarray(state.contact.dist) < 0) >= 1
    if "drops" not in scene:  # placed at rest: still at rest, no jitter, sunk < 1 mm
        assert np.abs(np.asarray(state.qd)).max() < 1e-3
        np.testing.assert_allclose(np.asarray(state.q), m.qpos0, atol=1e-3)
