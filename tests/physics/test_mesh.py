"""Mesh geoms against MuJoCo 4.0: mesh files, mass properties, the geom frame, plane-mesh
contacts and a tumbling, bouncing, settling mesh body."""

import struct
import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco_parity import drive_alongside
from scipy.spatial import ConvexHull
from shapes import floats, prism, rock

import physics
from physics import dynamics, mesh
from physics.step import smooth_force


def _l_prism() -> tuple[np.ndarray, np.ndarray]:
    """A closed, outward-wound L-shaped prism: non-convex, so every inertia mode differs."""
    poly = np.array([[0, 0], [2, 0], [2, 1], [1, 1], [1, 2], [0, 2]], float) * 0.1
    n = len(poly)
    vertices = np.array([[x, y, z] for z in (0.0, 0.05) for x, y in poly])
    faces = []
    for a, b, c in [(0, 1, 2), (0, 2, 3), (0, 3, 4), (0, 4, 5)]:
        faces += [(a, c, b), (a + n, b + n, c + n)]
    for i in range(n):
        j = (i + 1) % n
        faces += [(i, j, j + n), (i, j + n, i + n)]
    return vertices, np.array(faces)


def _write(path, vertices: np.ndarray, faces: np.ndarray, fmt: str) -> None:
    if fmt == "stl":  # binary
        tri = vertices[faces].astype("<f4")
        with open(path, "wb") as f:
            f.write(b"\0" * 80 + struct.pack("<I", len(faces)))
            for t in tri:
                f.write(np.zeros(3, "<f4").tobytes() + t.tobytes() + b"\0\0")
    elif fmt == "obj":  # 1-based, the first face by a negative (relative) index
        lines = ["v " + floats(v) for v in vertices]
        lines += ["f " + " ".join(str(i + 1) for i in f) for f in faces]
        lines[len(vertices)] = "f " + " ".join(str(i - len(vertices)) for i in faces[0])
        path.write_text("\n".join(lines))
    else:  # MuJoCo's msh: counts, then vertices and faces
        header = struct.pack("<4i", len(vertices), 0, 0, len(faces))
        body = vertices.astype("<f4").tobytes() + faces.astype("<i4").tobytes()
        path.write_bytes(header + body)


