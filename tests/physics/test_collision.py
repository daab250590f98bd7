"""Narrow phase against MuJoCo's own contacts, plus finite gradients in degenerate poses."""

import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import physics
from physics import collision as col
from physics import mesh
from physics.system import GEOM_MESH

TYPE_NAMES = {0: "plane", 2: "sphere", 3: "capsule", 4: "ellipsoid", 5: "cylinder", 6: "box"}
SIZES = {
    0: "1 1 0.1",
    2: "0.15",
    3: "0.1 0.3",
    4: "0.2 0.08 0.12",
    5: "0.12 0.2",
    6: "0.1 0.2 0.15",
}


def _model(type1, type2, size2=None):
    """Two geoms; geom1 is static (world) for planes, otherwise both bodies are free."""
    g1 = f'<geom type="{TYPE_NAMES[type1]}" size="{SIZES[type1]}"/>'
    g2 = f'<geom type="{TYPE_NAMES[type2]}" size="{size2 or SIZES[type2]}"/>'
    b1 = g1 if type1 == col.GEOM_PLANE else f"<body><freejoint/>{g1}</body>"
    xml = f"<mujoco><worldbody>{b1}<body><freejoint/>{g2}</body></worldbody></mujoco>"
    return mujoco.MjModel.from_xml_string(xml)


def _random_quat(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def _mujoco_samples(type1, type2, n, rng, spread=0.35):
    """Random poses with at least one MuJoCo contact; returns geom poses and contacts."""
    m = _model(type1, type2)
    d = mujoco.MjData(m)
    samples = []
    while len(samples) < n:
        qpos = np.zeros(m.nq)
        if type1 == col.GEOM_PLANE:
            qpos[:3] = rng.uniform(-0.2, 0.2, 3) + [0, 0, 0.1]
            qpos[3:7] = _random_quat(rng)
        else:
            qpos[3:7] = _random_quat(rng)
            qpos[7:10] = rng.uniform(-spread, spread, 3)
            qpos[10:14] = _random_quat(rng)
        d.qpos[:] = qpos
        mujoco.mj_forward(m, d)
        cons = [(c.dist, c.pos.copy(), c.frame.reshape(3, 3).copy()) for c in d.contact[: d.ncon]]
        if not cons or any(abs(c[0]) < 2e-3 for c in cons):
            continue  # keep clear of the activation threshold where float32 may disagree
        samples.append(
            (d.geom_xpos.copy(), d.geom_xmat.reshape(-1, 3, 3).copy(), m.geom_size.copy(), cons)
        )
    return samples


def _ours(type1, type2, samples):
    fn = jax.jit(
        jax.vmap(lambda p, r, s: col.collide(type1, type2, p[0], r[0], s[0], p[1], r[1], s[1]))
    )
    pos = jnp.asarray(np.stack([s[0] for s in samples]), jnp.float32)
    mat = jnp.asarray(np.stack([s[1] for s in samples]), jnp.float32)
    size = jnp.asarray(np.stack([s[2] for s in samples]), jnp.float32)
    return jax.tree.map(np.asarray, fn(pos, mat, size))


EXACT_PAIRS = [
    (col.GEOM_PLANE, col.GEOM_SPHERE),
    (col.GEOM_PLANE, col.GEOM_CAPSULE),
    (col.GEOM_PLANE, col.GEOM_CYLINDER),
    (col.GEOM_PLANE, col.GEOM_BOX),
    (col.GEOM_PLANE, col.GEOM_ELLIPSOID),
    (col.GEOM_SPHERE, col.GEOM_SPHERE),
    (col.GEOM_SPHERE, col.GEOM_CAPSULE),
    (col.GEOM_CAPSULE, col.GEOM_CAPSULE),
    (col.GEOM_SPHERE, col.GEOM_CYLINDER),
    (col.GEOM_SPHERE, col.GEOM_BOX),
]


@pytest.mark.parametrize(
    "types", EXACT_PAIRS, ids=lambda t: f"{TYPE_NAMES[t[0]]}-{TYPE_NAMES[t[1]]}"
)
def test_matches_mujoco_contacts(types):
    """Same active contacts as MuJoCo: count, dist 1e-4, pos 1e-4, full frame 1e-3."""
    rng = np.random.default_rng(sum(types))
    samples = _mujoco_samples(*types, 12, rng)
    ours = _ours(*types, samples)
    assert ours.dist.shape[1] == col.num_contacts(*types)
    for i, (_, _, _, cons) in enumerate(samples):
        active = np.flatnonzero(ours.dist[i] < 0.0)
        assert len(active) == len(cons), (i, ours.dist[i], [c[0] for c in cons])
        for dist, pos, frame in cons:
            j = active[np.argmin(np.linalg.norm(ours.pos[i, active] - pos, axis=1))]
            np.testing.assert_allclose(ours.dist[i, j], dist, atol=1e-4)
            np.testing.assert_allclose(ours.pos[i, j], pos, atol=1e-4)
            np.testing.assert_allclose(ours.frame[i, j], frame, atol=1e-3)


def test_box_resting_on_a_box_deepest_contact():
    """Box-box (exact: tests/physics/test_polytope.py has its random poses) on poses of old:
    box1 rests on box2's top face with random yaw and tilt; the deepest contact's dist and
    normal are MuJoCo's deepest."""
    types = (col.GEOM_BOX, col.GEOM_BOX)
    rng = np.random.default_rng(7)
    m = _model(*types, size2="0.5 0.5 0.15")
    d = mujoco.MjData(m)
    fn = jax.jit(lambda p, r, s: col.collide(*types, p[0], r[0], s[0], p[1], r[1], s[1]))
    n_checked = 0
    while n_checked < 10:
        d.qpos[:] = 0
        yaw, tilt = rng.uniform(-np.pi, np.pi), rng.uniform(-0.4, 0.4)
        d.qpos[3:7] = [np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)]
        q = np.zeros(4)
        mujoco.mju_axisAngle2Quat(q, [1, 0, 0], tilt)
        mujoco.mju_mulQuat(d.qpos[3:7], q.copy(), d.qpos[3:7].copy())
        d.qpos[0:3] = rng.uniform(-0.05, 0.05, 3) + [0, 0, -0.27]
        d.qpos[10:14] = [1, 0, 0, 0]
        mujoco.mj_forward(m, d)
        if d.ncon == 0 or min(c.dist for c in d.contact[: d.ncon]) > -2e-3:
            continue
        deepest = min(d.contact[: d.ncon], key=lambda c: c.dist)
        pos = jnp.asarray(d.geom_xpos, jnp.float32)
        mat = jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32)
        size = jnp.asarray(m.geom_size, jnp.float32)
        ours = fn(pos, mat, size)
        j = int(jnp.argmin(ours.dist))
        np.testing.assert_allclose(ours.dist[j], deepest.dist, atol=2e-4)
        np.testing.assert_allclose(ours.normal[j], deepest.frame[:3], atol=2e-3)
        n_checked += 1


