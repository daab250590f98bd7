"""Actuators against MuJoCo: motor, position, velocity and general (affine) on hinge, slide,
ball and free joints, on fixed tendons, sites and slider-cranks, with gears, control and force
clipping, inheritrange and class defaults; fixed-tendon springs (with a deadband), dampers
and armature; tendon actuator force ranges."""

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco_parity import drive_alongside, without_contacts

import physics
from physics import dynamics
from physics.step import smooth_force

ACTUATORS_XML = """
<mujoco>
  <option timestep="0.002"/>
  <default>
    <default class="servo">
      <position kp="30" kv="2" forcerange="-8 8"/>
    </default>
    <default class="limited">
      <general ctrlrange="-0.5 0.5"/>
    </default>
  </default>
  <worldbody>
    <body pos="0 0 1">
      <joint name="h0" type="hinge" axis="0 1 0" range="-60 90" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.05"/>
      <body pos="0.4 0 0">
        <joint name="h1" type="hinge" axis="0 0 1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
        <body pos="0.3 0 0">
          <joint name="s2" type="slide" axis="1 0 0"/>
          <geom type="box" size="0.05 0.05 0.05"/>
          <body pos="0.1 0 0">
            <joint name="h3" type="hinge" axis="1 0 0" range="-30 30"/>
            <geom type="sphere" size="0.05"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="coupled"><joint joint="h1" coef="1"/><joint joint="h3" coef="-0.5"/></fixed>
    <fixed name="stretch"><joint joint="s2" coef="2"/><joint joint="h0" coef="0.3"/></fixed>
  </tendon>
  <actuator>
    <position class="servo" joint="h0" gear="2"/>
    <velocity joint="h1" kv="3" ctrlrange="-1 1"/>
    <general class="limited" joint="s2" gainprm="5" biasprm="0.5 -4 -1" biastype="affine"/>
    <position joint="h3" kp="10" inheritrange="0.5"/>
    <motor joint="h1" gear="0.5"/>
    <motor tendon="coupled" gear="1.5" ctrlrange="-1 1"/>
    <position tendon="stretch" kp="6" kv="0.5"/>
  </actuator>
</mujoco>
"""


def test_actuator_forces_and_trajectory_match_mujoco():
    sys = physics.load_mjcf(ACTUATORS_XML)
    m = mujoco.MjModel.from_xml_string(ACTUATORS_XML)
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    unlimited = np.where(m.actuator_ctrllimited[:, None], m.actuator_ctrlrange, [-np.inf, np.inf])
    np.testing.assert_allclose(sys.actuator_ctrlrange, unlimited, atol=1e-6)
    d = mujoco.MjData(m)
    force = jax.jit(
        lambda sys, q, qd, u: dynamics.actuator_force(
            sys, physics.forward_kinematics(sys, q), q, qd, u
        )
    )
    rng = np.random.default_rng(0)
    for _ in range(5):
        q, qd = rng.normal(size=m.nq), 2 * rng.normal(size=m.nv)
        ctrl = 2 * rng.normal(size=m.nu)  # often outside the control ranges: clipped
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, qd, ctrl
        mujoco.mj_forward(m, d)
        np.testing.assert_allclose(force(sys, q, qd, ctrl), d.qfrc_actuator, rtol=1e-5, atol=1e-5)
    # 200 steps under constant targets: the servos pull the joints; MuJoCo's Euler follows.
    sys = dataclasses.replace(sys, disable_contact=True, disable_limit=True)
    d.qpos[:], d.qvel[:], d.ctrl[:] = m.qpos0, 0.0, [0.5, 0.3, 0.2, 0.1, -0.4, 0.6, 0.2]
    state = jax.jit(physics.step, static_argnames="n_substeps")(
        sys, physics.init(sys), np.asarray(d.ctrl, np.float32), n_substeps=200
    )
    for _ in range(200):
        mujoco.mj_step(m, d)
    assert np.abs(d.qpos - m.qpos0).max() > 0.05  # the actuators moved the model
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=2e-4)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, atol=2e-3)


