"""MuJoCo's integrators (RK4, implicit, implicitfast; Euler is tested everywhere else) against
MuJoCo itself, and what each is for: RK4's accuracy, the implicit ones' stability."""

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from gym_assets import gym_asset
from mujoco_parity import drive_alongside, without_contacts

import physics
from physics.system import INTEGRATORS

step = jax.jit(physics.step, static_argnames="n_substeps")

# A robot-arm model of the kind that asks for an implicit integrator: stiff position servos
# (one with dampratio), a velocity servo and an affine tendon actuator, joint and tendon
# damping, a medium (fluid forces depend on velocity too), and a free box with a welded child
# falling onto the floor (BOXES) (MuJoCo's implicitfast solves a rigid free subtree's block with its
# gyroscopic derivative).
BOXES = """<geom type="plane" size="5 5 0.1"/>
    <body pos="1 1 0.3">
      <freejoint/>
      <geom type="box" size="0.1 0.05 0.08"/>
      <body pos="0.1 0 0.1"><geom type="sphere" size="0.05"/></body>
    </body>
    <body pos="-1 1 0.3">
      <freejoint/>
      <geom type="box" size="0.1 0.05 0.08"/>
    </body>"""
ARM_XML = """
<mujoco>
  <option timestep="0.01" integrator="{integrator}" density="1.2" viscosity="0.01"/>
  <worldbody>
    <body pos="0 0 1">
      <joint name="j1" axis="0 0 1" damping="0.5" armature="0.01"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
      <body pos="0.4 0 0">
        <joint name="j2" axis="0 1 0" damping="0.2"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.035"/>
        <body pos="0.4 0 0">
          <joint name="j3" axis="0 1 0"/>
          <geom type="box" size="0.1 0.03 0.03" pos="0.1 0 0"/>
        </body>
      </body>
    </body>
    {boxes}
  </worldbody>
  <tendon>
    <fixed name="t" damping="0.3">
      <joint joint="j2" coef="1"/><joint joint="j3" coef="-0.5"/>
    </fixed>
  </tendon>
  <actuator>
    <position joint="j1" kp="50" kv="5"/>
    <position joint="j2" kp="80" dampratio="1"/>
    <velocity joint="j3" kv="3"/>
    <general tendon="t" gaintype="affine" gainprm="1 0 -0.5" biastype="affine" biasprm="0 0 -0.2"/>
  </actuator>
</mujoco>
"""


def _start(m, seed=0):
    """MuJoCo data at a perturbed qpos0 with random velocities."""
    rng = np.random.default_rng(seed)
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0 + 0.05 * rng.standard_normal(m.nq)
    mujoco.mj_normalizeQuat(m, d.qpos)
    d.qvel[:] = 0.3 * rng.standard_normal(m.nv)
    return d, rng


def _track(sys, m, steps, seed=0, other=None):
    """Drives both engines with the same random controls; returns the largest q and qd gaps
    (and, given `other`, a second MuJoCo model driven alike, the largest q gap to it)."""
    m.opt.iterations, m.opt.tolerance = 100, 1e-10
    d, rng = _start(m, seed)
    d_other = _start(other, seed)[0] if other is not None else None
    state = physics.init(sys, d.qpos.copy(), d.qvel.copy())
    q_gap = qd_gap = other_gap = 0.0
    for _ in range(steps):
        ctrl = rng.uniform(-1, 1, m.nu)
        d.ctrl[:] = ctrl
        mujoco.mj_step(m, d)
        state = step(sys, state, jnp.asarray(ctrl, jnp.float32))
        q_gap = max(q_gap, float(np.abs(np.asarray(state.q) - d.qpos).max()))
        qd_gap = max(qd_gap, float(np.abs(np.asarray(state.qd) - d.qvel).max()))
        if d_other is not None:
            d_other.ctrl[:] = ctrl
            mujoco.mj_step(other, d_other)
            other_gap = max(other_gap, float(np.abs(np.asarray(state.q) - d_other.qpos).max()))
    return (q_gap, qd_gap) if other is None else (q_gap, qd_gap, other_gap)


@pytest.mark.parametrize("integrator", ["implicit", "implicitfast"])
def test_implicit_integrators_track_mujoco(integrator):
    """...and differ from each other by far more than the tolerance (the Coriolis derivative
    alone moves the arm measurably), so the parity can fail."""
    xml = ARM_XML.format(integrator=integrator, boxes=BOXES)
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    assert sys.integrator == integrator
    twin = {"implicit": "implicitfast", "implicitfast": "implicit"}[integrator]
    other = mujoco.MjModel.from_xml_string(ARM_XML.format(integrator=twin, boxes=BOXES))
    q_gap, qd_gap, twin_gap = _track(sys, m, 200, other=other)
    assert q_gap < 2e-5 and qd_gap < 2e-4, (q_gap, qd_gap)
    assert twin_gap > 1e-3


