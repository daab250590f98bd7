"""Sites and spatial tendons (straight segments between sites, pulleys) against MuJoCo."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco_parity import assert_constraint_force_matches, drive_alongside

import physics
from physics import kinematics, tendon

# dm_control's ball-in-cup, written out: a cup on two slides and a ball on two slides, tied
# by a string (a spatial tendon between two sites) that goes taut at 0.3.
BALL_IN_CUP = """
<mujoco>
  <default>
    <motor ctrllimited="true" ctrlrange="-1 1" gear="5"/>
    <default class="cup">
      <joint type="slide" damping="3" stiffness="20"/>
      <geom type="capsule" size=".008"/>
    </default>
  </default>
  <worldbody>
    <geom name="ground" type="plane" pos="0 0 0" size=".6 .2 10"/>
    <body name="cup" pos="0 0 .6" childclass="cup">
      <joint name="cup_x" axis="1 0 0"/>
      <joint name="cup_z" axis="0 0 1"/>
      <geom fromto="-.05 0 0 -.05 0 -.075"/>
      <geom fromto="-.05 0 -.075 -.025 0 -.1"/>
      <geom fromto="-.025 0 -.1 .025 0 -.1"/>
      <geom fromto=".025 0 -.1 .05 0 -.075"/>
      <geom fromto=".05 0 -.075 .05 0 0"/>
      <site name="cup" pos="0 0 -.108" size=".005"/>
      <site name="target" type="box" pos="0 0 -.05" size=".05 .006 .05" group="4"/>
    </body>
    <body name="ball" pos="0 0 .2">
      <joint name="ball_x" type="slide" axis="1 0 0"/>
      <joint name="ball_z" type="slide" axis="0 0 1"/>
      <geom name="ball" type="sphere" size=".025"/>
      <site name="ball" size=".005"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="x" joint="cup_x"/>
    <motor name="z" joint="cup_z"/>
  </actuator>
  <tendon>
    <spatial name="string" limited="true" range="0 0.3" width="0.003">
      <site site="ball"/>
      <site site="cup"/>
    </spatial>
  </tendon>
</mujoco>
"""

# A three-link arm with a cable along it (sites on every link, one in a frame, one given by
# fromto), a pulley branch, a spring-damper cable (a pulley before its first site scales it
# all), and a rough cable with a limit.
ARM = """
<mujoco>
  <option timestep="0.002"/>
  <default>
    <joint damping="0.05" armature="0.01"/>
    <site size="0.01"/>
    <default class="far"><site pos="0.25 0 0.04"/></default>
  </default>
  <worldbody>
    <site name="anchor" pos="0 0 1.1"/>
    <body pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <site name="s1" class="far"/>
      <body pos="0.3 0 0" euler="0 20 0">
        <joint name="j2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <frame pos="0.1 0 0" euler="0 0 90"><site name="s2" pos="0.05 0 0.05"/></frame>
        <body pos="0.3 0 0">
          <joint name="j3" type="ball"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
          <site name="s3" type="capsule" fromto="0.2 0.02 -0.04 0.3 0.02 -0.04"/>
          <site name="s4" pos="0.3 -0.03 0.04" euler="10 20 30"/>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <spatial name="spring" stiffness="40" damping="2" springlength="0.5 0.6">
      <site site="anchor"/><site site="s1"/><site site="s2"/>
      <pulley divisor="2"/>
      <site site="s2"/><site site="s4"/>
    </spatial>
    <spatial name="slack" stiffness="25">
      <pulley divisor="4"/><site site="s1"/><site site="s3"/>
    </spatial>
    <spatial name="rough" range="0.2 0.55" frictionloss="0.4" margin="0.01">
      <site site="anchor"/><site site="s2"/><site site="s3"/>
    </spatial>
  </tendon>
  <actuator><motor joint="j1" gear="1"/><motor joint="j2" gear="0.5"/></actuator>