@pytest.mark.parametrize(
    "actuator, needle",
    [
        ('<general joint="j" dyntype="user"/>', "dyntype"),
        ('<general joint="j" gaintype="user"/>', "gaintype"),
        ('<general joint="j" biastype="affine" biasprm="0 0 0 1"/>', "biasprm[0:3]"),
        ('<position joint="j" kp="-1"/>', "kp and kv"),
        ('<position joint="j" inheritrange="1"/>', "inheritrange needs a limited joint or tendon"),
        ('<damper joint="j" kv="1"/>', "a damper needs a ctrlrange of non-negative values"),
        ('<damper joint="j" kv="1" ctrlrange="-1 1"/>', "non-negative"),
        ('<intvelocity joint="j" kp="1"/>', "intvelocity needs an actrange"),
        ('<velocity tendon="nope"/>', "unknown tendon 'nope'"),
        ('<motor joint="j" tendon="t"/>', "one of joint, jointinparent, tendon, site"),
        ('<motor site="nope"/>', "unknown site 'nope'"),
        ('<position tendon="t" inheritrange="1"/>', "inheritrange needs a limited joint or tendon"),
        ('<general cranksite="a" cranklength=".5"/>', "a slider-crank needs slidersite"),
        ('<general cranksite="a" slidersite="nope" cranklength="1"/>', "unknown site 'nope'"),
        ('<general cranksite="a" slidersite="b"/>', "a slider-crank needs cranklength > 0"),
        ('<general cranksite="a" slidersite="b" cranklength="1" gear="1 2"/>', "first gear"),
    ],
)
def test_unsupported_actuators_are_named(actuator, needle):
    xml = (
        '<mujoco><worldbody><body><joint name="j"/><geom size="0.1"/><site name="a"/>'
        '<site name="b"/></body></worldbody>'
        '<tendon><fixed name="t"><joint joint="j" coef="2"/></fixed></tendon>'
        f"<actuator>{actuator}</actuator></mujoco>"
    )
    with pytest.raises(physics.MJCFError) as err:
        physics.load_mjcf(xml)
    assert needle in str(err.value)


TENDON_SPRINGS_XML = without_contacts(
    """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body pos="0 0 1">
      <joint name="a" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.05"/>
      <body pos="0.4 0 0">
        <joint name="b" type="hinge" axis="0 1 0" springref="20"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
        <body pos="0.3 0 0">
          <joint name="c" type="slide" axis="1 0 0"/>
          <geom type="box" size="0.05 0.05 0.05"/>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed stiffness="20" damping="0.5">
      <joint joint="a" coef="1"/><joint joint="b" coef="-2"/>
    </fixed>
    <fixed stiffness="30" springlength="-0.05 0.05"><joint joint="c" coef="1"/></fixed>
    <fixed damping="0.8"><joint joint="b" coef="1"/><joint joint="c" coef="3"/></fixed>
  </tendon>
</mujoco>
"""
)


def test_tendon_springs_and_dampers_match_mujoco():
    sys = physics.load_mjcf(TENDON_SPRINGS_XML)
    m = mujoco.MjModel.from_xml_string(TENDON_SPRINGS_XML)
    np.testing.assert_allclose(sys.tendon_lengthspring, m.tendon_lengthspring, atol=1e-6)
    d = mujoco.MjData(m)
    passive = jax.jit(
        lambda sys, q, qd: dynamics.passive_force(sys, physics.forward_kinematics(sys, q), q, qd)
    )
    rng = np.random.default_rng(0)
    for _ in range(5):
        d.qpos[:], d.qvel[:] = rng.normal(size=m.nq) * 0.3, rng.normal(size=m.nv)
        mujoco.mj_forward(m, d)
        np.testing.assert_allclose(
            passive(sys, d.qpos, d.qvel), d.qfrc_passive, rtol=1e-5, atol=1e-5
        )
    # 300 steps from a swing: the springs pull the chain about; MuJoCo's Euler follows
    mujoco.mj_resetData(m, d)
    d.qvel[:] = [2.0, -1.0, 0.5]
    state = jax.jit(physics.step, static_argnames="n_substeps")(
        sys, physics.init(sys, qd=np.float32(d.qvel)), np.zeros(0), n_substeps=300
    )
    for _ in range(300):
        mujoco.mj_step(m, d)
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=2e-4)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, atol=2e-3)


# One actuator default per class, as MuJoCo resolves it (each case probed against MuJoCo 4.0).
ACTUATOR_DEFAULTS = [
    ('<position kp="30" kv="2"/>', '<position joint="j" kp="5"/>'),
    ('<velocity kv="5"/>', '<position joint="j"/>'),
    ('<position kp="30" kv="2"/>', '<velocity joint="j"/>'),
    ('<position kp="30" kv="2"/>', '<motor joint="j"/>'),
    ('<position kp="30" kv="2"/>', '<general joint="j"/>'),
    ('<velocity kv="3"/>', '<general joint="j"/>'),
    ('<general gainprm="4" biastype="affine" biasprm="1 2 3"/>', '<general joint="j"/>'),
    ('<general gainprm="4" biastype="affine" biasprm="1 2 3"/>', '<motor joint="j"/>'),
    ('<motor gear="5"/><position kp="10"/><general gear="7"/>', '<position joint="j"/>'),
    ('<general gear="7"/><motor gear="5"/>', '<position joint="j"/>'),
    ('<motor ctrlrange="-1 1" gear="3"/>', '<general joint="j"/>'),
    (
        '<position kp="30" gear="2"/><default class="c"><motor gear="3"/></default>',
        '<position class="c" joint="j"/>',
    ),
    (
        '<position kp="30" gear="2"/><default class="c"><position kv="3"/></default>',
        '<position class="c" joint="j"/>',
    ),
    (
        '<position kp="30"/><default class="c"><motor gear="3"/></default>',
        '<general class="c" joint="j"/>',
    ),
    (
        '<position kp="30"/><default class="c"><general gear="3"/></default>',
        '<general class="c" joint="j"/>',
    ),
]