def test_capsule_lying_on_box_face_gives_two_contacts_like_mujoco():
    m = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><freejoint/><geom type="capsule" size="0.1 0.5"/></body>'
        '<body><freejoint/><geom type="box" size="0.2 0.25 0.3"/></body></worldbody></mujoco>'
    )
    d = mujoco.MjData(m)
    d.qpos[:7] = [0.05, 0.03, 0.38, np.cos(np.pi / 4), 0, np.sin(np.pi / 4), 0]
    d.qpos[10] = 1
    mujoco.mj_forward(m, d)
    pos = jnp.asarray(d.geom_xpos, jnp.float32)
    mat = jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32)
    size = jnp.asarray(m.geom_size, jnp.float32)
    ours = col.collide(3, 6, pos[0], mat[0], size[0], pos[1], mat[1], size[1])
    ref = sorted(d.contact[: d.ncon], key=lambda c: c.pos[0])
    assert len(ref) == 2
    order = np.argsort(np.asarray(ours.pos[:, 0]))
    for c, j in zip(ref, order, strict=True):
        np.testing.assert_allclose(ours.dist[j], c.dist, atol=1e-4)
        np.testing.assert_allclose(ours.pos[j], c.pos, atol=1e-4)
        np.testing.assert_allclose(ours.normal[j], c.frame[:3], atol=1e-3)


