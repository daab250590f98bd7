"""MuJoCo's muscle actuators (physics.muscle) and the length ranges its compiler simulates
(physics.lengthrange), against MuJoCo."""

import os
import re

import jax
import mujoco
import numpy as np
import pytest
from mujoco_parity import drive_alongside

import physics
from physics import dynamics

# A two-joint arm moved by four muscles: one on the shoulder joint with MuJoCo's defaults (its
# peak force from scale / acc0, its length range simulated), one of a default class on a
# tendon over the elbow's drum with smoothed activation, one with its own force, length range
# and curve parameters, and one in <general> form with a passive curve of its own that extends
# the elbow (gear -1).
ARM = """
<mujoco>
  <option timestep="0.005"/>
  <default>
    <geom contype="0" conaffinity="0"/>
    <default class="strong"><muscle scale="400" fvmax="1.4"/></default>
  </default>
  <worldbody>
    <site name="origin" pos="0 0.04 0.25"/>
    <body name="upper">
      <joint name="shoulder" type="hinge" axis="1 0 0" range="-90 90" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="1"/>
      <site name="mid" pos="0 0.04 -0.1"/>
      <geom name="drum" type="cylinder" pos="0 0 -0.3" euler="0 90 0" size="0.04 0.05"/>
      <site name="side" pos="0 0.1 -0.3"/>
      <body name="fore" pos="0 0 -0.3">
        <joint name="elbow" type="hinge" axis="1 0 0" range="-10 140"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.025" mass="0.6"/>
        <site name="insert" pos="0 0.03 -0.08"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <spatial name="biceps"><site site="mid"/><geom geom="drum" sidesite="side"/>
      <site site="insert"/></spatial>
    <spatial name="long"><site site="origin"/><site site="mid"/><site site="insert"/></spatial>
  </tendon>
  <actuator>
    <muscle joint="shoulder"/>
    <muscle class="strong" tendon="biceps" tausmooth="0.2" timeconst="0.02 0.06"/>
    <muscle tendon="long" force="30" lengthrange="0.42 0.47" range="0.6 1.2" lmin="0.3"
            lmax="1.8" vmax="2" fpmax="1.1" fvmax="1.5"/>
    <general joint="elbow" gear="-1" gaintype="muscle" biastype="muscle" dyntype="muscle"
             dynprm="0.015 0.05" gainprm="0.7 1.1 -1 150 0.4 1.7 1.2 1.4 1.3"
             biasprm="0.7 1.1 -1 150 0.4 1.7 1.2 0.9 1.3"/>
  </actuator>
</mujoco>
"""
SHOULDER = '<muscle joint="shoulder"/>'
COMPILER = "<mujoco><compiler><lengthrange {}/></compiler>"


def _peak_forces(m: mujoco.MjModel, prm: np.ndarray) -> np.ndarray:
    """MuJoCo's gainprm/biasprm with the peak force resolved as its muscle curves resolve it
    at run time (force < 0: scale / acc0)."""
    prm = prm[:, :9].copy()
    unset = prm[:, 2] < 0
    prm[unset, 2] = prm[unset, 3] / m.actuator_acc0[unset]
    return prm