# A parallel gripper: two sibling fingers on a wrist, coupled by a damped tendon that a servo
# drives (as MuJoCo Menagerie's Panda hand). The tendon's damping and the servo's kv couple
# the fingers' velocities, but the fingers are on different branches, off M's sparsity, where
# MuJoCo's qDeriv has no entries: its implicit integrators leave those couplings out.
GRIPPER = """<mujoco><option timestep="0.01" integrator="{integrator}"/><worldbody>
  <body><joint name="wrist" axis="0 0 1" damping="0.1"/><geom type="box" size=".05 .05 .02"/>
    <body pos="0 .03 0"><joint name="left" type="slide" axis="0 1 0" damping="1"/>
      <geom type="box" size=".01 .01 .03" pos="0 0 -.05"/></body>
    <body pos="0 -.03 0"><joint name="right" type="slide" axis="0 -1 0" damping="1"/>
      <geom type="box" size=".01 .01 .03" pos="0 0 -.05"/></body></body></worldbody>
  <tendon><fixed name="split" damping="2"><joint joint="left" coef=".5"/>
    <joint joint="right" coef=".5"/></fixed></tendon>
  <actuator><general tendon="split" gainprm="100" biastype="affine" biasprm="0 -100 -10"/>
    <position joint="wrist" kp="10" kv="1"/></actuator></mujoco>"""


@pytest.mark.parametrize("integrator", ["implicit", "implicitfast"])
def test_implicit_integrators_leave_out_couplings_across_branches_as_mujoco(x64, integrator):
    """The gripper's fingers follow MuJoCo to rounding (with the couplings kept, Panda's
    fingers were 1e-8 off in q within a step)."""
    xml = GRIPPER.format(integrator=integrator)
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qvel[:] = [0.3, 0.2, -0.1]
    controls = np.random.default_rng(0).uniform(0, 0.04, (50, 1)) * [[1, 0]] + [[0, 0.5]]
    state = drive_alongside(sys, m, d, controls, 2)
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, rtol=0, atol=1e-13)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, rtol=0, atol=1e-12)


def test_implicitfast_keeps_a_stiff_servo_stable_where_euler_diverges():
    """The reason robot models ask for implicitfast: a servo with kv = 500 at dt = 0.01 is
    unstable under explicit velocity damping (|1 - dt kv / m| > 1), stable when implicit."""
    xml = """<mujoco><option timestep="0.01" integrator="{}"/><worldbody>
      <body><joint name="j" axis="0 0 1"/><geom type="box" size="0.2 0.05 0.05" mass="1"/>
      </body></worldbody>
      <actuator><position joint="j" kp="2000" kv="500"/></actuator></mujoco>"""
    swings = {}
    for integrator in ("Euler", "implicitfast"):
        sys = physics.load_mjcf(xml.format(integrator))
        state = step(sys, physics.init(sys), jnp.ones(1), n_substeps=200)
        swings[integrator] = abs(float(state.q[0]))
    assert not swings["Euler"] < 10  # diverged (or NaN)
    assert swings["implicitfast"] == pytest.approx(1.0, abs=0.01)  # settled at the target


@pytest.mark.parametrize("name", ["inverted_double_pendulum", "ant"])
def test_rk4_tracks_mujoco_on_gymnasium_models(name):
    """gymnasium's XMLs ask for RK4; the ant's contacts are solved at every stage."""
    sys, m = physics.load_mjcf(gym_asset(name)), mujoco.MjModel.from_xml_path(gym_asset(name))
    assert sys.integrator == "RK4"
    q_gap, qd_gap = _track(sys, m, 100)
    limits = {"inverted_double_pendulum": (2e-5, 2e-4), "ant": (1e-4, 2e-3)}[name]
    assert q_gap < limits[0] and qd_gap < limits[1], (q_gap, qd_gap)