def _capsule_box_poses(rng, n):
    """Capsule and box poses touching in MuJoCo, half of them with the capsule near one of the
    box's axes or planes, where MuJoCo's second point comes from each of its cases."""
    for caps, box, margin in [("0.1 0.3", "0.1 0.2 0.15", 0), ("0.2 0.1", "0.3 0.3 0.3", 0.02)]:
        m = mujoco.MjModel.from_xml_string(
            f'<mujoco><worldbody><body><freejoint/><geom type="capsule" size="{caps}" '
            f'margin="{margin}"/></body><body><freejoint/><geom type="box" size="{box}"/>'
            "</body></worldbody></mujoco>"
        )
        d = mujoco.MjData(m)
        found = 0
        while found < n:
            d.qpos[:] = 0
            d.qpos[3:7], d.qpos[10:14] = _random_quat(rng), _random_quat(rng)
            d.qpos[7:10] = rng.uniform(-0.5, 0.5, 3)
            if found % 2:
                axis = np.eye(3)[rng.integers(3)]
                angle = rng.normal(scale=0.2) + rng.integers(2) * np.pi / 2
                mujoco.mju_axisAngle2Quat(d.qpos[3:7], axis, angle)
                d.qpos[10:14] = [1, 0, 0, 0]
            mujoco.mj_forward(m, d)
            if d.ncon:
                found += 1
                yield (
                    d.geom_xpos.copy(),
                    d.geom_xmat.reshape(-1, 3, 3).copy(),
                    m.geom_size.copy(),
                    margin,
                    [(c.dist, c.pos.copy(), c.frame.copy()) for c in d.contact[: d.ncon]],
                )


def test_capsule_box_contacts_are_mujocos_on_random_poses(x64):
    """MuJoCo's capsule-box algorithm, both points: count, order, dist, pos and frame to
    rounding on 1200 touching poses (a third of them with two contacts)."""
    poses = list(_capsule_box_poses(np.random.default_rng(5), 600))
    pos, mat, size, margin = (jnp.asarray(np.stack([p[k] for p in poses])) for k in range(4))
    fn = jax.vmap(lambda p, r, s, mg: col.collide(3, 6, p[0], r[0], s[0], p[1], r[1], s[1], mg))
    ours = jax.tree.map(np.asarray, jax.jit(fn)(pos, mat, size, margin))
    two = 0
    for i, (*_, mg, cons) in enumerate(poses):
        active = np.flatnonzero(ours.dist[i] <= mg)
        assert len(active) == len(cons), (i, ours.dist[i], [c[0] for c in cons])
        two += len(cons) == 2
        for (dist, cpos, frame), j in zip(cons, active, strict=True):
            np.testing.assert_allclose(ours.dist[i, j], dist, rtol=0, atol=1e-12)
            np.testing.assert_allclose(ours.pos[i, j], cpos, rtol=0, atol=1e-12)
            np.testing.assert_allclose(ours.frame[i, j].ravel(), frame, rtol=0, atol=1e-12)
    assert two > 300, two


# A slab 0.1 thick whose underside is at z = 0.55, as a box, a cylinder and a mesh
SLABS = {
    "box": ('type="box" size="1 1 .05"', 1e-12),
    "cylinder": ('type="cylinder" size="1 .05"', 5e-8),  # (MuJoCo's convex collider: 1e-8)
    "mesh": ('type="mesh" mesh="slab"', 5e-8),  # (MuJoCo's float32 vertices: 1e-9)
}


@pytest.mark.parametrize("slab", SLABS)
def test_tilted_capsule_end_under_a_slab_is_exact(x64, slab):
    """Where the deepest point is an end of the capsule's segment (a tilted capsule touching
    with an end), the golden-section bracket gives way to the end itself: the distance is
    MuJoCo's (it was 3e-7 to 5e-7 off)."""
    geom, atol = SLABS[slab]
    corners = " ".join(f"{x} {y} {z}" for z in (-0.05, 0.05) for y in (-1, 1) for x in (-1, 1))
    xml = (
        f'<mujoco><asset><mesh name="slab" vertex="{corners}"/></asset><worldbody>'
        f'<geom {geom} pos="0 0 .6"/><body pos="0 0 .5"><freejoint/>'
        '<geom type="capsule" fromto="-.1 0 0 .2 0 0" size=".05"/></body></worldbody></mujoco>'
    )
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    hull = None
    if sys.geom_hull[0] >= 0:
        hull = jax.tree.map(lambda table: table[sys.geom_hull[0]], sys.mesh_hull)
    d = mujoco.MjData(m)
    for tilt in (0.2, -0.35):  # either end touches
        d.qpos[3:7] = [np.cos(tilt / 2), 0, np.sin(tilt / 2), 0]
        mujoco.mj_forward(m, d)
        assert d.ncon == 1
        pos, mat, size = d.geom_xpos, d.geom_xmat.reshape(-1, 3, 3), m.geom_size
        ours = col.collide(
            3, int(m.geom_type[0]), pos[1], mat[1], size[1], pos[0], mat[0], size[0], 0.0, hull
        )
        np.testing.assert_allclose(float(jnp.min(ours.dist)), d.contact[0].dist, atol=atol)