@pytest.mark.parametrize("inertia", ["legacy", "exact", "convex", "shell"])
@pytest.mark.parametrize("fmt", ["stl", "obj", "msh"])
def test_mesh_files_give_mujocos_mass_frame_and_size(tmp_path, fmt, inertia):
    vertices, faces = _l_prism()
    (tmp_path / "assets").mkdir()
    _write(tmp_path / "assets" / f"part.{fmt}", vertices, faces, fmt)
    xml = f"""<mujoco><compiler meshdir="assets"/>
      <asset><mesh file="part.{fmt}" scale="1 2 1.5" refpos=".05 .02 0" refquat="1 .2 .1 0"
        inertia="{inertia}"/></asset>
      <worldbody><body pos="0 0 1" euler="10 20 30"><freejoint/>
        <geom type="mesh" mesh="part" pos=".1 0 0" euler="0 0 20" density="700"/>
        <geom type="sphere" size=".02" pos="0 .1 0"/>
      </body></worldbody></mujoco>"""
    (tmp_path / "model.xml").write_text(xml)
    m = mujoco.MjModel.from_xml_path(str(tmp_path / "model.xml"))
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    sys = physics.load_mjcf(str(tmp_path / "model.xml"))
    kin = physics.forward_kinematics(sys, jnp.asarray(d.qpos, jnp.float32))
    np.testing.assert_allclose(sys.body_mass, m.body_mass, rtol=1e-5)
    np.testing.assert_allclose(sys.geom_size, m.geom_size, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(kin.geom_xpos, d.geom_xpos, atol=1e-6)
    # principal axes: equal up to their signs
    ours, theirs = np.asarray(kin.geom_xmat[0]), d.geom_xmat[0].reshape(3, 3)
    np.testing.assert_allclose(np.abs(np.sum(ours * theirs, axis=0)), 1, atol=1e-5)
    mass = dynamics.mass_matrix(sys, kin)
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    np.testing.assert_allclose(mass, full, rtol=1e-4, atol=1e-8)


@pytest.mark.parametrize("fitaabb", ["false", "true"])
def test_primitives_fitted_to_a_mesh_are_mujocos(fitaabb):
    """<geom type="box" mesh=...>: the primitive fitted to the mesh's equivalent-inertia box
    (or, with compiler fitaabb, its bounding box), times fitscale, in the mesh's frame."""
    geoms = "".join(
        f'<body pos="{i} 0 1"><freejoint/><geom type="{t}" mesh="m" fitscale="1.2" '
        'euler="10 20 30" pos=".1 0 0" contype="0" conaffinity="0"/></body>'
        for i, t in enumerate(["sphere", "capsule", "cylinder", "ellipsoid", "box"])
    )
    xml = f"""<mujoco><compiler fitaabb="{fitaabb}"/>
      <asset><mesh name="m" vertex="{floats(rock() + [0.01, 0.02, -0.03])}"/></asset>
      <worldbody>{geoms}</worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    sys = physics.load_mjcf(xml)
    kin = physics.forward_kinematics(sys, jnp.asarray(d.qpos, jnp.float32))
    np.testing.assert_allclose(sys.geom_size, m.geom_size, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(kin.geom_xpos, d.geom_xpos, atol=1e-6)
    np.testing.assert_allclose(sys.body_mass, m.body_mass, rtol=1e-5)
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    np.testing.assert_allclose(dynamics.mass_matrix(sys, kin), full, rtol=1e-4, atol=1e-7)


@jax.jit
def _contact_points(sys: physics.System, q: jax.Array) -> tuple[jax.Array, jax.Array]:
    state = physics.init(sys, q)
    force = smooth_force(sys, state, jnp.zeros(sys.nu))
    c = physics.solve_constraints(sys, state, dynamics.mass_matrix(sys, state.kin), force).contact
    return c.dist, c.pos


def _contacts(sys: physics.System, q: np.ndarray) -> np.ndarray:
    """Our active contacts at q as sorted rows (x, y, z, dist)."""
    dist, pos = (np.asarray(x) for x in _contact_points(sys, jnp.asarray(q, jnp.float32)))
    return np.array(sorted((*p, d) for d, p in zip(dist, pos, strict=True) if d < 0)).reshape(-1, 4)


@pytest.mark.parametrize("shape", ["rock", "triangle", "quad", "hexagon", "20-gon"])
def test_plane_mesh_contacts_match_mujoco(shape):
    """The deepest hull vertex and up to three more of the hull face that faces the plane most
    directly, polygons of any size pruned as MuJoCo prunes them."""
    points = {"rock": rock(), "triangle": prism(3), "quad": prism(4)}.get(shape)
    points = prism({"hexagon": 6, "20-gon": 20}[shape]) if points is None else points
    xml = f"""<mujoco><asset><mesh name="m" vertex="{floats(points)}"/></asset>
      <worldbody><geom type="plane" size="1 1 .1"/>
        <body><freejoint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(xml)
    rng = np.random.default_rng(0)
    counts = set()
    for trial in range(60):
        axis = rng.normal(size=3) * (0.02 if trial % 2 else 1.0)  # near a face, and anyhow
        angle = np.linalg.norm(axis)
        d.qpos[:] = [0, 0, 0, np.cos(angle / 2), *(np.sin(angle / 2) * axis / angle)]
        mujoco.mj_kinematics(m, d)
        world = d.geom_xpos[1] + m.mesh_vert @ d.geom_xmat[1].reshape(3, 3).T
        d.qpos[2] = -world[:, 2].min() - rng.uniform(0, 0.005)
        mujoco.mj_forward(m, d)
        found = zip(d.contact.dist[: d.ncon], d.contact.pos[: d.ncon], strict=True)
        theirs = np.array(sorted((*p, x) for x, p in found))
        ours = _contacts(sys, d.qpos)
        assert ours.shape == theirs.shape, (trial, ours, theirs)
        np.testing.assert_allclose(ours, theirs, atol=2e-6)
        counts.add(d.ncon)
    assert len(counts) > 1  # the poses reach faces, edges and corners


def test_sphere_mesh_contacts_match_mujoco():
    """Outside the hull: its closest point; centre inside: the face of least penetration.
    MuJoCo's EPA places the point to about 1e-4 when the centre is inside; depth and normal
    agree to float32."""
    xml = f"""<mujoco><asset><mesh name="m" vertex="{floats(rock())}"/></asset><worldbody>
      <body><freejoint/><geom type="sphere" size=".03"/></body>
      <body euler="10 20 30"><geom type="mesh" mesh="m"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(xml)
    rng = np.random.default_rng(2)
    touching = 0
    for _ in range(80):
        direction = rng.normal(size=3)
        d.qpos[:3] = direction / np.linalg.norm(direction) * rng.uniform(0.0, 0.15)
        mujoco.mj_forward(m, d)
        dist, pos = (np.asarray(x) for x in _contact_points(sys, jnp.asarray(d.qpos, jnp.float32)))
        assert (dist < 0).sum() == d.ncon
        if d.ncon:
            touching += 1
            np.testing.assert_allclose(dist[0], d.contact.dist[0], atol=2e-6)
            np.testing.assert_allclose(pos[0], d.contact.pos[0], atol=5e-4)
    assert touching > 20


def test_ball_rolls_off_a_mesh_like_mujoco():
    xml = f"""<mujoco><asset><mesh name="rock" vertex="{floats(rock())}"/></asset>
      <worldbody><geom type="plane" size="2 2 .1"/>
        <geom type="mesh" mesh="rock" pos="0 0 .05" euler="10 20 30"/>
        <body pos=".01 .02 .25"><freejoint/><geom type="sphere" size=".04"/></body>
      </worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(xml)
    state = drive_alongside(sys, m, d, [np.zeros(0)] * 40, substeps=10)
    assert d.qpos[2] < 0.05  # it came down on the rock and rolled off it to the floor
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)