@pytest.mark.parametrize("default, actuator", ACTUATOR_DEFAULTS)
def test_actuator_defaults_resolve_as_mujoco(default, actuator):
    xml = (
        f"<mujoco><default>{default}</default><worldbody><body><joint name='j'/>"
        f"<geom size='0.1'/></body></worldbody><actuator>{actuator}</actuator></mujoco>"
    )
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    np.testing.assert_allclose(np.asarray(sys.actuator_gain), m.actuator_gainprm[:, :3])
    np.testing.assert_allclose(np.asarray(sys.actuator_bias), m.actuator_biasprm[:, :3], atol=0)
    np.testing.assert_allclose(np.asarray(sys.actuator_gear), m.actuator_gear[:, 0])
    limited = ~np.isinf(np.asarray(sys.actuator_ctrlrange)[:, 0])
    assert limited.tolist() == m.actuator_ctrllimited.astype(bool).tolist()


def test_a_shortcut_actuator_under_a_general_default_is_refused_by_name():
    xml = (
        "<mujoco><default><general gainprm='4' biastype='affine' biasprm='1 2 3'/></default>"
        "<worldbody><body><joint name='j'/><geom size='0.1'/></body></worldbody>"
        "<actuator><position joint='j'/></actuator></mujoco>"
    )
    with pytest.raises(physics.MJCFError, match="<position>: a <position> whose class default"):
        physics.load_mjcf(xml)


# One actuator of each kind of activation dynamics (integrator with a clipped activation,
# filter, filterexact) next to a stateless one, on a hinge chain.
ACTIVATION = without_contacts(
    """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <body pos="0 0 1">
      <joint name="a" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body pos="0.3 0 0">
        <joint name="b" type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body pos="0.3 0 0">
          <joint name="c" type="hinge" axis="0 1 0" damping="0.1"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <general joint="a" dyntype="integrator" actrange="-0.5 0.5" gainprm="4" ctrlrange="-1 1"/>
    <general joint="b" dyntype="filter" dynprm="0.05" gainprm="3" biastype="affine"
             biasprm="0 -3 -0.2"/>
    <general joint="c" dyntype="filterexact" dynprm="0.02" gainprm="2"/>
    <motor joint="c" gear="0.5"/>
  </actuator>
</mujoco>
"""
)


def test_activation_dynamics_track_mujoco():
    sys, m = physics.load_mjcf(ACTIVATION), mujoco.MjModel.from_xml_string(ACTIVATION)
    assert sys.na == m.na == 3
    d = mujoco.MjData(m)
    state, step = physics.init(sys), jax.jit(physics.step, static_argnames="n_substeps")
    rng, widest = np.random.default_rng(0), 0.0
    for k in range(30):  # 300 steps, controls changing every 10
        ctrl = rng.uniform(-1.5, 1.5, m.nu)
        ctrl[0] = 1.0 if k < 15 else ctrl[0]  # the integrator runs up to its actrange
        d.ctrl[:] = ctrl
        mujoco.mj_step(m, d, nstep=10)
        state = step(sys, state, jnp.asarray(ctrl), n_substeps=10)
        np.testing.assert_allclose(state.act, d.act, atol=1e-5)
        widest = max(widest, abs(float(state.act[0])))
    assert widest == pytest.approx(0.5)  # the integrator reached its actrange
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)


@pytest.mark.parametrize(
    "attrs, needle",
    [
        ('dyntype="user"', "unsupported dyntype='user'"),
        ('dyntype="filter" dynprm="0.1 2"', "dynprm\\[0\\] only"),
        ('dyntype="integrator" actrange="1 -1"', "actrange needs lo < hi"),
    ],
)
def test_unsupported_activation_is_named(attrs, needle):
    xml = ACTIVATION.replace('dyntype="filterexact" dynprm="0.02"', attrs)
    with pytest.raises(physics.MJCFError, match=needle):
        physics.load_mjcf(xml)


# Actuators on sites (MuJoCo's site transmission): a quadrotor's rotors push along their
# tilted sites' z axes with a drag torque, a yaw servo on a site damps by the site's angular
# velocity, and a hinged arm is pushed at its tip along the site's x axis (the default gear).
SITES_XML = without_contacts(
    """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <body name="quad" pos="0 0 1"><freejoint/>
      <geom type="box" size="0.1 0.1 0.02" mass="0.5"/>
      <site name="r1" pos="0.1 0.1 0" euler="5 0 0"/>
      <site name="r2" pos="-0.1 0.1 0" euler="0 5 0"/>
      <site name="r3" pos="-0.1 -0.1 0" euler="-5 0 0"/>
      <site name="r4" pos="0.1 -0.1 0" euler="0 -5 0"/>
      <site name="imu" pos="0 0 0.01"/>
    </body>
    <body name="arm" pos="1 0 1"><joint type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <site name="tip" pos="0.3 0 0" euler="0 30 0"/>
    </body>
  </worldbody>
  <actuator>
    <motor site="r1" gear="0 0 1 0 0 0.05" ctrlrange="0 5"/>
    <motor site="r2" gear="0 0 1 0 0 -0.05" ctrlrange="0 5"/>
    <motor site="r3" gear="0 0 1 0 0 0.05" ctrlrange="0 5"/>
    <motor site="r4" gear="0 0 1 0 0 -0.05" ctrlrange="0 5"/>
    <general site="imu" gear="0 0 0 0 0 1" gainprm="0.2" biastype="affine" biasprm="0 0 -0.5"/>
    <motor site="tip" ctrlrange="-2 2"/>
  </actuator>
</mujoco>
"""
)