@pytest.mark.parametrize("offset", [[0.2, 0, 0.15], [1.15, 0, 0.05]], ids=["overlap", "no-overlap"])
def test_parallel_capsules_two_contacts_like_mujoco(offset):
    m = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><freejoint/><geom type="capsule" size="0.1 0.5"/></body>'
        '<body><freejoint/><geom type="capsule" size="0.1 0.5"/></body></worldbody></mujoco>'
    )
    d = mujoco.MjData(m)
    half = [np.cos(np.pi / 4), 0, np.sin(np.pi / 4), 0]
    d.qpos[:] = [0, 0, 0, *half, *offset, *half]
    mujoco.mj_forward(m, d)
    pos = jnp.asarray(d.geom_xpos, jnp.float32)
    mat = jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32)
    size = jnp.asarray(m.geom_size, jnp.float32)
    ours = col.collide(3, 3, pos[0], mat[0], size[0], pos[1], mat[1], size[1])
    ref = sorted(d.contact[: d.ncon], key=lambda c: c.pos[0])
    assert len(ref) == 2
    order = np.argsort(np.asarray(ours.pos[:, 0]))
    for c, j in zip(ref, order, strict=True):
        np.testing.assert_allclose(ours.dist[j], c.dist, atol=1e-4)
        np.testing.assert_allclose(ours.pos[j], c.pos, atol=1e-4)
        np.testing.assert_allclose(ours.normal[j], c.frame[:3], atol=1e-3)


@pytest.mark.parametrize("angle", [30.0, 90.0, 150.0])
def test_crossing_capsules_normal_like_mujoco(angle):
    """Coplanar capsules whose axes cross: the closest points coincide, and MuJoCo takes the
    normal along the cross product of the axes (the finger of dm_control's finger task
    presses into its spinner like this)."""
    m = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><freejoint/><geom type="capsule" size="0.04 0.09"/></body>'
        f'<body euler="0 {angle} 0"><freejoint/><geom type="capsule" size="0.03 0.05"/></body>'
        "</worldbody></mujoco>"
    )
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    pos = jnp.asarray(d.geom_xpos, jnp.float32)
    mat = jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32)
    size = jnp.asarray(m.geom_size, jnp.float32)
    ours = col.collide(3, 3, pos[0], mat[0], size[0], pos[1], mat[1], size[1])
    assert d.ncon == 1
    c = d.contact[0]
    np.testing.assert_allclose(ours.dist[0], c.dist, atol=1e-5)
    np.testing.assert_allclose(ours.pos[0], c.pos, atol=1e-5)
    np.testing.assert_allclose(ours.frame[0], c.frame.reshape(3, 3), atol=1e-5)


def test_upright_capsule_on_plane_frame_like_mujoco():
    """Capsule axis along the plane normal: MuJoCo's frame falls back to t1 = +x."""
    m = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><geom type="plane" size="1 1 .1"/><body><freejoint/>'
        '<geom type="capsule" size="0.1 0.2"/></body></worldbody></mujoco>'
    )
    d = mujoco.MjData(m)
    d.qpos[:7] = [0, 0, 0.25, 1, 0, 0, 0]
    mujoco.mj_forward(m, d)
    pos = jnp.asarray(d.geom_xpos, jnp.float32)
    mat = jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32)
    size = jnp.asarray(m.geom_size, jnp.float32)
    ours = col.collide(0, 3, pos[0], mat[0], size[0], pos[1], mat[1], size[1])
    assert d.ncon == 1 and int(jnp.sum(ours.dist < 0)) == 1
    j = int(jnp.argmin(ours.dist))
    np.testing.assert_allclose(ours.dist[j], d.contact[0].dist, atol=1e-5)
    np.testing.assert_allclose(ours.frame[j].ravel(), d.contact[0].frame, atol=1e-6)