def test_rk4_moves_ball_and_free_joints_on_the_manifold_as_mujoco():
    """MuJoCo 4.0's RK4 integrates joint rotations Lie-group style (Runge-Kutta-Munthe-Kaas):
    summing the stages' angular velocities as plain vectors drifts from it by ~1e-6 per step
    at these spin rates."""
    xml = """<mujoco><option timestep="0.01" integrator="RK4"/><worldbody>
      <body pos="0 0 1"><joint type="ball"/>
        <geom type="capsule" fromto="0 0 0 0.3 0.1 -0.4" size="0.05"/>
        <body pos="0.3 0.1 -0.4"><joint type="ball"/><geom type="box" size="0.1 0.05 0.2"/>
        </body></body>
      <body pos="1 0 1"><freejoint/><geom type="box" size="0.3 0.1 0.05"/>
        <body pos="0.3 0 0"><joint axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/></body></body>
    </worldbody></mujoco>"""
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    sys = dataclasses.replace(sys, disable_contact=True)
    d, _ = _start(m, 1)
    d.qvel[:] *= 10  # spinning at a few rad/s
    state = step(sys, physics.init(sys, d.qpos.copy(), d.qvel.copy()), jnp.zeros(0), 100)
    mujoco.mj_step(m, d, nstep=100)
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=2e-5)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, atol=2e-4)


def test_rk4_is_fourth_order_on_a_pendulum():
    """Halving dt divides RK4's error after 2 s of a large swing by more than 12 (fourth
    order: 16), Euler's by about 2."""
    xml = """<mujoco><option timestep="{}" integrator="{}"/><worldbody>
      <body><joint axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0 0 -1" size="0.05"/>
      </body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml.format(0.0005, "RK4"))  # the reference
    d = mujoco.MjData(m)
    d.qpos[0] = 1.5
    mujoco.mj_step(m, d, nstep=4000)
    errors = {}
    for integrator in ("RK4", "Euler"):
        for dt in (0.1, 0.05):
            sys = physics.load_mjcf(xml.format(dt, integrator))
            state = step(sys, physics.init(sys, jnp.array([1.5])), jnp.zeros(0), round(2 / dt))
            errors[integrator, dt] = abs(float(state.q[0]) - d.qpos[0])
    assert errors["RK4", 0.1] / errors["RK4", 0.05] > 12, errors
    assert 1.8 < errors["Euler", 0.1] / errors["Euler", 0.05] < 2.2, errors
    assert errors["RK4", 0.1] < 0.01 * errors["Euler", 0.1]


def test_rk4_integrates_activations_like_mujoco():
    """Filter, exact filter and clipped integrator activations through RK4's stages."""
    xml = """<mujoco><option timestep="0.01" integrator="RK4"/><worldbody>
      <body><joint name="a" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body pos="0.3 0 0"><joint name="b" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
          <body pos="0.3 0 0"><joint name="c" axis="0 1 0"/>
            <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/></body></body></body>
      </worldbody><actuator>
      <general joint="a" dyntype="filter" dynprm="0.05" gainprm="3" ctrlrange="-1 1"/>
      <general joint="b" dyntype="filterexact" dynprm="0.03" gainprm="2" ctrlrange="-1 1"/>
      <general joint="c" dyntype="integrator" actlimited="true" actrange="-0.3 0.3"
               gainprm="2" ctrlrange="-1 1"/>
      </actuator></mujoco>"""
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    q_gap, qd_gap = _track(sys, m, 100)
    assert q_gap < 1e-4 and qd_gap < 1e-3, (q_gap, qd_gap)


@pytest.mark.parametrize("integrator", ["RK4", "implicit", "implicitfast"])
def test_gradients_through_each_integrator_are_finite(integrator):
    """Through 50 steps of the arm alone for the implicit integrators, of gymnasium's
    inverted double pendulum for RK4 (the explicit integrators diverge on the arm's stiff
    servos). Without contacts: they are differentiated elsewhere."""
    if integrator == "RK4":
        sys = physics.load_mjcf(gym_asset("inverted_double_pendulum"))
    else:
        sys = physics.load_mjcf(without_contacts(ARM_XML.format(integrator=integrator, boxes="")))
    assert sys.integrator == integrator

    def loss(ctrl):
        state = physics.step(sys, physics.init(sys), ctrl, n_substeps=50)
        return jnp.sum(state.q[:3] ** 2)

    grad = jax.jit(jax.grad(loss))(jnp.full(sys.nu, 0.5))
    assert np.isfinite(np.asarray(grad)).all() and np.abs(np.asarray(grad)).max() > 0


def test_unknown_integrators_are_refused():
    with pytest.raises(physics.MJCFError, match="integrator='Verlet' must be one of"):
        physics.load_mjcf('<mujoco><option integrator="Verlet"/><worldbody/></mujoco>')
    arm = physics.load_mjcf(ARM_XML.format(integrator="Euler", boxes=""))
    sys = dataclasses.replace(arm, integrator="rk4")
    with pytest.raises(ValueError, match="integrator='rk4' must be one of"):
        physics.step(sys, physics.init(sys), jnp.zeros(sys.nu))
    assert INTEGRATORS == ("Euler", "RK4", "implicit", "implicitfast")  # mjtIntegrator order