def test_site_actuators_match_mujoco():
    sys, m = physics.load_mjcf(SITES_XML), mujoco.MjModel.from_xml_string(SITES_XML)
    d = mujoco.MjData(m)
    force = jax.jit(
        lambda q, qd, u: dynamics.actuator_force(sys, physics.forward_kinematics(sys, q), q, qd, u)
    )
    rng = np.random.default_rng(0)
    for _ in range(5):
        d.qpos[:] = m.qpos0 + 0.3 * rng.normal(size=m.nq)
        d.qpos[3:7] /= np.linalg.norm(d.qpos[3:7])
        d.qvel[:], d.ctrl[:] = rng.normal(size=m.nv), rng.uniform(-1, 4, m.nu)
        mujoco.mj_forward(m, d)
        np.testing.assert_allclose(
            force(d.qpos, d.qvel, d.ctrl), d.qfrc_actuator, rtol=1e-5, atol=1e-5
        )
    # 200 steps of flight under uneven thrust and a swinging, pushed arm
    mujoco.mj_resetData(m, d)
    d.ctrl[:] = [1.3, 1.2, 1.25, 1.2, 0.3, 1.0]
    state = jax.jit(physics.step, static_argnames="n_substeps")(
        sys, physics.init(sys), jnp.asarray(d.ctrl), n_substeps=200
    )
    mujoco.mj_step(m, d, nstep=200)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)


GRAVCOMP = without_contacts(
    """<mujoco><option timestep="0.002"/><worldbody>
  <body name="shoulder" pos="0 0 1" gravcomp="1"><joint axis="0 1 0" damping=".2"/>
    <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
    <body name="elbow" pos=".3 0 0" gravcomp=".5">
      <joint name="elbow" axis="0 1 0" actuatorgravcomp="true" actuatorfrcrange="-1.5 1.5"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
      <body pos=".3 0 0"><joint name="wrist" axis="1 0 0" actuatorfrcrange="-.2 .3" damping=".3"/>
        <geom type="box" size=".05 .02 .02" pos=".05 .01 0"/></body>
    </body>
  </body></worldbody>
  <actuator><motor joint="elbow" ctrlrange="-3 3"/><motor joint="wrist" ctrlrange="-1 1"/>
    <position joint="elbow" kp="5"/></actuator></mujoco>"""
)


def test_gravity_compensation_and_joint_actuator_force_limits_match_mujoco():
    """gravcomp holds that fraction of a body's weight up (passive, or actuator force where
    the joint says actuatorgravcomp); actuatorfrcrange clips a joint's total actuator force."""
    m = mujoco.MjModel.from_xml_string(GRAVCOMP)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(GRAVCOMP)
    forces = jax.jit(
        lambda q, qd, ctrl: (
            dynamics.passive_force(sys, physics.forward_kinematics(sys, q), q, qd),
            dynamics.actuator_force(sys, physics.forward_kinematics(sys, q), q, qd, ctrl),
        )
    )
    rng = np.random.default_rng(0)
    for _ in range(10):
        d.qpos[:], d.qvel[:], d.ctrl[:] = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)
        mujoco.mj_forward(m, d)
        passive, actuator = forces(*(jnp.asarray(x, jnp.float32) for x in (d.qpos, d.qvel, d.ctrl)))
        np.testing.assert_allclose(passive, d.qfrc_passive, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(actuator, d.qfrc_actuator, rtol=1e-5, atol=1e-5)
    assert np.isclose(np.abs(d.qfrc_actuator[1:]), [1.5, 0.2]).any()  # a limit was reached
    mujoco.mj_resetData(m, d)
    state = drive_alongside(sys, m, d, [np.array([0.5, 0.8, 0.3])] * 50, substeps=4)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)


