"""Height fields against MuJoCo 4.0: compiled terrain data from each source, and spheres,
capsules, cylinders and boxes rolling, sliding and resting on terrain (physics/hfield.py)."""

import dataclasses
import struct

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import physics

# a 5 x 5 hill, its peak (0.5 high) at the origin
HILL = "0 0 0 0 0  0 1 2 1 0  0 2 3 2 0  0 1 1 1 0  0 0 0 0 0"
RAMP = "0 1 2 0 1 2 0 1 2"  # a plane rising along x


def _model(body: str, elevation: str = HILL, n: int = 5) -> str:
    return f"""<mujoco><asset><hfield name="t" nrow="{n}" ncol="{n}" size="1 1 0.5 0.1"
      elevation="{elevation}"/></asset>
      <worldbody><geom type="hfield" hfield="t"/>{body}</worldbody></mujoco>"""


def _heights(xml: str) -> tuple[np.ndarray, np.ndarray]:
    """(ours, MuJoCo's) heights of the model's one hfield, [nrow, ncol] in length units."""
    m = mujoco.MjModel.from_xml_string(xml) if "<" in xml else mujoco.MjModel.from_xml_path(xml)
    theirs = m.hfield_data.reshape(m.hfield_nrow[0], m.hfield_ncol[0]) * m.hfield_size[0, 2]
    sys = physics.load_mjcf(xml)
    nrow, ncol = sys.hfield_grid[0]
    return np.asarray(sys.hfield_data[0, :nrow, :ncol]), theirs