DEGENERATE = {
    "sphere-sphere coincident": (2, 2, [0, 0, 0], [0, 0, 0], 0.0),
    "capsule-capsule parallel": (3, 3, [0, 0, 0], [0.1, 0, 0], 0.0),
    "capsule-capsule crossing": (3, 3, [0, 0, 0], [0, 0, 0], 1.0),
    "sphere-capsule on axis": (2, 3, [0, 0, 0.1], [0, 0, 0], 0.0),
    "sphere-box centre": (2, 6, [0, 0, 0], [0, 0, 0], 0.0),
    "capsule-box centre": (3, 6, [0, 0, 0], [0, 0, 0], 0.0),
    "capsule-box along a face": (3, 6, [0, 0, 0], [-0.19, 0, 0], 0.0),
    "capsule-box end on a face": (3, 6, [0, 0, 0], [0, 0, -0.49], 0.0),
    "box-box coincident": (6, 6, [0, 0, 0], [0, 0, 0], 0.0),
    "plane-box flat": (0, 6, [0, 0, 0], [0, 0, 0.1], 0.0),
    "plane-capsule upright": (0, 3, [0, 0, 0], [0, 0, 0.2], 0.0),
    "plane-cylinder flat": (0, 5, [0, 0, 0], [0, 0, 0.2], 0.0),
    "sphere-cylinder on axis": (2, 5, [0, 0, 0], [0, 0, 0], 0.0),
    "capsule-cylinder coaxial": (3, 5, [0, 0, 0], [0, 0, 0], 0.0),
    "cylinder-cylinder coaxial": (5, 5, [0, 0, 0], [0, 0, 0], 0.0),
    "cylinder-cylinder stacked": (5, 5, [0, 0, 0], [0, 0, 0.39], 0.0),
    "cylinder-box centre": (5, 6, [0, 0, 0], [0, 0, 0], 0.0),
    "cylinder-box flat": (5, 6, [0, 0, 0], [0, 0, 0.29], 0.0),
}


@pytest.mark.parametrize("case", list(DEGENERATE), ids=list(DEGENERATE))
def test_gradients_finite_in_degenerate_poses(case):
    t1, t2, p1, p2, angle = DEGENERATE[case]
    size = {
        0: [1.0, 1.0, 0.1],
        2: [0.1, 0, 0],
        3: [0.1, 0.3, 0],
        5: [0.1, 0.2, 0],
        6: [0.1, 0.1, 0.1],
    }

    def rot(a):
        c, s = jnp.cos(a), jnp.sin(a)
        return jnp.array([[1.0, 0, 0], [0, c, -s], [0, s, c]])

    def loss(x):
        con = col.collide(
            t1,
            t2,
            x[:3],
            rot(x[6]),
            jnp.array(size[t1]),
            x[3:6],
            rot(x[6] + angle),
            jnp.array(size[t2]),
        )
        live = con.dist < 1.0
        return jnp.sum(jnp.where(live, con.dist + jnp.sum(con.pos + con.frame[:, 0], -1), 0.0))

    x = jnp.array([*p1, *p2, 0.0], jnp.float32)
    value, grad = jax.jit(jax.value_and_grad(loss))(x)
    assert np.isfinite(value) and np.all(np.isfinite(grad)), (value, grad)


def test_jit_vmap_shapes_static():
    pos = jnp.zeros((5, 3))
    mat = jnp.broadcast_to(jnp.eye(3), (5, 3, 3))
    size = jnp.full((5, 3), 0.1)
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    box = jax.tree.map(jnp.asarray, mesh.process(0.1 * corners, None).hull)
    for (t1, t2), n in col._NUM_CONTACTS.items():
        h1, h2 = (box if t == GEOM_MESH else None for t in (t1, t2))
        fn = jax.vmap(
            lambda p, r, s, t1=t1, t2=t2, h1=h1, h2=h2: col.collide(
                t1, t2, p, r, s, p + 0.05, r, s, hull2=h2, hull1=h1
            )
        )
        out = jax.eval_shape(fn, pos, mat, size)
        assert out.dist.shape == (5, n) and out.frame.shape == (5, n, 3, 3)
    with pytest.raises(ValueError, match="unsupported"):
        col.collide(6, 2, pos[0], mat[0], size[0], pos[0], mat[0], size[0])