def test_mesh_body_tumbles_bounces_and_settles_like_mujoco():
    xml = f"""<mujoco><asset><mesh name="rock" vertex="{floats(rock())}"/></asset>
      <worldbody><geom type="plane" size="2 2 .1"/>
        <body pos="0 0 .4" euler="10 20 30"><freejoint/>
          <geom type="mesh" mesh="rock" pos=".02 0 0" euler="0 0 20"/>
          <geom type="mesh" mesh="rock" contype="0" conaffinity="0" group="2" mass="0"/>
        </body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qvel[:] = [0.5, -0.3, 0, 2, 1, -1]
    sys = physics.load_mjcf(xml)
    assert sys.geom_hull == (-1, 0, 0) and sys.mesh_hull.vertices.shape[0] == 1
    state = drive_alongside(sys, m, d, [np.zeros(0)] * 60, substeps=10)
    assert d.ncon >= 2  # resting on the floor
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)


def test_gradient_through_mesh_contacts_is_finite():
    """A prism sliding on the floor and a ball rolling on a fixed rock (plane-mesh and
    sphere-mesh contacts)."""
    xml = f"""<mujoco><asset><mesh name="m" vertex="{floats(prism(6))}"/>
        <mesh name="rock" vertex="{floats(rock())}"/></asset>
      <worldbody><geom type="plane" size="2 2 .1"/>
        <geom type="mesh" mesh="rock" pos="1 0 .05" contype="2" conaffinity="2"/>
        <body pos="0 0 .06"><freejoint/><geom type="mesh" mesh="m"/></body>
        <body pos="1 0 .2"><freejoint/><geom type="sphere" size=".04" contype="3" conaffinity="3"/>
        </body>
      </worldbody></mujoco>"""
    sys = physics.load_mjcf(xml)

    def height_after(vx: jax.Array) -> jax.Array:
        qd = jnp.zeros(12).at[0].set(vx).at[4].set(vx).at[6].set(vx)
        state = jax.lax.fori_loop(
            0, 100, lambda _, s: physics.step(sys, s, jnp.zeros(0)), physics.init(sys, None, qd)
        )
        return state.q[2] + state.q[0] + state.q[7] + state.q[9]

    assert np.isfinite(jax.jit(jax.grad(height_after))(1.0))


def test_hull_of_a_box_has_six_square_faces_and_prunes_nothing():
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-2, 2) for z in (-3, 3)], float)
    m = mesh.process(corners, None, "convex")
    assert m.hull.poly_normal.shape == (6, 3) and (m.hull.poly_vert >= 0).all()
    np.testing.assert_allclose(m.measure, 48)
    # a quad keeps all its vertices: each anchor picks the other three in cycle order
    for face, cycle in zip(m.hull.poly_pick, m.hull.poly_vert, strict=True):
        for a, rest in enumerate(face):
            assert list(rest) == [cycle[(a + k) % 4] for k in (1, 2, 3)]
    assert len(ConvexHull(corners).vertices) == len(m.hull.vertices) == 8


ROCK = f'<mesh name="m" vertex="{floats(rock())}"'


@pytest.mark.parametrize(
    "asset, geom, message",
    [
        ('<mesh name="m" file="missing.stl"/>', 'mesh="m"', "cannot read mesh file"),
        ('<mesh name="m" file="m.ply"/>', 'mesh="m"', "unsupported mesh file type '.ply'"),
        ("", 'mesh="m"', "unknown mesh 'm'"),
        (f"{ROCK}/>", "", "a mesh geom needs a mesh"),
        (f'{ROCK} maxhullvert="3"/>', 'mesh="m"', "maxhullvert=3 must be -1 or at least 4"),
        ('<mesh name="m" vertex="0 0 0 1 0 0 0 1 0 1 1 0"/>', 'mesh="m"', "span no volume"),
        ('<mesh name="m" vertex="0 0 0 1 0 0 0 1 0"/>', 'mesh="m"', "at least 4 vertices"),
        (f'{ROCK} inertia="fancy"/>', 'mesh="m"', "inertia="),
    ],
)
def test_mesh_errors_name_the_problem(asset, geom, message):
    xml = f"""<mujoco><asset>{asset}</asset><worldbody><body><freejoint/>
      <geom type="mesh" {geom}/></body></worldbody></mujoco>"""
    with pytest.raises(physics.MJCFError, match=message):
        physics.load_mjcf(xml)


def test_mesh_errors_for_misoriented_exact_meshes():
    vertices, faces = _l_prism()
    faces[0] = faces[0][::-1]
    exact = f"""<mujoco><asset><mesh name="m" vertex="{floats(vertices)}" face="{
        " ".join(map(str, faces.ravel()))
    }" inertia="exact"/></asset>
      <worldbody><body><freejoint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>"""
    with pytest.raises(physics.MJCFError, match="inconsistent orientation"):
        physics.load_mjcf(exact)


def test_a_menagerie_style_arm_with_visual_and_collision_meshes_tracks_mujoco(tmp_path):
    """Meshes as robot model files use them: visual meshes in a class that neither collides
    nor weighs, explicit inertials, a collision mesh on the gripper pressing on the floor,
    materials and textures (skipped), meshdir and a scaled STL in millimetres."""
    (tmp_path / "assets").mkdir()
    vertices, faces = _l_prism()
    _write(tmp_path / "assets" / "link.stl", vertices * 1000, faces, "stl")
    finger = ConvexHull(prism(6) * 0.5)
    _write(tmp_path / "assets" / "finger.obj", finger.points, finger.simplices, "obj")
    xml = """<mujoco model="arm">
      <compiler angle="radian" meshdir="assets" autolimits="true"/>
      <option timestep="0.002"/>
      <default>
        <default class="arm">
          <joint damping="1" armature=".05" frictionloss=".05" range="-2 2"/>
          <position kp="40" ctrlrange="-2 2"/>
          <default class="visual">
            <geom type="mesh" contype="0" conaffinity="0" group="2"/>
          </default>
          <default class="collision"><geom group="3"/></default>
        </default>
      </default>
      <asset>
        <texture name="grid" type="2d" builtin="checker" width="64" height="64"/>
        <material name="grid" texture="grid" texrepeat="4 4"/>
        <mesh name="link" file="link.stl" scale=".001 .001 .001"/>
        <mesh file="finger.obj"/>
      </asset>
      <worldbody>
        <light pos="0 0 3"/>
        <geom type="plane" size="2 2 .1" material="grid"/>
        <body name="base" pos="0 0 .25" childclass="arm">
          <inertial pos="0 0 0" mass="2" diaginertia=".01 .01 .01"/>
          <joint name="yaw" axis="0 0 1"/>
          <geom class="visual" mesh="link"/>
          <body name="upper" pos="0 0 .05">
            <inertial pos=".1 0 0" mass=".8" diaginertia=".002 .004 .004"/>
            <joint name="shoulder" axis="0 1 0"/>
            <geom class="visual" mesh="link" euler="0 1.57 0"/>
            <geom class="collision" type="capsule" fromto="0 0 0 .2 0 0" size=".02"/>
            <body name="hand" pos=".2 0 0">
              <inertial pos=".05 0 0" mass=".3" diaginertia=".0005 .001 .001"/>
              <joint name="elbow" axis="0 1 0"/>
              <geom class="visual" mesh="link" pos=".02 0 0"/>
              <geom class="collision" type="mesh" mesh="finger" pos=".1 0 0"/>
            </body>
          </body>
        </body>
      </worldbody>
      <actuator>
        <position class="arm" joint="yaw"/>
        <position class="arm" joint="shoulder"/>
        <position class="arm" joint="elbow"/>
      </actuator>
    </mujoco>"""
    (tmp_path / "arm.xml").write_text(xml)
    m = mujoco.MjModel.from_xml_path(str(tmp_path / "arm.xml"))
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(str(tmp_path / "arm.xml"))
    assert sys.geom_hull.count(0) == 1  # only the finger collides as a mesh
    controls = [np.array([0.3, 1.5, 0.2])] * 40 + [np.array([-0.3, 1.6, 0.1])] * 40
    state = drive_alongside(sys, m, d, controls, substeps=5)
    assert any(
        {int(g) for g in d.contact.geom[i]} == {0, 5} for i in range(d.ncon)
    )  # the finger presses on the floor
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=2e-3)


def test_maxhullvert_matters_only_where_a_mesh_collides():
    """MuJoCo cuts a colliding mesh's hull to maxhullvert vertices (qhull stopped early), which
    this engine does not reproduce: a visual mesh loads silently, a colliding one warns."""
    mesh_asset = f'<asset><mesh name="m" vertex="{floats(rock())}" maxhullvert="6"/></asset>'
    visual = f"""<mujoco>{mesh_asset}<worldbody><geom type="plane" size="1 1 .1"/><body>
      <freejoint/><geom type="mesh" mesh="m" contype="0" conaffinity="0"/></body>
      </worldbody></mujoco>"""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        physics.load_mjcf(visual)
    with pytest.warns(physics.MJCFWarning, match="cuts it to maxhullvert=6"):
        physics.load_mjcf(visual.replace(' contype="0" conaffinity="0"', ""))
