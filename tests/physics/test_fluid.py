"""Fluid forces (MuJoCo's inertia-box and ellipsoid models) against MuJoCo and against Stokes'
law."""

import dataclasses
import os

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from gym_assets import gym_asset
from mujoco_parity import drive_alongside

import physics
from physics import fluid, kinematics

# Every joint type, wind, a two-geom body, <inertial> with fullinertia and with a rotated
# diaginertia: each way a body gets its principal axes.
MEDIUM_XML = """
<mujoco>
  <option density="1.2" viscosity="0.02" wind="1 -0.5 0.3"><flag contact="disable"/></option>
  <worldbody>
    <body pos="0 0 1" euler="10 20 30">
      <freejoint/>
      <geom type="box" size="0.1 0.2 0.3"/>
      <geom type="capsule" fromto="0 0 0 0.3 0.1 0" size="0.05"/>
      <body pos="0.2 0 0.1">
        <joint type="ball"/>
        <inertial pos="0.1 0 0" mass="2" fullinertia="0.3 0.25 0.2 0.01 0.02 -0.03"/>
        <body pos="0.3 0.1 0">
          <joint type="hinge" axis="0 1 1"/>
          <inertial pos="0 0.1 0" quat="0.9 0.1 0.3 0.2" mass="0.5" diaginertia="0.01 0.02 0.03"/>
          <body pos="0 0.2 0">
            <joint type="slide" axis="1 0 0"/>
            <geom type="cylinder" size="0.05 0.2" euler="30 40 0"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def _load(name):
    if name == "medium":
        return physics.load_mjcf(MEDIUM_XML), mujoco.MjModel.from_xml_string(MEDIUM_XML)
    return physics.load_mjcf(gym_asset(name)), mujoco.MjModel.from_xml_path(gym_asset(name))


def _random_state(m, rng):
    q = m.qpos0 + 0.3 * rng.normal(size=m.nq)
    for j in range(m.njnt):
        if m.jnt_type[j] in (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL):
            a = m.jnt_qposadr[j] + (3 if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE else 0)
            q[a : a + 4] /= np.linalg.norm(q[a : a + 4])
    return q, 2 * rng.normal(size=m.nv)


@pytest.mark.parametrize("name", ["medium", "swimmer"])
def test_fluid_force_matches_mujoco(name):
    sys, m = _load(name)
    assert sys.fluid
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)

    @jax.jit
    def forces(q, qd):
        state = physics.init(sys, q, qd)
        return fluid.fluid_force(sys, state.kin, state.cvel), physics.forward(sys, state, ctrl)

    ctrl = np.zeros(m.nu)
    for _ in range(4):
        d.qpos[:], d.qvel[:] = _random_state(m, rng)
        mujoco.mj_forward(m, d)
        ours, qacc = forces(d.qpos, d.qvel)
        scale = np.abs(d.qfrc_fluid).max()
        assert scale > 1e-3  # the medium does push
        np.testing.assert_allclose(ours, d.qfrc_fluid, atol=1e-4 * scale)
        if name == "medium":  # no limits or contacts: qacc is the smooth dynamics' alone
            np.testing.assert_allclose(qacc, d.qacc, atol=1e-4 * np.abs(d.qacc).max())


def test_swimmer_trajectory_matches_mujoco():
    sys, m = _load("swimmer")
    d = mujoco.MjData(m)
    rng = np.random.default_rng(3)
    q, qd = _random_state(m, rng)
    d.qpos[:], d.qvel[:] = q, qd
    step = jax.jit(physics.step, static_argnames="n_substeps")
    state = physics.init(sys, q, qd)
    for _ in range(25):  # 100 steps of 0.01 s under changing controls
        ctrl = rng.uniform(-1, 1, m.nu)
        d.ctrl[:] = ctrl
        for _ in range(4):
            mujoco.mj_step(m, d)
        state = step(sys, state, ctrl, n_substeps=4)
    # (without fluid forces: 2.6 apart in q, 5.6 in qd)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)


def test_sphere_sinks_at_stokes_terminal_velocity():
    """In a viscous medium, a falling sphere settles where drag balances gravity:
    m g = 3 pi d mu v, with d the mean side of the sphere's inertia box (sqrt(2.4) r)."""
    r, mass, mu = 0.1, 2.0, 5.0
    sys = physics.load_mjcf(f"""
    <mujoco><option viscosity="{mu}" timestep="0.002"/><worldbody>
      <body pos="0 0 100"><freejoint/><geom type="sphere" size="{r}" mass="{mass}"/></body>
    </worldbody></mujoco>""")
    state = jax.jit(physics.step, static_argnames="n_substeps")(
        sys, physics.init(sys), np.zeros(0), n_substeps=2000
    )
    terminal = mass * 9.81 / (3 * np.pi * np.sqrt(2.4) * r * mu)
    np.testing.assert_allclose(state.qd[:3], [0, 0, -terminal], rtol=1e-3, atol=1e-6)


