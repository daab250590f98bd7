"""Joint friction loss (dry friction, MuJoCo's frictionloss rows) against MuJoCo: the
constraint force at states where rows stick and slip, a trajectory, and the disable flag."""

import jax
import mujoco
import numpy as np

import physics
from physics import contact, dynamics
from physics.step import smooth_force

FRICTION_XML = """
<mujoco>
  <option timestep="0.005"><flag {flags}/></option>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body pos="0 0 1">
      <joint name="h0" type="hinge" axis="0 1 0" frictionloss="0.8" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.05"/>
      <body pos="0.4 0 0">
        <joint name="h1" type="hinge" axis="0 1 0" frictionloss="0.2" solreffriction="0.05 1"
               solimpfriction="0.8 0.9"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
        <body pos="0.3 0 0">
          <joint name="s2" type="slide" axis="1 0 0" frictionloss="1.5" range="-0.1 0.1"/>
          <geom type="box" size="0.05 0.05 0.05"/>
        </body>
      </body>
    </body>
    <body pos="1 0 1">
      <joint name="b3" type="ball" frictionloss="2"/>
      <geom type="capsule" fromto="0 0 0 0.2 0.1 0" size="0.03"/>
    </body>
  </worldbody>
  <actuator><motor joint="h0" gear="3"/><motor joint="s2"/></actuator>
</mujoco>
"""
CTRL = np.array([0.4, -0.5], np.float32)


def test_friction_loss_forces_and_trajectory_match_mujoco():
    xml = FRICTION_XML.format(flags='energy="disable"')
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    np.testing.assert_allclose(sys.dof_frictionloss, m.dof_frictionloss)
    np.testing.assert_allclose(sys.dof_solref, m.dof_solref, rtol=1e-6)
    np.testing.assert_allclose(sys.dof_solimp, m.dof_solimp, rtol=1e-6)
    d = mujoco.MjData(m)

    @jax.jit
    def qfrc_constraint(q, qd):
        state = physics.init(sys, q, qd)
        mass = dynamics.mass_matrix(sys, state.kin)
        return contact.solve_constraints(sys, state, mass, smooth_force(sys, state, CTRL))

    rng = np.random.default_rng(0)
    states = set()
    for scale in (0.02, 0.3, 3.0):  # slow (rows stick: quadratic) to fast (they slip: linear)
        for _ in range(3):
            d.qpos[:] = m.qpos0 + rng.normal(size=m.nq) * 0.5
            d.qpos[3:7] /= np.linalg.norm(d.qpos[3:7])
            d.qvel[:], d.ctrl[:] = scale * rng.normal(size=m.nv), CTRL
            mujoco.mj_forward(m, d)
            states.update(d.efc_state[d.efc_type == mujoco.mjtConstraint.mjCNSTR_FRICTION_DOF])
            res = qfrc_constraint(np.float32(d.qpos), np.float32(d.qvel))
            np.testing.assert_allclose(res.qfrc_constraint, d.qfrc_constraint, rtol=1e-3, atol=1e-3)
    quadratic, below, above = (
        mujoco.mjtConstraintState.mjCNSTRSTATE_QUADRATIC,
        mujoco.mjtConstraintState.mjCNSTRSTATE_LINEARNEG,
        mujoco.mjtConstraintState.mjCNSTRSTATE_LINEARPOS,
    )
    assert {int(quadratic), int(below), int(above)} <= {int(s) for s in states}

    # 120 steps from a spin: the joints slow down, stick and slip again as MuJoCo's do
    mujoco.mj_resetData(m, d)
    d.qvel[:], d.ctrl[:] = [1.0, -2.0, 0.3, 0.5, -1.0, 2.0], CTRL
    state = jax.jit(physics.step, static_argnames="n_substeps")(
        sys, physics.init(sys, qd=np.float32(d.qvel)), CTRL, n_substeps=120
    )
    for _ in range(120):
        mujoco.mj_step(m, d)
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=1e-4)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, atol=1e-3)


def test_friction_loss_holds_a_pendulum_that_gravity_cannot_turn():
    # a horizontal rod: gravity's torque about the hinge (m g l/2 = 0.61 N m) is below the
    # friction loss, so it stays (creeping by the soft constraint only); with less it falls
    xml = """
    <mujoco><worldbody><body pos="0 0 1">
      <joint type="hinge" axis="0 1 0" frictionloss="{f}"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.02" mass="0.25"/>
    </body></worldbody></mujoco>"""
    step = jax.jit(physics.step, static_argnames="n_substeps")
    held = physics.load_mjcf(xml.format(f=1.0))
    falls = physics.load_mjcf(xml.format(f=0.3))
    assert abs(float(step(held, physics.init(held), np.zeros(0), n_substeps=200).q[0])) < 0.02
    assert abs(float(step(falls, physics.init(falls), np.zeros(0), n_substeps=200).q[0])) > 0.5


def test_disable_flag_removes_friction_loss():
    xml = FRICTION_XML.format(flags='frictionloss="disable"')
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    assert not (d.efc_type == mujoco.mjtConstraint.mjCNSTR_FRICTION_DOF).any()
    assert sys.disable_frictionloss and contact._layout(sys).nfric == 0
    assert contact._layout(physics.load_mjcf(FRICTION_XML.format(flags=""))).nfric == 6
