"""Fixed-tendon limits and friction loss against MuJoCo."""

import mujoco
import numpy as np
import pytest
from mujoco_parity import assert_constraint_force_matches, drive_alongside

import physics

# A three-link arm whose summed bend is limited by a tendon (range set through a <default>
# class), and whose first two joints carry dry friction along another tendon.
ARM = """
<mujoco>
  <option timestep="0.002"/>
  <default><tendon limited="true" solreflimit="0.01 1"/></default>
  <worldbody>
    <body pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body pos="0.3 0 0">
        <joint name="j2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body pos="0.3 0 0">
          <joint name="j3" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="bend" range="-0.4 0.6" margin="0.01">
      <joint joint="j2" coef="1"/><joint joint="j3" coef="0.5"/>
    </fixed>
    <fixed name="rub" limited="false" frictionloss="0.3">
      <joint joint="j1" coef="1"/><joint joint="j2" coef="-1"/>
    </fixed>
  </tendon>
  <actuator><motor joint="j1" gear="5"/><motor joint="j3" gear="2"/></actuator>
</mujoco>
"""


def test_tendon_limit_and_friction_match_mujoco():
    sys, m = physics.load_mjcf(ARM), mujoco.MjModel.from_xml_string(ARM)
    np.testing.assert_allclose(sys.tendon_invweight0, m.tendon_invweight0, rtol=1e-5)
    d = mujoco.MjData(m)

    rng = np.random.default_rng(0)
    kinds = set()
    for _ in range(6):
        d.qpos[:] = 0.6 * rng.normal(size=m.nq)
        d.qvel[:] = rng.normal(size=m.nv)
        d.ctrl[:] = rng.uniform(-1, 1, m.nu)
        mujoco.mj_forward(m, d)
        kinds |= assert_constraint_force_matches(sys, d)
    T = mujoco.mjtConstraint
    assert {T.mjCNSTR_LIMIT_TENDON, T.mjCNSTR_FRICTION_TENDON} <= kinds

    d = mujoco.MjData(m)
    controls = [rng.uniform(-1, 1, m.nu) for _ in range(20)]
    state = drive_alongside(sys, m, d, controls, 10)  # 200 steps, driven
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)


@pytest.mark.parametrize(
    "tendon, needle",
    [
        ('<fixed range="1 0"><joint joint="j1"/></fixed>', "range lo < hi"),
        ('<fixed limited="false" frictionloss="-1"><joint joint="j1"/></fixed>', "frictionloss"),
    ],
)
def test_bad_tendon_constraints_are_named(tendon, needle):
    xml = ARM.replace("<tendon>", f"<tendon>{tendon}", 1)
    with pytest.raises(physics.MJCFError, match=needle):
        physics.load_mjcf(xml)
