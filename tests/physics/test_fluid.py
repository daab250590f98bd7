"""Fluid forces (MuJoCo's inertia-box model) against MuJoCo and against Stokes' law."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from gym_assets import gym_asset

import physics
from physics import fluid

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
      <geom type="sphere" size="0.1" fluidshape="ellipsoid"/></body></worldbody></mujoco>"""
    with pytest.raises(physics.MJCFError, match="fluidshape='ellipsoid'"):
        physics.load_mjcf(ellipsoid.format('density="1000"'))
    # without a medium MuJoCo computes no fluid force at all: the attribute changes nothing
    assert not physics.load_mjcf(ellipsoid.format('timestep="0.002"')).fluid
    with pytest.raises(physics.MJCFError, match="non-negative"):
        physics.load_mjcf(ellipsoid.format('viscosity="-1"'))


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