def test_fluid_model_errors_and_switch():
    ellipsoid = """<mujoco><option {}/><worldbody><body><freejoint/>
      <geom type="sphere" size="0.1" fluidshape="{}"/></body></worldbody></mujoco>"""
    with pytest.raises(physics.MJCFError, match="fluidshape='sphere' must be none or ellipsoid"):
        physics.load_mjcf(ellipsoid.format('density="1000"', "sphere"))
    # without a medium MuJoCo computes no fluid force at all: the attribute changes nothing
    assert not physics.load_mjcf(ellipsoid.format('timestep="0.002"', "ellipsoid")).fluid
    with pytest.raises(physics.MJCFError, match="non-negative"):
        physics.load_mjcf(ellipsoid.format('viscosity="-1"', "ellipsoid"))


# The ellipsoid model on every geom type (a mesh's semi-axes are its bounding box's), with
# fluidcoef given in full and in part, a geom without fluidshape on an ellipsoid body (it feels
# nothing), wind and viscosity; a child body without fluidshape keeps the inertia-box model,
# a plane on the world with the shape from a default class is left out, and a lone free body
# (whose block implicitfast solves apart) swims beside the tree.
ELLIPSOIDS_XML = """
<mujoco>
  <option density="1000" viscosity="0.5" wind="0.3 -1 0.2" integrator="implicitfast">
    <flag contact="disable"/></option>
  <default><default class="wet"><geom fluidshape="ellipsoid"/></default></default>
  <asset><mesh name="wedge" vertex="0 0 0  0.2 0 0  0 0.1 0  0 0 0.05  0.2 0.1 0.05"/></asset>
  <worldbody>
    <geom class="wet" type="plane" size="5 5 0.1"/>
    <body pos="0 0 1" euler="10 20 30">
      <freejoint/>
      <geom class="wet" type="sphere" size="0.05" pos="0.1 0 0"/>
      <geom class="wet" type="capsule" fromto="0 0 0 0.3 0.1 0" size="0.03"
            fluidcoef="0.3 0.1 1.2 0.8 0.6"/>
      <geom class="wet" type="cylinder" size="0.04 0.1" euler="30 40 0" fluidcoef="0.2 0.4"/>
      <geom class="wet" type="box" size="0.1 0.02 0.05" pos="0 0.2 0"/>
      <geom class="wet" type="ellipsoid" size="0.08 0.03 0.05" pos="0 -0.2 0.1"/>
      <geom class="wet" type="mesh" mesh="wedge" pos="-0.2 0 0"/>
      <geom type="box" size="0.05 0.05 0.05" pos="0 0 -0.2"/>
      <body pos="0.3 0 0">
        <joint name="ball" type="ball"/>
        <geom class="wet" type="ellipsoid" size="0.2 0.01 0.06" pos="0.2 0 0"/>
        <body pos="0.4 0 0">
          <joint type="hinge" axis="0 1 1"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
        </body>
      </body>
    </body>
    <body pos="1 0 1" euler="0 30 60">
      <freejoint/>
      <geom class="wet" type="box" size="0.1 0.05 0.02" fluidcoef="0.47 0.25 1.5 1 1"/>
    </body>
  </worldbody>
</mujoco>
"""
SITE_PACKAGES = os.path.dirname(os.path.dirname(mujoco.__file__))