def test_elevations_binary_files_and_pngs_compile_to_mujocos_heights(tmp_path):
    from PIL import Image

    # elevation: rows listed from +y down, scaled to [0, 1] (min 0, max 1), times size[2]
    ours, theirs = _heights(_model("", "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16", 4))
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
    assert ours[0, 0] == pytest.approx((13 - 1) / 15 * 0.5)  # row 0 is the LAST listed row (-y)
    # MuJoCo's binary format: int32 nrow, ncol, then float32 data, row 0 at -y
    (tmp_path / "terrain.bin").write_bytes(
        struct.pack("<2i", 2, 3) + np.array([3, 4, 5, 7, 6, 3.5], "<f4").tobytes()
    )
    # a PNG: its first channel, top row at +y; an RGBA image as a greyscale one
    image = np.array([[60, 100, 200], [50, 150, 220], [90, 90, 10]], np.uint8)
    Image.fromarray(np.dstack([image, image // 2, image, np.full_like(image, 255)])).save(
        tmp_path / "terrain.png"
    )
    for name in ("terrain.bin", "terrain.png"):
        path = tmp_path / "model.xml"
        path.write_text(
            f"""<mujoco><asset><hfield file="{name}" size="2 1 0.3 0.1"/></asset>
            <worldbody><geom type="hfield" hfield="{name[:-4]}"/></worldbody></mujoco>"""
        )
        ours, theirs = _heights(str(path))
        np.testing.assert_allclose(ours, theirs, atol=1e-6)
    flat, _ = _heights(_model("", "5 5 5 5", 2))  # no relief: all zero, as in MuJoCo
    np.testing.assert_array_equal(flat, 0)


@pytest.mark.parametrize(
    ("hfield", "body", "message"),
    [
        ('nrow="2" ncol="2" elevation="1 2 3"', "", "elevation has 3 values, nrow x ncol is 4"),
        ('nrow="2" ncol="2" size="1 1 .5 0"', "", "hfield size must be 4 positive numbers"),
        ('nrow="1" ncol="4"', "", "nrow and ncol of at least 2"),
        ('file="missing.bin"', "", "cannot read"),
        ('nrow="2" ncol="2"', '<geom type="hfield" hfield="other"/>', "unknown hfield 'other'"),
        (
            'nrow="2" ncol="2"',
            '<body><joint type="slide"/><geom type="hfield" hfield="t"/><geom size=".1"/></body>',
            "hfield geoms must not move",
        ),
    ],
)
def test_bad_height_fields_are_refused_naming_the_problem(hfield, body, message):
    size = "" if "size" in hfield else ' size="1 1 .5 .1"'
    xml = f"""<mujoco><asset><hfield name="t" {hfield}{size}/></asset>
      <worldbody><geom type="hfield" hfield="t"/>{body}</worldbody></mujoco>"""
    with pytest.raises(physics.MJCFError, match=message):
        physics.load_mjcf(xml)


def _track(xml: str, starts: list[np.ndarray], steps: int) -> tuple[np.ndarray, ...]:
    """Our and MuJoCo's qpos after `steps` steps from each start (ours vmapped over them, one
    compile), and the contacts active in the last step of each, ours and MuJoCo's."""
    m = mujoco.MjModel.from_xml_string(xml)
    sys = physics.load_mjcf(xml)
    step = lambda s, _: (physics.step(sys, s, jnp.zeros(0)), None)  # noqa: E731
    run = jax.jit(jax.vmap(lambda q: jax.lax.scan(step, physics.init(sys, q), length=steps)[0]))
    state = run(jnp.asarray(np.stack(starts), jnp.float32))
    theirs, counts = [], []
    for q in starts:
        d = mujoco.MjData(m)
        d.qpos[:] = q
        mujoco.mj_step(m, d, nstep=steps)
        theirs.append(d.qpos.copy())
        counts.append(d.ncon)
    active = np.sum(np.asarray(state.contact.dist) < 0, axis=1)
    return np.asarray(state.q), np.stack(theirs), active, np.asarray(counts)


def _free(x: float, y: float, z: float, quat=(1.0, 0.0, 0.0, 0.0)) -> np.ndarray:
    return np.array([x, y, z, *quat])


_TERRAINS = {  # name: (nrow = ncol, elevation, its frame)
    "hill": (5, HILL, 'pos="0.1 -0.1 0.05" euler="4 -3 30"'),  # tilted and turned
    "ramp": (3, RAMP, 'pos="3 0 0"'),
    "flat": (6, "0 " * 36, 'pos="-3 0 0"'),
}


def _terrains(bodies: str, names: tuple[str, ...]) -> str:
    """Height fields side by side (_TERRAINS: the hill near x = 0, the ramp at 3, a flat 6 x 6
    grid at -3), all 2 x 2 in extent, and `bodies`."""
    assets = "".join(
        f'<hfield name="{n}" nrow="{_TERRAINS[n][0]}" ncol="{_TERRAINS[n][0]}" size="1 1 0.5 0.1"'
        f' elevation="{_TERRAINS[n][1]}"/>'
        for n in names
    )
    geoms = "".join(f'<geom type="hfield" hfield="{n}" {_TERRAINS[n][2]}/>' for n in names)
    return f"<mujoco><asset>{assets}</asset><worldbody>{geoms}{bodies}</worldbody></mujoco>"


def test_spheres_rolling_over_a_hill_track_mujoco_with_one_contact_per_prism():
    """Down the faces of a tilted, turned hill, across its seams and vertices: the same path to
    1e-4 after 300 steps, with MuJoCo's contacts: resting on flat ground over a cell's diagonal
    a sphere has two (one per prism), on a grid vertex six."""
    xml = _terrains('<body><freejoint/><geom size="0.1"/></body>', ("hill", "flat"))
    hill = [_free(0.03, 0.07, 0.8), _free(0.3, -0.2, 0.6), _free(0.5, 0.5, 0.4)]
    # the flat grid's lines are at multiples of 0.4 from -1: (0.1, 0.1) is on a diagonal
    flat = [_free(-3 + 0.1, 0.1, 0.0995), _free(-3 + 0.2, 0.2, 0.0995)]
    ours, theirs, n_ours, n_theirs = _track(xml, hill + flat, 300)
    np.testing.assert_allclose(ours, theirs, atol=1e-4)
    np.testing.assert_array_equal(n_ours, n_theirs)
    assert list(n_ours[3:]) == [2, 6]


def test_capsules_and_boxes_on_terrain_track_mujoco():
    """On the ramp a capsule lying across its cells and one dropped upright (it topples and
    rolls), a box sliding down it; and a box settling on flat ground. For a face on a face
    MuJoCo's EPA reports one point of the overlap that it does not define (the box's height
    on flat ground wanders by 2e-4 there; ours is steady), hence 2e-3 for the boxes."""
    # the two bodies touch the terrain only (their contype 1 meets its conaffinity 1; their
    # conaffinity 2 meets no contype)
    xml = _terrains(
        '<body><freejoint/><geom type="capsule" size="0.05 0.1" contype="1" conaffinity="2"/>'
        '</body><body><freejoint/><geom type="box" size="0.1 0.08 0.05" friction="0.3" '
        'contype="1" conaffinity="2"/></body>',
        ("ramp", "flat"),
    )
    tilted = (0.766, 0.0, 0.643, 0.0)  # 80 degrees about y
    pitched = (0.992, 0.0, -0.122, 0.0)  # -14 degrees about y: onto the ramp's face
    turned = (0.966, 0.0, 0.0, 0.259)  # 30 degrees about z, across the cells' diagonals
    starts = [
        np.concatenate([_free(3.03, 0.37, 0.5, tilted), _free(3.13, 0.07, 0.45, pitched)]),
        np.concatenate([_free(3.13, -0.5, 0.45), _free(-3 + 0.13, 0.07, 0.2, turned)]),
    ]
    ours, theirs, _, _ = _track(xml, starts, 300)
    np.testing.assert_allclose(ours[:, :7], theirs[:, :7], atol=1e-3)  # the capsules
    np.testing.assert_allclose(ours[:, 7:], theirs[:, 7:], atol=2e-3)  # the boxes
    assert 0.0495 < ours[1, 9] < 0.05  # at rest: sunk no deeper than the soft contact allows


def test_cylinders_on_terrain_track_mujoco():
    """Cans dropped tilted onto the hill and the ramp land on a rim and tumble: MuJoCo's path
    to 2e-3 over 200 steps. A can set upright on flat ground over a grid vertex stands on its
    cap with MuJoCo's six contacts (one per prism under it, each at the middle of the cap's
    overlap with that prism) and stays put, sunk under 0.2 mm."""
    xml = _terrains(
        '<body><freejoint/><geom type="cylinder" size="0.08 0.1"/></body>',
        ("hill", "ramp", "flat"),
    )
    tilted = (0.9, 0.3, 0.2, 0.0)
    # the flat grid's lines are at multiples of 0.4 from -1: (-0.2, -0.2) is a grid vertex
    starts = [_free(0.2, -0.1, 0.8, tilted), _free(3.05, 0.1, 0.5, tilted), _free(-3.2, -0.2, 0.1)]
    ours, theirs, n_ours, n_theirs = _track(xml, starts, 200)
    np.testing.assert_allclose(ours[:2], theirs[:2], atol=2e-3)
    assert n_ours[2] == n_theirs[2] == 6
    np.testing.assert_allclose(ours[2], starts[2], atol=2e-4)


def test_terrain_contacts_have_finite_gradients():
    sys = physics.load_mjcf(_model('<body><freejoint/><geom size="0.1"/></body>', RAMP, 3))

    def rolled(z0: jax.Array) -> jax.Array:
        q0 = jnp.array([0.1, 0.07, 0.0, 1.0, 0.0, 0.0, 0.0]).at[2].set(z0)
        step = lambda s, _: (physics.step(sys, s, jnp.zeros(0)), None)  # noqa: E731
        return jax.lax.scan(step, physics.init(sys, q0), length=40)[0].q[0]  # down the ramp

    grad = jax.jit(jax.grad(rolled))(jnp.float32(0.39))  # 1.5 cm above the ramp
    assert np.isfinite(grad) and grad != 0  # landed by then: when it landed changes how far


def test_terrain_heights_are_a_leaf_that_worlds_can_vary():
    """Two worlds, one System but each its own heights (vmapped over hfield_data): a sphere
    comes to rest on each world's own ground."""
    sys = physics.load_mjcf(_model('<body><freejoint/><geom size="0.1"/></body>', "0 " * 9, 3))
    heights = jnp.stack([sys.hfield_data, sys.hfield_data + 0.2])  # flat at 0 and at 0.2
    axes = dataclasses.replace(jax.tree.map(lambda _: None, sys), hfield_data=0)

    def rest(world: physics.System) -> jax.Array:
        step = lambda s, _: (physics.step(world, s, jnp.zeros(0)), None)  # noqa: E731
        q0 = jnp.array([0.1, 0.2, 0.4, 1.0, 0.0, 0.0, 0.0])
        return jax.lax.scan(step, physics.init(world, q0), length=300)[0].q[2]

    worlds = dataclasses.replace(sys, hfield_data=heights)
    z = jax.jit(jax.vmap(rest, in_axes=(axes,)))(worlds)
    np.testing.assert_allclose(z, [0.1, 0.3], atol=1e-3)