def test_muscle_constants_forces_and_activation_match_mujoco(x64):
    sys, m = physics.load_mjcf(ARM), mujoco.MjModel.from_xml_string(ARM)
    assert sys.na == m.na == 4
    np.testing.assert_allclose(sys.actuator_lengthrange, m.actuator_lengthrange, atol=1e-9)
    np.testing.assert_allclose(sys.actuator_dynprm, m.actuator_dynprm[:, :3])
    np.testing.assert_allclose(
        sys.actuator_muscle_gainprm, _peak_forces(m, m.actuator_gainprm), rtol=1e-12
    )
    np.testing.assert_allclose(
        sys.actuator_muscle_biasprm, _peak_forces(m, m.actuator_biasprm), rtol=1e-12
    )

    @jax.jit
    def forces(q, qd, act, ctrl):
        kin = physics.forward_kinematics(sys, q)
        return (
            dynamics.actuator_force(sys, kin, q, qd, ctrl, act),
            dynamics.activation_rate(sys, act, ctrl),
        )

    d, rng = mujoco.MjData(m), np.random.default_rng(0)
    for _ in range(40):  # past the joints' ranges: every branch of the curves is met
        d.qpos[:] = rng.uniform(m.jnt_range[:, 0] - 1.5, m.jnt_range[:, 1] + 1.5)
        d.qvel[:] = rng.normal(scale=10, size=m.nv)
        d.act[:] = rng.uniform(-0.2, 1.2, m.na)  # (its time constants clamp act to [0, 1])
        d.ctrl[:] = rng.uniform(-0.3, 1.3, m.nu)  # (a muscle clamps ctrl to [0, 1])
        mujoco.mj_forward(m, d)
        qfrc, act_dot = forces(d.qpos, d.qvel, d.act, d.ctrl)
        np.testing.assert_allclose(qfrc, d.qfrc_actuator, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(act_dot, d.act_dot, rtol=1e-9, atol=1e-9)


def test_a_driven_arm_of_muscles_follows_mujoco():
    """200 steps under implicitfast, whose velocity derivative takes in the muscles'
    force-velocity curves (as MuJoCo 4's does), with controls past [0, 1] too."""
    xml = ARM.replace('timestep="0.005"', 'timestep="0.005" integrator="implicitfast"')
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    controls = [0.5 + 0.7 * np.sin(np.arange(4) + k / 3) for k in range(20)]
    state = drive_alongside(sys, m, d, controls, 10)
    assert abs(d.qpos[1]) > 0.1  # the elbow moved
    np.testing.assert_allclose(state.act, d.act, atol=1e-5)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=2e-3)


@pytest.mark.parametrize(
    "options",
    [
        # the limited joints' ranges; "long" simulated though it has one; maxforce bounds its
        # pull (its range moves by 2e-5 against maxforce="0")
        'uselimit="true" useexisting="false" accel="20" maxforce="0.5" timeconst="0.5" '
        'timestep="0.004" inttotal="6" interval="1"',
        'mode="none"',  # no simulation: only the given range
    ],
)
def test_compiler_lengthrange_options_are_mujocos(options, x64):
    xml = ARM.replace("<mujoco>", COMPILER.format(options))
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    np.testing.assert_allclose(sys.actuator_lengthrange, m.actuator_lengthrange, atol=1e-9)


@pytest.mark.parametrize(
    "old, new, needle",
    [
        (SHOULDER, '<muscle joint="shoulder" range="1 0.5"/>', r"range\[0\] < range\[1\]"),
        (SHOULDER, '<muscle joint="shoulder" lmin="1.2"/>', "lmin < 1 < lmax"),
        (SHOULDER, '<muscle joint="shoulder" fpmax="0"/>', "scale, vmax, fpmax and fvmax > 0"),
        (SHOULDER, '<muscle joint="shoulder" tausmooth="-1"/>', "tausmooth must be >= 0"),
        ("0.9 1.3", "0.9 0", "scale, vmax, fpmax and fvmax > 0"),  # the general's biasprm
        ("<option", '<default><muscle lengthrange="0 1"/></default><option', "not in a <default>"),
        ("<mujoco>", COMPILER.format('mode="some"'), "unknown lengthrange mode 'some'"),
        ("<mujoco>", COMPILER.format('tolrange="x"'), "tolrange"),
    ],
)
def test_bad_muscles_are_refused_by_name(old, new, needle):
    with pytest.raises(physics.MJCFError, match=needle):
        physics.load_mjcf(ARM.replace(old, new))


def test_mujocos_arm26_is_refused_where_mujoco_refuses_it():
    """MuJoCo's 6-muscle arm (its MJX test model) does not load in MuJoCo 4: one muscle's
    length-range simulation keeps swinging while it pushes. Ours stops at the same muscle,
    with the same range."""
    path = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data", "actuator")
    path = os.path.join(path, "arm26.xml")
    with pytest.raises(ValueError, match="did not converge in actuator 1") as theirs:
        mujoco.MjModel.from_xml_path(path)
    with pytest.raises(physics.MJCFError, match="actuator 1 did not settle pushing") as ours:
        physics.load_mjcf(path)
    expected = re.search(r"range \((\S+), (\S+)\)", str(theirs.value)).groups()
    got = re.search(r"range \((\S+), (\S+)\)", str(ours.value)).groups()
    np.testing.assert_allclose(np.float64(got), np.float64(expected), atol=1e-4)