def test_position_dampratio_sets_mujocos_kv():
    """kv = dampratio 2 sqrt(kp m), m the actuator's inertia at qpos0 (J M^-1 J^T inverted,
    gear and coupled dofs included), on a joint, through a gear, on a tendon; a class default
    carries it."""
    xml = """<mujoco><default><position dampratio=".7"/></default><worldbody>
      <body><joint name="a" axis="0 1 0" armature=".1"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
        <body pos=".3 0 0"><joint name="b" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/></body></body></worldbody>
      <tendon><fixed name="t"><joint joint="a" coef="1"/><joint joint="b" coef="-.5"/></fixed>
      </tendon>
      <actuator><position joint="b" kp="10" dampratio="1"/><position joint="a" kp="10" gear="2"/>
        <position tendon="t" kp="3"/><position joint="a" kp="5" kv="2" dampratio="0"/>
      </actuator></mujoco>"""
    xml = xml.replace(' dampratio="0"', "")
    # a <general> in the class takes the damping ratio; so does one whose affine bias encodes
    # one as MuJoCo's does (biasprm[1] = -gain, biasprm[2] > 0)
    xml = xml.replace(
        "</actuator>",
        '<general joint="b"/><general joint="b" gainprm="4" biastype="affine" '
        'biasprm=".5 -4 .3"/></actuator>',
    )
    m = mujoco.MjModel.from_xml_string(xml)
    sys = physics.load_mjcf(xml)
    np.testing.assert_allclose(sys.actuator_bias, m.actuator_biasprm[:, :3], rtol=1e-5)
    with pytest.raises(physics.MJCFError, match="kv and dampratio cannot both be given"):
        physics.load_mjcf(xml.replace('kv="2"', 'kv="2" dampratio=".5"'))


SHORTCUTS = """<mujoco><option timestep="0.002"/>
  <default><default class="servo"><intvelocity kp="20" kv="1" actrange="-1 1"/></default>
    <default class="piston"><cylinder timeconst=".05" diameter=".05" bias="1 0 -2"/></default>
    <default class="brake"><damper kv="3"/></default>
  </default>
  <worldbody><body><joint name="hinge" axis="0 1 0" damping=".1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
      <body pos=".3 0 0"><joint name="slide" type="slide" axis="1 0 0" damping="2"/>
        <geom type="box" size=".05 .03 .03"/></body></body></worldbody>
  <actuator>
    <intvelocity class="servo" joint="hinge"/>
    <intvelocity joint="hinge" kp="5" dampratio=".8" actrange="-.5 .5"/>
    <cylinder class="piston" joint="slide" ctrlrange="0 800"/>
    <cylinder joint="slide" area=".002"/>
    <general class="servo" joint="hinge"/>
    <general class="piston" joint="slide"/>
    <damper joint="slide" kv="40" ctrlrange="0 1"/>
    <general joint="hinge" gaintype="affine" gainprm="1 -2 -.5" biastype="affine" biasprm="0 -1"/>
    <general class="brake" joint="hinge" ctrlrange="0 1"/>
  </actuator></mujoco>"""


def test_intvelocity_cylinder_damper_and_affine_gains_are_mujocos():
    """<intvelocity> (an integrator on ctrl, a position servo on it, within actrange),
    <cylinder> (a filter on ctrl, gain area or pi d^2 / 4, affine bias), <damper> (gain
    -kv velocity) and affine gains, from their own attributes or their class, and <general>s
    in those classes, as MuJoCo builds them and along MuJoCo's driven trajectory."""
    m = mujoco.MjModel.from_xml_string(SHORTCUTS)
    sys = physics.load_mjcf(SHORTCUTS)
    np.testing.assert_allclose(sys.actuator_gain, m.actuator_gainprm[:, :3], rtol=1e-5)
    np.testing.assert_allclose(sys.actuator_bias, m.actuator_biasprm[:, :3], rtol=1e-5)
    assert sys.actuator_dyntype == tuple(m.actuator_dyntype)
    np.testing.assert_allclose(sys.actuator_dynprm, m.actuator_dynprm[:, :3], rtol=1e-6)
    act_range = np.where(m.actuator_actlimited[:, None], m.actuator_actrange, [-np.inf, np.inf])
    np.testing.assert_allclose(sys.actuator_actrange, act_range)
    d = mujoco.MjData(m)
    controls = [np.array([0.8, -0.6, 500, 300, 0.4, 200, 0.5, 0.3, 1])] * 30
    controls += [np.array([-1, 1, 0, 50, -1, 0, 1, -0.2, 0.2])] * 30
    state = drive_alongside(sys, m, d, controls, substeps=5)
    np.testing.assert_allclose(state.act, d.act, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)


REFSITE = without_contacts(
    """<mujoco><option timestep="0.002"/><worldbody>
  <site name="base" pos=".1 .05 .2" euler=".3 -.2 .5"/>
  <body pos="0 0 .3"><joint axis="0 0 1" damping=".5"/>
    <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
    <body pos=".3 0 0"><joint axis="0 1 0" damping=".5"/>
      <geom type="capsule" fromto="0 0 0 .25 0 0" size=".025"/>
      <body pos=".25 0 0"><joint axis="1 0 0" damping=".2"/>
        <geom type="box" size=".04 .02 .02"/><site name="hand" pos=".04 0 .01" euler="0 .4 0"/>
      </body></body></body></worldbody>
  <actuator>
    <position site="hand" refsite="base" gear="1 0 0 0 0 0" kp="40" kv="4"/>
    <position site="hand" refsite="base" gear="0 .6 .8 0 0 0" kp="30"/>
    <motor site="hand" refsite="base" gear="0 0 0 .2 .1 -.3"/>
    <motor site="hand" gear="0 0 1 0 .1 0"/>
  </actuator></mujoco>"""
)


