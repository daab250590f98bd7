"""Equality constraints (connect, weld, joint and tendon couplings; a weld to a moving mocap
body) against MuJoCo."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco_parity import constraint_force_at, drive_alongside, without_contacts

import physics

# A closed chain: a double pendulum whose tip is connected to a free-swinging third link's end
# (a four-bar linkage with the world), a hinge pair coupled by a quadratic polynomial, a slide
# held at an offset by a one-joint equality, and two fixed tendons kept equal, as dm_control's
# manipulator couples its fingers; with friction loss, a joint limit and a ball bouncing on the
# floor, every other kind of constraint row is in the same solve.
SCENE = """
<mujoco>
  <option timestep="0.002"/>
  <default><equality solref="0.01 1"/><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <geom type="plane" size="5 5 0.1" contype="1" conaffinity="1"/>
    <body name="ball" pos="0 -1 0.3">
      <freejoint/><geom size="0.1" contype="1" conaffinity="1"/>
    </body>
    <body name="crank" pos="0 0 1">
      <joint name="crank" type="hinge" axis="0 1 0" damping="0.05" range="-0.6 0.6"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="coupler" pos="0.3 0 0">
        <joint name="coupler" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 -0.3" size="0.03"/>
      </body>
    </body>
    <body name="rocker" pos="0.7 0 0.5">
      <joint name="rocker" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 0.2" size="0.03"/>
    </body>
    <body name="pair" pos="0 1 1">
      <joint name="a" type="hinge" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 0.3 0" size="0.03"/>
      <body pos="0 0.3 0">
        <joint name="b" type="hinge" axis="1 0 0" ref="0.2" frictionloss="0.02"/>
        <geom type="capsule" fromto="0 0 0 0 0.3 0" size="0.03"/>
      </body>
    </body>
    <body name="slider" pos="0 2 1">
      <joint name="s" type="slide" axis="0 0 1"/>
      <geom type="box" size="0.05 0.05 0.05"/>
    </body>
    <body name="fingers" pos="0 3 1">
      <joint name="f1" type="hinge" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 0.2 0" size="0.02"/>
      <body pos="0 0 0.1">
        <joint name="f2" type="hinge" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 0 0.2 0" size="0.02"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t1"><joint joint="f1" coef="1"/></fixed>
    <fixed name="t2"><joint joint="f2" coef="-0.5"/></fixed>
  </tendon>
  <equality>
    <connect body1="coupler" body2="rocker" anchor="0.4 0 -0.3"/>
    <joint joint1="b" joint2="a" polycoef="0.1 -0.8 0.5 0 0" solimp="0.95 0.99 0.001"/>
    <joint joint1="s" polycoef="0.05"/>
    <tendon tendon1="t1" tendon2="t2"/>
    <joint joint1="a" joint2="b" active="false"/>
  </equality>
  <actuator>
    <motor joint="crank" gear="2"/>
    <motor joint="a"/>
    <motor joint="f1"/>
  </actuator>
</mujoco>
"""


def _mujoco(xml=SCENE):
    return mujoco.MjModel.from_xml_string(xml)


def test_constraint_force_matches_mujoco():
    """Rows, impedances (the connect's from its gap norm) and the solve: qfrc_constraint of
    random states against MuJoCo's."""
    sys, m = physics.load_mjcf(SCENE), _mujoco()
    assert len(sys.eq_type) == 4  # the inactive one is left out
    np.testing.assert_allclose(sys.eq_data, m.eq_data[:4, :11], atol=1e-6)  # as compiled
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)

    for _ in range(4):
        d.qpos[:] = m.qpos0 + 0.2 * rng.normal(size=m.nq)
        d.qvel[:] = rng.normal(size=m.nv)
        d.ctrl[:] = rng.uniform(-1, 1, m.nu)
        mujoco.mj_forward(m, d)
        assert (d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY).sum() == 6
        expected = d.qfrc_constraint
        got = constraint_force_at(sys, d.qpos, d.qvel, d.ctrl)
        np.testing.assert_allclose(got, expected, atol=2e-4 * np.abs(expected).max())


def test_trajectory_matches_mujoco():
    sys, m = physics.load_mjcf(SCENE), _mujoco()
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    controls = [rng.uniform(-1, 1, m.nu) for _ in range(20)]
    state = drive_alongside(sys, m, d, controls, 10)  # 200 steps of 2 ms
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)
    # the constraints hold: the linkage stays closed, the slide sits at its offset
    kin, coupler, rocker = state.kin, sys.body_id("coupler"), sys.body_id("rocker")
    tip = kin.xpos[coupler] + kin.xmat[coupler] @ jnp.array([0.4, 0.0, -0.3])
    rocker_end = kin.xpos[rocker] + kin.xmat[rocker] @ sys.eq_data[0, 3:6]
    assert float(jnp.linalg.norm(tip - rocker_end)) < 2e-3
    assert float(state.q[sys.topology.jnt_qposadr[sys.joint_id("s")]]) == pytest.approx(
        0.05, abs=2e-3
    )