@pytest.mark.parametrize(
    "types", [(2, 3), (3, 3), (2, 6), (3, 6), (0, 6), (0, 5), (2, 5), (3, 5), (5, 5), (5, 6)]
)
def test_dist_gradient_matches_finite_differences(types):
    """d dist / d pos2 of the deepest slot equals a central difference in a generic pose."""
    rng = np.random.default_rng(3)
    size = jnp.array([0.1, 0.2, 0.15])
    mat1 = jnp.asarray(_rot(rng), jnp.float32)
    mat2 = jnp.asarray(_rot(rng), jnp.float32)
    pos1 = jnp.zeros(3)
    pos2 = jnp.array([0.05, -0.1, 0.2]) if types[0] else jnp.array([0.05, -0.1, 0.12])

    def deepest(p2):
        return jnp.min(col.collide(*types, pos1, mat1, size, p2, mat2, size).dist)

    grad = np.asarray(jax.jit(jax.grad(deepest))(pos2))
    f = jax.jit(deepest)
    h = 1e-3
    fd = np.array([(f(pos2.at[k].add(h)) - f(pos2.at[k].add(-h))) / (2 * h) for k in range(3)])
    assert float(f(pos2)) < 0.05
    np.testing.assert_allclose(grad, fd, atol=2e-3)


def _rot(rng):
    q = _random_quat(rng)
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, q)
    return mat.reshape(3, 3)


def _pair_at(type1, type2, pos1, quat1, pos2, quat2):
    """MuJoCo's contacts and our slots for geom1 at (pos1, quat1) and geom2 at (pos2, quat2)."""
    m = _model(type1, type2)
    d = mujoco.MjData(m)
    d.qpos[:] = [*pos1, *quat1, *pos2, *quat2]
    mujoco.mj_forward(m, d)
    pos = jnp.asarray(d.geom_xpos, jnp.float32)
    mat = jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32)
    size = jnp.asarray(m.geom_size, jnp.float32)
    ours = col.collide(type1, type2, pos[0], mat[0], size[0], pos[1], mat[1], size[1])
    return d.contact[: d.ncon], ours


# sphere (radius 0.15) against an upright cylinder (radius 0.12, half-height 0.2) at the origin
SPHERE_CYLINDER = {
    "side": [0.25, 0.05, 0.0],
    "cap": [0.03, -0.02, 0.33],
    "rim": [0.18, 0.0, 0.3],
    "inside, nearer the side": [0.08, 0.0, 0.02],
    "inside, nearer the cap": [0.01, 0.02, -0.17],
}


@pytest.mark.parametrize("case", list(SPHERE_CYLINDER), ids=list(SPHERE_CYLINDER))
def test_sphere_cylinder_each_feature_like_mujoco(case):
    """Side, cap, rim and both deep cases: MuJoCo's one contact, dist/pos/frame."""
    upright = [1, 0, 0, 0]
    sphere_at = SPHERE_CYLINDER[case]
    # geom1 is the sphere's free body, geom2 the cylinder's (MuJoCo orders sphere < cylinder)
    cons, ours = _pair_at(2, 5, sphere_at, upright, [0, 0, 0], upright)
    assert len(cons) == 1 and int(jnp.sum(ours.dist < 0)) == 1
    np.testing.assert_allclose(ours.dist[0], cons[0].dist, atol=1e-5)
    np.testing.assert_allclose(ours.pos[0], cons[0].pos, atol=1e-5)
    np.testing.assert_allclose(ours.frame[0].ravel(), cons[0].frame, atol=1e-5)


# a capsule (radius 0.1, half-length 0.3) against an upright cylinder (radius 0.12, half-height
# 0.2) at the origin: its centre, its axis's tilt up from level (degrees, along world y) and
# how many contacts MuJoCo reports
CAPSULE_CYLINDER = {  # (centre, tilt, MuJoCo's contact count)
    "side": ([0.2, 0.0, 0.05], 0.0, 1),
    "side, skewed": ([0.15, 0.12, -0.1], 0.0, 1),
    "across the cap": ([0.03, 0.0, 0.28], 0.0, 2),
    "end on the cap, tilted": ([0.0, 0.25, 0.299 + 0.3 * np.sin(np.radians(3))], 3.0, 1),
    "over the rim, tilted": ([0.0, 0.0, 0.28], 3.0, 2),
}