def test_site_actuators_relative_to_a_refsite_match_mujoco():
    """With a refsite, a site actuator's length is its gear's dot product with the site's
    offset (in the refsite's frame) and rotation relative to the refsite, and its moment arms
    the relative Jacobian under the gear wrench in the refsite's frame: Cartesian servos."""
    m = mujoco.MjModel.from_xml_string(REFSITE)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(REFSITE)

    @jax.jit
    def forces(q: jax.Array, qd: jax.Array, ctrl: jax.Array) -> jax.Array:
        return dynamics.actuator_force(sys, physics.forward_kinematics(sys, q), q, qd, ctrl)

    rng = np.random.default_rng(0)
    for _ in range(10):
        d.qpos[:], d.qvel[:], d.ctrl[:] = rng.normal(size=3), rng.normal(size=3), rng.normal(size=4)
        mujoco.mj_forward(m, d)
        qfrc = forces(*(jnp.asarray(x, jnp.float32) for x in (d.qpos, d.qvel, d.ctrl)))
        np.testing.assert_allclose(qfrc, d.qfrc_actuator, rtol=1e-4, atol=1e-4)
    mujoco.mj_resetData(m, d)
    state = drive_alongside(sys, m, d, [np.array([0.45, 0.1, 0.3, -0.2])] * 40, substeps=5)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    with pytest.raises(physics.MJCFError, match="unknown refsite 'nope'"):
        physics.load_mjcf(REFSITE.replace('refsite="base" gear="1', 'refsite="nope" gear="1'))


def test_actearly_uses_the_activation_of_the_steps_end_as_mujoco():
    """actearly: the force takes act after this step's activation update, not before: one
    step less delay between ctrl and force (filter, integrator and filterexact dynamics)."""
    xml = """<mujoco><option timestep="0.01"/><worldbody><body>
        <joint name="a" axis="0 1 0" damping=".2"/><geom type="capsule" fromto="0 0 0 .3 0 0"
          size=".03"/><body pos=".3 0 0"><joint name="b" axis="0 1 0" damping=".2"/>
          <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/></body></body></worldbody>
      <actuator>
        <general joint="a" dyntype="filter" dynprm=".05" actearly="true"/>
        <general joint="b" dyntype="integrator" actearly="true" actrange="-1 1"
          biastype="affine" gainprm="3" biasprm="0 -3 -.3"/>
        <general joint="b" dyntype="filterexact" dynprm=".1"/>
      </actuator></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(xml)
    assert sys.actuator_actearly == (True, True, False)
    controls = [np.array([0.5, 2.0, -0.4])] * 20 + [np.array([-0.5, -1.0, 0.4])] * 20
    state = drive_alongside(sys, m, d, controls, substeps=2)
    np.testing.assert_allclose(state.act, d.act, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-5)
    late = physics.load_mjcf(xml.replace('actearly="true"', ""))
    mujoco.mj_resetData(m, d)
    other = drive_alongside(late, m, d, controls, substeps=2)  # (d follows actearly)
    assert np.abs(np.asarray(other.q) - d.qpos).max() > 1e-3


BALL_FREE = without_contacts(
    """<mujoco><option timestep="0.002" gravity="0 0 -2"/><worldbody>
  <body name="torso" pos="0 0 1"><freejoint name="root"/><geom size=".1"/>
    <body pos=".25 0 0" euler="10 20 30"><joint name="shoulder" type="ball" damping=".05"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".04"/>
      <body pos=".3 0 0"><joint name="elbow" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 .2 0 0" size=".03"/></body>
    </body>
  </body></worldbody>
  <actuator>
    <motor joint="shoulder" gear=".3 -.5 .7"/>
    <motor jointinparent="shoulder" gear="0 0 1"/>
    <position joint="shoulder" gear="1 0 0" kp="2" kv=".3"/>
    <motor joint="root" gear="1 2 3 .4 -.5 .6"/>
    <motor jointinparent="root" gear="0 0 1 0 0 1"/>
    <motor jointinparent="elbow" gear="2"/>
  </actuator></mujoco>"""
)


def test_actuators_on_ball_and_free_joints_match_mujoco():
    """On a ball or free joint the gear is a rotation axis in the joint's frame, or with
    jointinparent in the parent's (the world's for a free joint), and a free joint's first
    three gear numbers push along the world axes; a ball joint's length is its rotation
    vector along the axis, so a position servo on it holds an angle (MuJoCo's mjTRN_JOINT
    and mjTRN_JOINTINPARENT). On a hinge, jointinparent is joint."""
    m = mujoco.MjModel.from_xml_string(BALL_FREE)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(BALL_FREE)

    @jax.jit
    def forces(q: jax.Array, qd: jax.Array, ctrl: jax.Array) -> tuple[jax.Array, jax.Array]:
        length, _ = dynamics.actuator_moments(sys, physics.forward_kinematics(sys, q), q)
        qfrc = dynamics.actuator_force(sys, physics.forward_kinematics(sys, q), q, qd, ctrl)
        return length * sys.actuator_gear, qfrc

    rng = np.random.default_rng(0)
    for _ in range(10):
        d.qpos[:], d.qvel[:], d.ctrl[:] = (
            rng.normal(size=m.nq),
            rng.normal(size=m.nv),
            rng.normal(size=m.nu),
        )
        for adr in (3, 7):
            d.qpos[adr : adr + 4] /= np.linalg.norm(d.qpos[adr : adr + 4])
        mujoco.mj_forward(m, d)
        length, qfrc = forces(*(jnp.asarray(x, jnp.float32) for x in (d.qpos, d.qvel, d.ctrl)))
        np.testing.assert_allclose(length, d.actuator_length, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(qfrc, d.qfrc_actuator, rtol=1e-4, atol=1e-4)
    mujoco.mj_resetData(m, d)
    controls = [np.array([0.2, -0.1, 0.5, 0.3, 0.1, 0.2 * np.sin(i)]) for i in range(20)]
    state = drive_alongside(sys, m, d, controls, substeps=10)  # 200 driven steps
    assert np.abs(d.qpos[7:11] - m.qpos0[7:11]).max() > 0.05, "the shoulder should turn"
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)


SLIDER_CRANK = without_contacts(
    """<mujoco><option timestep="0.002"/><worldbody>
  <body pos="0 0 1"><joint name="crank" axis="0 1 0" damping=".02"/>
    <geom type="capsule" fromto="0 0 0 .2 0 0" size=".02"/><site name="pin" pos=".2 0 0"/>
  </body>
  <body pos=".6 0 1.1" euler="0 -90 0"><joint type="slide" axis="0 0 1" damping=".5"/>
    <geom type="box" size=".05 .05 .05"/><site name="slider" euler="0 10 0"/>
    <body pos="0 0 .1"><joint type="ball"/><geom size=".03"/><site name="tilted" euler="20 0 0"/>
    </body>
  </body>