def test_equality_flag_turns_them_off():
    off = SCENE.replace(
        '<option timestep="0.002"/>', '<option timestep="0.002"><flag equality="disable"/></option>'
    )
    sys = physics.load_mjcf(off)
    state = jax.jit(physics.step, static_argnames="n_substeps")(
        sys, physics.init(sys), jnp.zeros(3), n_substeps=100
    )
    m = _mujoco(off)
    d = mujoco.MjData(m)
    mujoco.mj_step(m, d, nstep=100)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    assert float(state.q[sys.topology.jnt_qposadr[sys.joint_id("s")]]) < -0.1  # free fall


@pytest.mark.parametrize(
    "equality, needle",
    [
        ('<flex flex="x"/>', "unsupported equality constraint <flex>"),
        ('<connect site1="x" site2="y"/>', "unknown site 'x'"),
        ('<weld site1="x"/>', "weld by sites needs site2"),
        ('<connect site1="x" body1="pair" anchor="0 0 0"/>', "not both"),
        ('<connect body1="pair"/>', "connect needs anchor"),
        ('<connect body1="nope" anchor="0 0 0"/>', "unknown body 'nope'"),
        ('<joint joint1="nope"/>', "unknown joint 'nope'"),
        ('<joint joint2="a"/>', "needs joint1"),
        ('<tendon tendon1="nope"/>', "unknown tendon 'nope'"),
        ('<joint joint1="a" polycoef="1 2 3 4 5 6"/>', "polycoef"),
    ],
)
def test_unsupported_or_malformed_equalities_are_named(equality, needle):
    xml = SCENE.replace("<equality>", f"<equality>{equality}", 1)
    with pytest.raises(physics.MJCFError, match=needle):
        physics.load_mjcf(xml)


def test_ball_joint_coupling_is_refused():
    xml = """<mujoco><worldbody><body><joint name="ball" type="ball"/><geom size="0.1"/></body>
    </worldbody><equality><joint joint1="ball"/></equality></mujoco>"""
    with pytest.raises(physics.MJCFError, match="'ball' must be hinge or slide"):
        physics.load_mjcf(xml)


def test_gradient_through_a_closed_chain_is_finite():
    sys = physics.load_mjcf(SCENE)

    def loss(ctrl):
        state = physics.step(sys, physics.init(sys), ctrl, n_substeps=50)
        return jnp.sum(jnp.sin(state.q)) + 0.1 * jnp.sum(state.qd)

    grad = jax.jit(jax.grad(loss))(jnp.array([0.5, -0.3, 0.2]))
    assert np.all(np.isfinite(grad)) and float(jnp.abs(grad).max()) > 0


# Welds: two free bodies welded to each other (anchor on body2, torque scale 2), and an arm on
# a ball joint welded to the world through an explicit relpose; wide solimp widths so the
# impedance follows each weld's whole 6-vector violation.
WELDS = without_contacts(
    """
<mujoco>
  <option gravity="0 0 -9.81"/>
  <default><equality solimp="0.5 0.95 0.5"/></default>
  <worldbody>
    <body name="a" pos="0 0 1" euler="10 20 30"><freejoint/>
      <geom type="box" size="0.1 0.2 0.05"/></body>
    <body name="b" pos="0.3 0.1 1.2" euler="-20 5 40"><freejoint/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/></body>
    <body name="arm" pos="0 1 1"><joint type="ball"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/></body>
  </worldbody>
  <equality>
    <weld body1="a" body2="b" anchor="0.1 0.05 0" torquescale="2"/>
    <weld body1="arm" relpose="0.3 -0.1 0.2 0.9 0.1 0.3 0.2" anchor="0.1 0 0"/>
  </equality>
</mujoco>
"""
)


def _free_motion_matches_mujoco(
    sys: physics.System, m: mujoco.MjModel, quats: tuple[int, ...], seed: int
) -> None:
    """Constraint forces at random states (quaternions at qpos addresses `quats`), then 200
    steps from qpos0 without control, against MuJoCo."""
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    for _ in range(4):
        q = m.qpos0 + 0.2 * rng.normal(size=m.nq)
        for adr in quats:
            q[adr : adr + 4] /= np.linalg.norm(q[adr : adr + 4])
        d.qpos[:], d.qvel[:] = q, rng.normal(size=m.nv)
        mujoco.mj_forward(m, d)
        expected = d.qfrc_constraint
        np.testing.assert_allclose(
            constraint_force_at(sys, d.qpos, d.qvel, np.zeros(0)),
            expected,
            atol=2e-4 * np.abs(expected).max(),
        )
    d = mujoco.MjData(m)
    state = jax.jit(physics.step, static_argnames="n_substeps")(
        sys, physics.init(sys), jnp.zeros(0), n_substeps=200
    )
    mujoco.mj_step(m, d, nstep=200)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)


def test_welds_match_mujoco():
    """Falling and swinging welded bodies."""
    sys, m = physics.load_mjcf(WELDS), _mujoco(WELDS)
    np.testing.assert_allclose(sys.eq_data, m.eq_data[:, :11], atol=1e-6)  # as compiled
    _free_motion_matches_mujoco(sys, m, (3, 10, 14), seed=2)