@pytest.mark.parametrize("case", list(CAPSULE_CYLINDER), ids=list(CAPSULE_CYLINDER))
def test_capsule_against_upright_cylinder_like_mujoco(case):
    """A pusher's case and the ways a capsule lies on a cap: MuJoCo's contacts, all of them.
    Across the cap, two points (the line clipped to the cap's polygon); a tilted end on the
    cap, one, at its depth along the cap's normal; tilted over the rim (a rim against the
    segment), its one point twice."""
    centre, tilt, count = CAPSULE_CYLINDER[case]
    quat = np.zeros(4)
    mujoco.mju_axisAngle2Quat(quat, [-1.0, 0.0, 0.0], np.radians(90 - tilt))  # z towards +y
    cons, ours = _pair_at(3, 5, centre, quat, [0, 0, 0], [1, 0, 0, 0])
    live = np.flatnonzero(np.asarray(ours.dist) < 0)
    assert len(live) == len(cons) == count, (np.asarray(ours.dist), [c.dist for c in cons])
    order = live[np.argsort(ours.pos[live, 1])]
    for c, j in zip(sorted(cons, key=lambda c: c.pos[1]), order, strict=True):
        np.testing.assert_allclose(ours.dist[j], c.dist, atol=1e-5)
        np.testing.assert_allclose(ours.pos[j], c.pos, atol=1e-5)
        np.testing.assert_allclose(ours.frame[j, 0], c.frame[:3], atol=1e-5)


@pytest.mark.parametrize("offset", [[0.249, 0.0], [0.0, 0.249], [0.176, 0.176]])
def test_capsule_level_with_a_cylinders_side_touches_within_it(offset):
    """A capsule standing beside a cylinder, longer than it: touching along a segment, MuJoCo
    puts its one point somewhere in the overlap (its EPA's choice); ours lies in the overlap
    too, on the side, not at the capsule's end beyond the cylinder."""
    xml = f"""<mujoco><worldbody><geom type="cylinder" size=".2 .1"/>
      <body pos="{offset[0]} {offset[1]} 0.05"><freejoint/><geom type="capsule" size=".05 .3"/>
      </body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    pos, mat, size = (
        jnp.asarray(x, jnp.float32)
        for x in (d.geom_xpos, d.geom_xmat.reshape(-1, 3, 3), m.geom_size)
    )
    ours = jax.tree.map(
        np.asarray, col.collide(3, 5, pos[1], mat[1], size[1], pos[0], mat[0], size[0])
    )
    assert d.ncon == 1 and np.sum(ours.dist < 0) == 1
    np.testing.assert_allclose(ours.dist[0], d.contact[0].dist, atol=1e-6)
    np.testing.assert_allclose(ours.frame[0, 0], d.contact[0].frame[:3], atol=1e-6)
    assert abs(ours.pos[0, 2]) <= 0.1 + 1e-6  # within the cylinder's height
    np.testing.assert_allclose(np.hypot(*ours.pos[0, :2]), 0.2 + ours.dist[0] / 2, atol=1e-6)


def test_program_size_does_not_grow_with_the_contact_slots():
    """Ten free bodies of one ball each, then of four balls each (45 and 720 candidate
    pairs): the step's program has as many operations, as per-slot work is vectorised. A
    per-slot unrolled sum (the contact wrenches' scatter) had made leap_hand's 11k slots a
    program too big to compile."""

    def ops(per_body: int) -> int:
        geoms = "".join(f'<geom pos="{0.3 * k} 0 0" size="0.1"/>' for k in range(per_body))
        bodies = "".join(f'<body pos="{2 * i} 0 0.2"><freejoint/>{geoms}</body>' for i in range(10))
        with warnings.catch_warnings():  # 720 slots, solved in full on purpose
            warnings.simplefilter("ignore", physics.MJCFWarning)
            sys = physics.load_mjcf(f"<mujoco><worldbody>{bodies}</worldbody></mujoco>")
        text = jax.jit(physics.step).lower(sys, physics.init(sys), jnp.zeros(0)).as_text()
        return text.count("\n")

    small, large = ops(1), ops(4)
    assert large < 1.1 * small, (small, large)