</worldbody><actuator>
  <general cranksite="pin" slidersite="slider" cranklength=".5" gear="1.5"/>
  <position cranksite="pin" slidersite="tilted" cranklength=".45" kp="3" kv=".2"/>
</actuator></mujoco>"""
)


def test_slider_crank_actuators_match_mujoco():
    """A rod of cranklength joins the crank site to a slider on the slider site's z axis: the
    length is the slider's travel, the moment arms its derivative through both sites (here one
    slider site rides on a ball joint), the rod's unreachable poses included."""
    m = mujoco.MjModel.from_xml_string(SLIDER_CRANK)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(SLIDER_CRANK)

    @jax.jit
    def forces(q: jax.Array, qd: jax.Array, ctrl: jax.Array) -> tuple[jax.Array, jax.Array]:
        kin = physics.forward_kinematics(sys, q)
        length, _ = dynamics.actuator_moments(sys, kin, q)
        return length * sys.actuator_gear, dynamics.actuator_force(sys, kin, q, qd, ctrl)

    rng = np.random.default_rng(0)
    unreachable = 0
    for _ in range(20):
        d.qpos[:], d.qvel[:], d.ctrl[:] = (
            rng.normal(size=m.nq),
            rng.normal(size=m.nv),
            rng.normal(size=m.nu),
        )
        d.qpos[2:6] /= np.linalg.norm(d.qpos[2:6])
        mujoco.mj_forward(m, d)
        vec = d.site_xpos[0] - d.site_xpos[1]
        av = vec @ d.site_xmat[1].reshape(3, 3)[:, 2]
        unreachable += av * av + 0.25 - vec @ vec <= 0
        length, qfrc = forces(*(jnp.asarray(x, jnp.float32) for x in (d.qpos, d.qvel, d.ctrl)))
        np.testing.assert_allclose(length, d.actuator_length, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(qfrc, d.qfrc_actuator, rtol=1e-4, atol=1e-4)
    assert 0 < unreachable < 20, unreachable
    mujoco.mj_resetData(m, d)
    controls = [np.array([0.4 * np.sin(i / 2), 0.1]) for i in range(20)]
    state = drive_alongside(sys, m, d, controls, substeps=10)  # 200 driven steps
    assert abs(d.qpos[0]) > 0.1, "the crank should turn"
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)


TENDON_FORCE_LIMITS = """<mujoco><option timestep="0.002"/><worldbody>
  <site name="anchor" pos="0 0 1.3"/>
  <body pos="0 0 1"><joint name="a" axis="0 1 0" damping=".1"/>
    <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
    <body pos=".3 0 0"><joint name="b" axis="0 1 0" damping=".1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/><site name="tip" pos=".3 0 0"/>
    </body></body></worldbody>
  <tendon>
    <fixed name="pair" actuatorfrcrange="-1 .5"><joint joint="a" coef="1"/>
      <joint joint="b" coef="-2"/></fixed>
    <spatial name="cable" actuatorfrclimited="true" actuatorfrcrange="0 2">
      <site site="anchor"/><site site="tip"/></spatial>
    <fixed name="free" actuatorfrcrange="-1 1" actuatorfrclimited="false">
      <joint joint="b" coef="1"/></fixed>
  </tendon>
  <actuator><motor tendon="pair" gear="2"/><motor tendon="pair"/><motor tendon="cable"/>
    <position tendon="free" kp="3"/><motor joint="a"/></actuator></mujoco>"""