# Welds and a connect between sites: a free box welded to a free capsule by two rotated
# sites, a pendulum whose tip site is held to a site in the world, and an arm on a ball joint
# whose site frame is welded to a world site.
SITE_WELDS = without_contacts(
    """
<mujoco>
  <default><equality solimp="0.5 0.95 0.5"/></default>
  <worldbody>
    <site name="w1" pos="0.5 -1 1.4"/>
    <site name="w2" pos="0 1.2 0.9" euler="30 0 10"/>
    <body name="a" pos="0 0 1" euler="10 20 30"><freejoint/>
      <geom type="box" size="0.1 0.2 0.05"/>
      <site name="a" pos="0.1 0.05 0" euler="0 40 -20"/></body>
    <body name="b" pos="0.3 0.1 1.2" euler="-20 5 40"><freejoint/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
      <site name="b" pos="0.05 0 0.02" quat="0.9 0.3 0.1 0.2"/></body>
    <body name="pendulum" pos="0.5 -1 2"><joint type="hinge" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 0.4 -0.4" size="0.03"/>
      <site name="tip" pos="0 0.4 -0.4"/></body>
    <body name="arm" pos="0 1 1"><joint type="ball"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
      <site name="hand" pos="0.4 0 0" euler="0 -20 0"/></body>
  </worldbody>
  <equality>
    <weld site1="a" site2="b" torquescale="2"/>
    <connect site1="tip" site2="w1"/>
    <weld site1="hand" site2="w2"/>
  </equality>
</mujoco>
"""
)


def test_site_welds_and_connects_match_mujoco():
    """Sites pulled together from where they start."""
    sys, m = physics.load_mjcf(SITE_WELDS), _mujoco(SITE_WELDS)
    _free_motion_matches_mujoco(sys, m, (3, 10, 15), seed=3)


MOCAP = """<mujoco><option timestep="0.002"/><worldbody>
  <geom type="plane" size="2 2 .1"/>
  <body name="target" mocap="true" pos="0 0 .6" euler="0 20 0">
    <geom type="box" size=".05 .05 .05" contype="0" conaffinity="0"/></body>
  <body name="hand" pos="0 0 .6"><freejoint/><geom type="box" size=".05 .08 .03"/></body>
  <body name="marker" mocap="true" pos=".3 .2 .02"><geom size=".05"/></body>
</worldbody>
<equality><weld body1="hand" body2="target" solref=".02 1"/></equality></mujoco>"""


def test_a_weld_to_a_moving_mocap_body_drags_like_mujocos():
    """Mocap bodies sit where the world frame says and move with System.with_mocap, as
    MuJoCo's mocap_pos/mocap_quat; a weld to one drags its partner along. A mocap geom
    resting in the floor makes no contact (neither side has dofs)."""
    sys, m = physics.load_mjcf(MOCAP), mujoco.MjModel.from_xml_string(MOCAP)
    assert sys.mocap_bodies == (sys.body_id("target"), sys.body_id("marker"))
    d = mujoco.MjData(m)
    step = jax.jit(physics.step, static_argnames="n_substeps")
    state = physics.init(sys)
    moved = sys
    for k in range(20):
        pos = np.array([[0.2 * np.sin(k / 4), 0.1 * k / 20, 0.6], [0.3, 0.2, 0.02]])
        quat = np.array([[1.0, 0.1 * k / 20, 0.0, 0.2], [1.0, 0.0, 0.0, 0.0]])
        d.mocap_pos[:], d.mocap_quat[:] = pos, quat / np.linalg.norm(quat, axis=1, keepdims=True)
        mujoco.mj_step(m, d, nstep=10)
        moved = sys.with_mocap(pos, quat)
        state = step(moved, state, jnp.zeros(0), n_substeps=10)
    assert np.abs(d.qpos[:3] - [0, 0, 0.6]).max() > 0.05, "the hand should have been dragged"
    np.testing.assert_allclose(state.q, d.qpos, atol=2e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=2e-3)
    assert d.ncon == 0 and not np.asarray(state.contact.dist < 0).any()
    np.testing.assert_allclose(moved.body_pos[sys.mocap_bodies[0]], pos[0], atol=1e-6)
    with pytest.raises(ValueError, match=r"mocap pos must be \[2, 3\]"):
        sys.with_mocap(pos[:1])


@pytest.mark.parametrize(
    "body, needle",
    [
        ('<body mocap="true"><joint/><geom size=".1"/></body>', "cannot have joints"),
        ('<body><joint/><geom size=".1"/><body mocap="true"/></body>', "child of the world"),
        ('<body mocap="yes"><geom size=".1"/></body>', "must be true or false"),
    ],
)
def test_malformed_mocap_bodies_are_named(body, needle):
    with pytest.raises(physics.MJCFError, match=needle):
        physics.load_mjcf(f"<mujoco><worldbody>{body}</worldbody></mujoco>")