@pytest.mark.parametrize(
    "path, rtol",
    [
        # MuJoCo keeps mesh vertices in float32: the wedge's semi-axes differ by 1e-8
        (None, 1e-6),  # ELLIPSOIDS_XML
        (os.path.join(SITE_PACKAGES, "brax", "test_data", "fluid_ellipsoid.xml"), 1e-9),
        # a flapping wing; a box-model body there is 1e-9 off (its principal axes)
        (os.path.join(SITE_PACKAGES, "mujoco", "testdata", "model.xml"), 1e-8),
    ],
)
def test_ellipsoid_model_matches_mujoco(path, rtol, x64):
    """The coefficients MuJoCo's compiler derives (virtual mass and inertia) and the forces at
    random states, in float64, on our model and on the two installed models that use it."""
    if path is None:
        sys, m = physics.load_mjcf(ELLIPSOIDS_XML), mujoco.MjModel.from_xml_string(ELLIPSOIDS_XML)
    else:
        sys, m = physics.load_mjcf(path), mujoco.MjModel.from_xml_path(path)
    wet = np.nonzero(m.geom_fluid[:, 0] * (m.geom_bodyid > 0))[0]
    assert sys.fluid_ellipsoids == tuple(wet) and wet.size
    np.testing.assert_allclose(sys.geom_fluid[wet], m.geom_fluid[wet], rtol=rtol, atol=1e-12)

    @jax.jit
    def forces(sys, q, qd):
        state = physics.init(sys, q, qd)
        return fluid.fluid_force(sys, state.kin, state.cvel)

    d, rng = mujoco.MjData(m), np.random.default_rng(0)
    for k in range(8):
        d.qpos[:], d.qvel[:] = _random_state(m, rng)
        if k >= 6:  # crawling through still air: the forces' guards at tiny speeds
            m.opt.wind[:], sys, d.qvel[:] = (
                0,
                dataclasses.replace(sys, wind=0 * sys.wind),
                d.qvel * 1e-7,
            )
        mujoco.mj_forward(m, d)
        scale = np.abs(d.qfrc_fluid).max()
        assert scale > (1e-3 if k < 6 else 0)
        np.testing.assert_allclose(forces(sys, d.qpos, d.qvel), d.qfrc_fluid, atol=rtol * scale)


def test_ellipsoids_in_a_medium_follow_mujoco_and_differentiate_at_rest():
    """100 implicitfast steps under changing controls (its velocity derivative takes in the
    fluid forces symmetrized, as MuJoCo's does, except on a lone free body's block); and at
    rest, where the forces' norms are 0, finite first and second derivatives (a gradient
    through an implicit step takes both)."""
    xml = ELLIPSOIDS_XML.replace(
        "</worldbody>", '</worldbody><actuator><motor joint="ball" gear="0 0 1"/></actuator>'
    )  # (a motor on a ball joint turns it about its gear axis)
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qvel[:] = np.random.default_rng(1).normal(size=m.nv)
    controls = [np.array([np.sin(k)]) for k in range(20)]
    state = drive_alongside(sys, m, d, controls, 5)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)

    sys = dataclasses.replace(sys, wind=0 * sys.wind)  # at rest in still air: v = w = 0
    kin = physics.init(sys).kin

    def force(qd):
        return fluid.fluid_force(sys, kin, kinematics.com_velocity(sys, kin.cdof, qd))

    rest = jnp.zeros(sys.nv)
    first, second = jax.jit(jax.jacfwd(force))(rest), jax.jit(jax.hessian(force))(rest)
    assert np.isfinite(np.asarray(first)).all() and np.isfinite(np.asarray(second)).all()


def test_gradient_through_the_medium_matches_finite_differences():
    sys, _ = _load("swimmer")

    def loss(ctrl, qd0):
        state = physics.step(sys, physics.init(sys, None, qd0), ctrl, n_substeps=50)
        return jnp.sum(jnp.sin(state.q)) + 0.1 * jnp.sum(state.qd)

    ctrl, qd0 = jnp.array([0.1, -0.05]), jnp.array([0.5, -0.3, 0.2, 0.4, -0.1])
    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(ctrl, qd0)
    value = jax.jit(loss)
    eps = 1e-2
    for arg, g in enumerate(grads):
        assert np.all(np.isfinite(g))
        for i in range(g.size):
            hi, lo = [ctrl, qd0], [ctrl, qd0]
            hi[arg], lo[arg] = hi[arg].at[i].add(eps), lo[arg].at[i].add(-eps)
            fd = (value(*hi) - value(*lo)) / (2 * eps)
            assert float(g[i]) == pytest.approx(float(fd), rel=2e-2, abs=2e-3)