</mujoco>
"""


def _random_state(m: mujoco.MjModel, rng: np.random.Generator, d: mujoco.MjData) -> None:
    d.qpos[:] = m.qpos0 + 0.5 * rng.normal(size=m.nq)
    for j in range(m.njnt):  # ball joints: a unit quaternion
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_BALL:
            adr = m.jnt_qposadr[j]
            d.qpos[adr : adr + 4] /= np.linalg.norm(d.qpos[adr : adr + 4])
    d.qvel[:] = rng.normal(size=m.nv)
    d.ctrl[:] = rng.uniform(-1, 1, m.nu)
    mujoco.mj_forward(m, d)


def test_sites_match_mujoco():
    sys, m = physics.load_mjcf(ARM), mujoco.MjModel.from_xml_string(ARM)
    assert sys.nsite == m.nsite and sys.site_id("s4") == m.site("s4").id == 4
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    frames = jax.jit(lambda q: kinematics.site_frames(sys, physics.forward_kinematics(sys, q)))
    for _ in range(3):
        _random_state(m, rng, d)
        pos, mat = frames(d.qpos)
        np.testing.assert_allclose(pos, d.site_xpos, atol=1e-5)
        np.testing.assert_allclose(mat.reshape(-1, 9), d.site_xmat, atol=1e-5)


def test_spatial_tendon_lengths_jacobians_and_passive_forces_match_mujoco():
    sys, m = physics.load_mjcf(ARM), mujoco.MjModel.from_xml_string(ARM)
    # MuJoCo's default spring length is the length at qpos_spring
    np.testing.assert_allclose(sys.tendon_lengthspring, m.tendon_lengthspring[:2], atol=1e-6)
    np.testing.assert_allclose(sys.tendon_invweight0, m.tendon_invweight0[2:], rtol=1e-5)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    everything = sys.spring_tendons + sys.constrained_tendons

    @jax.jit
    def measured(q, qd):
        kin = physics.forward_kinematics(sys, q)
        length, jac = tendon.lengths_and_jacobian(sys, kin, q, everything)
        return length, jac, physics.dynamics.passive_force(sys, kin, q, qd)

    for _ in range(5):
        _random_state(m, rng, d)
        length, jac, passive = measured(d.qpos, d.qvel)
        np.testing.assert_allclose(length, d.ten_length, atol=1e-6)
        np.testing.assert_allclose(jac, d.ten_J.reshape(m.ntendon, m.nv), atol=1e-5)
        np.testing.assert_allclose(passive, d.qfrc_passive, rtol=1e-5, atol=1e-5)


def test_spatial_tendon_limits_and_friction_match_mujoco():
    sys, m = physics.load_mjcf(ARM), mujoco.MjModel.from_xml_string(ARM)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(2)
    kinds = set()
    for _ in range(8):
        _random_state(m, rng, d)
        kinds |= assert_constraint_force_matches(sys, d)
    T = mujoco.mjtConstraint
    assert {T.mjCNSTR_LIMIT_TENDON, T.mjCNSTR_FRICTION_TENDON} <= kinds

    mujoco.mj_resetData(m, d)
    controls = [rng.uniform(-1, 1, m.nu) for _ in range(20)]
    state = drive_alongside(sys, m, d, controls, 10)  # 200 driven steps
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=2e-3)


def test_ball_in_cup_string_tracks_mujoco():
    """The cup swings; the ball falls until the string catches it, and is swung about by it."""
    sys, m = physics.load_mjcf(BALL_IN_CUP), mujoco.MjModel.from_xml_string(BALL_IN_CUP)
    d = mujoco.MjData(m)
    state, step = physics.init(sys), jax.jit(physics.step, static_argnames="n_substeps")
    taut = 0
    for i in range(40):  # 400 steps of 0.002 s
        ctrl = np.array([np.sin(i / 4), np.cos(i / 5)])
        d.ctrl[:] = ctrl
        mujoco.mj_step(m, d, nstep=10)
        state = step(sys, state, jnp.asarray(ctrl), n_substeps=10)
        taut += int(mujoco.mjtConstraint.mjCNSTR_LIMIT_TENDON in d.efc_type)
        np.testing.assert_allclose(state.q, d.qpos, atol=2e-4, err_msg=f"after {10 * i + 10}")
    assert taut > 5  # the string held the ball for a good part of the run
    length, _ = tendon.lengths_and_jacobian(sys, state.kin, state.q, sys.constrained_tendons)
    assert float(length[0]) < 0.3 + 0.01  # it never stretched past its soft limit


@pytest.mark.parametrize(
    "path, needle",
    [
        ('<site site="a"/><site site="nope"/>', "unknown site 'nope'"),
        ('<site site="a"/>', "needs two sites"),
        ('<site site="a"/><site site="b"/><pulley divisor="0"/><site site="a"/>', "divisor > 0"),
        ('<site site="a"/><pulley divisor="2"/><site site="a"/><site site="b"/>', "two sites"),
        ('<pulley divisor="2"/><site site="a"/><pulley divisor="2"/>', "two sites"),
        ('<site site="a"/><joint joint="j"/>', "unsupported element <joint>"),
        ('<geom geom="g"/><site site="b"/>', "between two sites"),
        ('<site site="a"/><geom geom="g"/>', "between two sites"),
        ('<site site="a"/><geom geom="g"/><geom geom="g"/><site site="b"/>', "between two"),
        ('<site site="a"/><geom geom="g"/><pulley divisor="2"/><site site="b"/>', "between"),
        ('<site site="a"/><geom geom="cap"/><site site="b"/>', "sphere or a cylinder only"),
        ('<site site="a"/><geom geom="nope"/><site site="b"/>', "unknown geom 'nope'"),
        ('<site site="a"/><geom geom="g" sidesite="x"/><site site="b"/>', "unknown site 'x'"),
        ('<site site="a"/><geom/><site site="b"/>', "needs geom"),
    ],
)
def test_spatial_tendon_errors_name_the_problem(path, needle):
    xml = (
        '<mujoco><worldbody><site name="a"/><body><joint name="j"/><geom name="g" size="1"/>'
        '<geom name="cap" type="capsule" size="0.1 0.2"/><site name="b" pos="1 0 0"/></body>'
        f'</worldbody><tendon><spatial range="0 1">{path}</spatial></tendon></mujoco>'
    )
    with pytest.raises(physics.MJCFError, match=needle):
        physics.load_mjcf(xml)


# A two-finger gripper pulled by cables: a motor and a position servo (its control range from
# the cable's limits, inheritrange) drive spatial tendons; an equality keeps the second
# finger's cable as long as a polynomial of the first finger's cable says.
CABLES = """
<mujoco>
  <option timestep="0.002"/>
  <default><joint damping="0.2" armature="0.01"/></default>
  <worldbody>
    <site name="base" pos="0 0 1.05"/>
    <site name="base2" pos="0 0.1 1.05"/>
    <body name="f1" pos="0 0 1">
      <joint name="a1" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      <site name="f1" pos="0.2 0 0.02"/>
      <body pos="0.3 0 0">
        <joint name="a2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
        <site name="f1tip" pos="0.2 0 0.02"/>
      </body>
    </body>
    <body name="f2" pos="0 0.1 1">
      <joint name="b1" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      <site name="f2" pos="0.25 0 0.02"/>
    </body>
  </worldbody>
  <tendon>
    <spatial name="pull" stiffness="5">
      <site site="base"/><site site="f1"/><site site="f1tip"/>
    </spatial>
    <spatial name="servo" limited="true" range="0.2 0.32">
      <site site="base"/><site site="f1"/>
    </spatial>
    <spatial name="follow"><site site="base2"/><site site="f2"/></spatial>
  </tendon>
  <actuator>
    <motor tendon="pull" gear="2" ctrlrange="-3 3"/>
    <position tendon="servo" kp="50" inheritrange="0.8"/>
  </actuator>
  <equality><tendon tendon1="follow" tendon2="pull" polycoef="0 0.5 0.8 0 0"/></equality>
</mujoco>
"""


def test_actuators_and_equalities_on_spatial_tendons_match_mujoco():
    sys, m = physics.load_mjcf(CABLES), mujoco.MjModel.from_xml_string(CABLES)
    np.testing.assert_allclose(sys.actuator_ctrlrange, m.actuator_ctrlrange, atol=1e-6)
    np.testing.assert_allclose(sys.tendon_invweight0, m.tendon_invweight0[1:2], rtol=1e-5)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(4)

    @jax.jit
    def actuated(q, qd, ctrl):
        kin = physics.forward_kinematics(sys, q)
        return physics.dynamics.actuator_force(sys, kin, q, qd, ctrl)

    for _ in range(5):
        _random_state(m, rng, d)
        np.testing.assert_allclose(
            actuated(d.qpos, d.qvel, d.ctrl), d.qfrc_actuator, rtol=1e-5, atol=1e-5
        )
        assert_constraint_force_matches(sys, d)
    mujoco.mj_resetData(m, d)
    controls = [np.array([2 * np.sin(i / 3), 0.22 + 0.08 * np.cos(i / 4)]) for i in range(20)]
    state = drive_alongside(sys, m, d, controls, 10)  # 200 driven steps
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=2e-3)