def test_a_tendons_actuator_force_range_scales_its_actuators_as_mujoco():
    """A tendon's actuatorfrcrange bounds the sum of its actuators' forces: past it, each is
    scaled by bound / sum (the gear applies after); actuatorfrclimited="false" turns it off."""
    m = mujoco.MjModel.from_xml_string(TENDON_FORCE_LIMITS)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(TENDON_FORCE_LIMITS)
    assert [r[0] for r in sys.tendon_actuator_force_limits] == [(0, 1), (2,)]
    forces = jax.jit(
        lambda q, qd, u: dynamics.actuator_force(sys, physics.forward_kinematics(sys, q), q, qd, u)
    )
    rng = np.random.default_rng(0)
    scaled = 0
    for _ in range(20):
        d.qpos[:], d.qvel[:], d.ctrl[:] = rng.normal(size=2), rng.normal(size=2), rng.normal(size=5)
        mujoco.mj_forward(m, d)
        scaled += not np.allclose(d.actuator_force[:3], d.ctrl[:3])
        qfrc = forces(*(jnp.asarray(x, jnp.float32) for x in (d.qpos, d.qvel, d.ctrl)))
        np.testing.assert_allclose(qfrc, d.qfrc_actuator, rtol=1e-5, atol=1e-5)
    assert scaled > 5, scaled
    mujoco.mj_resetData(m, d)
    controls = [np.array([0.8, -0.3, 3.0, 0.5, np.sin(i)]) for i in range(20)]
    state = drive_alongside(sys, m, d, controls, substeps=10)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)


TENDON_ARMATURE = without_contacts(
    """<mujoco><option timestep="0.002"/><worldbody>
  <site name="anchor" pos=".2 .1 1.4"/>
  <body pos="0 0 1"><joint name="a" axis="0 1 0" damping=".05"/>
    <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
    <body pos=".3 0 0"><joint name="c" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/><site name="tip" pos=".3 0 0"/>
    </body></body>
  <body pos="1 0 1"><joint name="b" axis="1 0 0"/>
    <geom type="capsule" fromto="0 0 0 0 .3 0" size=".03"/></body></worldbody>
  <tendon><fixed name="geared" armature=".2"><joint joint="a" coef="1"/><joint joint="c" coef=".5"/>
    <joint joint="b" coef="-3"/></fixed>
    <spatial armature=".5"><site site="anchor"/><site site="tip"/></spatial></tendon>
  <actuator><motor tendon="geared"/><motor joint="c"/></actuator></mujoco>"""
)


def test_tendon_armature_matches_mujocos_inertia_and_bias():
    """A tendon's armature adds armature * J^T J to M, on M's sparsity only (joints on
    different branches stay uncoupled in M, as MuJoCo's mj_tendonArmature leaves them), and
    a spatial tendon's the bias J^T armature (dJ/dt qd) (mj_tendonBias)."""
    m = mujoco.MjModel.from_xml_string(TENDON_ARMATURE)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(TENDON_ARMATURE)

    @jax.jit
    def mass_and_smooth(q: jax.Array, qd: jax.Array, ctrl: jax.Array) -> tuple:
        state = physics.init(sys, q, qd)
        return dynamics.mass_matrix(sys, state.kin), smooth_force(sys, state, ctrl)

    rng = np.random.default_rng(0)
    full = np.zeros((m.nv, m.nv))
    for _ in range(5):
        d.qpos[:], d.qvel[:], d.ctrl[:] = rng.normal(size=3), 2 * rng.normal(size=3), [0.3, -0.2]
        mujoco.mj_forward(m, d)
        mujoco.mj_fullM(m, d, full)
        mass, smooth = mass_and_smooth(
            *(jnp.asarray(x, jnp.float32) for x in (d.qpos, d.qvel, d.ctrl))
        )
        np.testing.assert_allclose(mass, full, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(smooth, d.qfrc_smooth, rtol=1e-4, atol=1e-4)
    assert full[0, 2] == 0 and full[2, 2] > 9 * 0.2  # (dofs a, c, b) a-b uncoupled; b: 0.2 * 3^2
    mujoco.mj_resetData(m, d)
    controls = [np.array([np.sin(i / 3), 0.2]) for i in range(20)]
    state = drive_alongside(sys, m, d, controls, substeps=10)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)
    with pytest.raises(physics.MJCFError, match="tendon armature must be >= 0"):
        physics.load_mjcf(TENDON_ARMATURE.replace('armature=".5"', 'armature="-1"'))
