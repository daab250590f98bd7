"""Spatial tendons wrapping spheres and cylinders (physics.wrap) against MuJoCo."""

import os
import re

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco_parity import assert_constraint_force_matches, drive_alongside

import physics
from physics import kinematics, tendon, wrap

# Two sites free to go anywhere (three slides each) and a sphere and a tilted cylinder fixed in
# the world; each is wrapped without a side site, with one outside and with one inside.
PLACEMENTS = """
<mujoco>
  <default><geom contype="0" conaffinity="0"/><tendon stiffness="1"/></default>
  <worldbody>
    <geom name="ball" type="sphere" pos="0.1 0 0" size="0.3"/>
    <geom name="drum" type="cylinder" pos="0 0.1 0" euler="20 30 40" size="0.25 0.3"/>
    <site name="out" pos="0.2 -0.6 0.3"/>
    <site name="in_ball" pos="0.15 0.05 0.1"/>
    <site name="in_drum" pos="0.05 0.1 0.2"/>
    <body name="a">
      <joint type="slide" axis="1 0 0"/><joint type="slide" axis="0 1 0"/>
      <joint type="slide" axis="0 0 1"/><geom size="0.01"/><site name="a"/>
    </body>
    <body name="b">
      <joint type="slide" axis="1 0 0"/><joint type="slide" axis="0 1 0"/>
      <joint type="slide" axis="0 0 1"/><geom size="0.01"/><site name="b"/>
    </body>
  </worldbody>
  <tendon>
    <spatial><site site="a"/><geom geom="ball"/><site site="b"/></spatial>
    <spatial><site site="a"/><geom geom="ball" sidesite="out"/><site site="b"/></spatial>
    <spatial><site site="a"/><geom geom="ball" sidesite="in_ball"/><site site="b"/></spatial>
    <spatial><site site="a"/><geom geom="drum"/><site site="b"/></spatial>
    <spatial><site site="a"/><geom geom="drum" sidesite="out"/><site site="b"/></spatial>
    <spatial><site site="a"/><geom geom="drum" sidesite="in_drum"/><site site="b"/></spatial>
  </tendon>
</mujoco>
"""


def _dense_tendon_jacobian(m: mujoco.MjModel, d: mujoco.MjData) -> np.ndarray:
    """MuJoCo's ten_J (stored sparse, its pattern in the model) as [ntendon, nv]."""
    jac = np.zeros((m.ntendon, m.nv))
    for t in range(m.ntendon):
        adr, nnz = m.ten_J_rowadr[t], m.ten_J_rownnz[t]
        jac[t, m.ten_J_colind[adr : adr + nnz]] = d.ten_J[adr : adr + nnz]
    return jac


def test_wrap_paths_match_mujoco_on_random_placements(x64):
    """Lengths, Jacobians and tangent points of every kind of wrap, at 400 random placements
    of the two sites (each kind wraps in 10% to 90% of them)."""
    sys, m = physics.load_mjcf(PLACEMENTS), mujoco.MjModel.from_xml_string(PLACEMENTS)
    d = mujoco.MjData(m)
    segments = [path[1][0] for path in sys.spring_tendons]
    site_a, site_b, _, geom, side = (np.asarray(x) for x in zip(*segments, strict=True))
    cylinder = np.asarray(sys.geom_type)[geom] == physics.system.GEOM_CYLINDER
    inside = np.array([k >= 0 and sys.site_names[k].startswith("in_") for k in side])

    @jax.jit
    @jax.vmap
    def measured(q):
        kin = physics.forward_kinematics(sys, q)
        length, jac = tendon.lengths_and_jacobian(sys, kin, q, sys.spring_tendons)
        pos, _ = kinematics.site_frames(sys, kin)
        path = wrap.wrap(
            pos[site_a], pos[site_b], kin.geom_xpos[geom], kin.geom_xmat[geom],
            sys.geom_size[geom, 0], cylinder, pos[np.maximum(side, 0)], side >= 0,
        )  # fmt: skip
        return length, jac, path

    rng = np.random.default_rng(0)
    qs = rng.uniform(-1, 1, (400, m.nq))
    length, jac, path = jax.device_get(measured(qs))
    wrapped = np.zeros(m.ntendon, int)
    atol = np.where(inside, 2e-5, 1e-6)[:, None]
    for i, q in enumerate(qs):
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        np.testing.assert_allclose(length[i], d.ten_length, atol=1e-9, err_msg=f"placement {i}")
        # (an inside wrap's touch point, where the length is stationary, is MuJoCo's Newton
        # solution to its tolerance: its Jacobian agrees less closely)
        assert (np.abs(jac[i] - _dense_tendon_jacobian(m, d)) < atol).all(), f"placement {i}"
        for t in range(m.ntendon):
            points = d.wrap_xpos.reshape(-1, 3)[d.ten_wrapadr[t] : d.ten_wrapadr[t] + 4]
            mj_wrapped = d.ten_wrapnum[t] == 4  # site, tangent point, tangent point, site
            assert path.wrapped[i, t] == mj_wrapped, f"placement {i}, tendon {t}"
            if mj_wrapped:
                wrapped[t] += 1
                np.testing.assert_allclose(path.tangent[i, t], points[1:3], atol=atol[t, 0] / 2)
    assert (wrapped > 30).all(), wrapped  # every kind of wrap was exercised


# An arm pulled by cables: a biceps from above the shoulder, over the shoulder ball (kept in
# front by a side site), past the elbow drum (outside side site) to the forearm; a triceps
# behind, through the elbow drum (inside side site); a pulley branch; a motor on the biceps.
ARM = """
<mujoco>
  <option timestep="0.002"/>
  <default>
    <joint damping="0.2" armature="0.01"/>
    <site size="0.01"/>
    <geom contype="0" conaffinity="0"/>
  </default>
  <worldbody>
    <site name="top" pos="0.02 0 1.2"/>
    <site name="back" pos="-0.05 0 1.15"/>
    <site name="front" pos="0.2 0 1"/>
    <geom name="shoulder" type="sphere" pos="0 0 1" size="0.06"/>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="ball"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
      <site name="biceps_top" pos="0.05 0 -0.1"/>
      <site name="triceps_top" pos="-0.05 0 -0.1"/>
      <geom name="elbow" type="cylinder" pos="0 0 -0.3" zaxis="0 1 0" size="0.04 0.03"/>
      <site name="elbow_front" pos="0.1 0 -0.3"/>
      <site name="elbow_in" pos="-0.01 0 -0.3"/>
      <body name="fore" pos="0 0 -0.3">
        <joint name="elbow" type="hinge" axis="0 1 0" range="-2.2 0.3"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.025"/>
        <site name="biceps_end" pos="0.04 0 -0.07"/>
        <site name="triceps_end" pos="-0.04 0 -0.05"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <spatial name="biceps" stiffness="30" damping="1" springlength="0.3" range="0.2 0.55">
      <site site="top"/><geom geom="shoulder" sidesite="front"/><site site="biceps_top"/>
      <geom geom="elbow" sidesite="elbow_front"/><site site="biceps_end"/>
    </spatial>
    <spatial name="triceps" frictionloss="0.3" range="0.25 0.6">
      <site site="back"/><geom geom="shoulder"/><site site="triceps_top"/>
      <geom geom="elbow" sidesite="elbow_in"/><site site="triceps_end"/>
      <pulley divisor="2"/>
      <site site="triceps_top"/><geom geom="elbow"/><site site="biceps_end"/>
    </spatial>
  </tendon>
  <actuator>
    <motor tendon="biceps" gear="-1" ctrlrange="0 30"/>
    <motor tendon="triceps" gear="-1" ctrlrange="0 30"/>
  </actuator>
</mujoco>
"""


def _random_state(m: mujoco.MjModel, d: mujoco.MjData, rng: np.random.Generator) -> None:
    d.qpos[:] = m.qpos0 + 0.7 * rng.normal(size=m.nq)
    d.qpos[:4] /= np.linalg.norm(d.qpos[:4])  # the shoulder's quaternion
    d.qvel[:] = rng.normal(size=m.nv)
    d.ctrl[:] = rng.uniform(0, 30, m.nu)
    mujoco.mj_forward(m, d)


def test_wrapping_arm_forces_and_trajectory_match_mujoco():
    sys, m = physics.load_mjcf(ARM), mujoco.MjModel.from_xml_string(ARM)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(3)

    @jax.jit
    def forces(q, qd, ctrl):
        kin = physics.forward_kinematics(sys, q)
        dyn = physics.dynamics
        return dyn.passive_force(sys, kin, q, qd), dyn.actuator_force(sys, kin, q, qd, ctrl)

    kinds = set()
    for _ in range(8):
        _random_state(m, d, rng)
        passive, actuator = forces(d.qpos, d.qvel, d.ctrl)
        np.testing.assert_allclose(passive, d.qfrc_passive, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(actuator, d.qfrc_actuator, rtol=1e-4, atol=1e-4)
        kinds |= assert_constraint_force_matches(sys, d)
    T = mujoco.mjtConstraint
    assert {T.mjCNSTR_LIMIT_TENDON, T.mjCNSTR_FRICTION_TENDON} <= kinds

    mujoco.mj_resetData(m, d)
    controls = [np.array([15 + 15 * np.sin(i / 3), 15 + 15 * np.cos(i / 4)]) for i in range(20)]
    state = drive_alongside(sys, m, d, controls, 10)  # 200 driven steps
    assert (d.ten_wrapnum > 4).all()  # the cables were wrapped at the end
    np.testing.assert_allclose(state.q, d.qpos, atol=2e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=5e-3)


def test_wrapped_length_gradient_is_the_jacobian(x64):
    """MuJoCo's Jacobian holds the tangent points fixed to the geom; for a shortest path that
    is the exact derivative (its length is stationary in them), so reverse-mode autodiff of
    the lengths agrees with it, finite through every wrap."""
    sys = physics.load_mjcf(ARM.replace('type="ball"', 'type="hinge" axis="1 0 0"'))
    paths = sys.spring_tendons + sys.constrained_tendons

    def lengths(q):
        return tendon.lengths_and_jacobian(sys, physics.forward_kinematics(sys, q), q, paths)

    derivative, measured = jax.jit(jax.jacrev(lambda q: lengths(q)[0])), jax.jit(lengths)
    rng = np.random.default_rng(5)
    for _ in range(10):  # (q and qd coincide: hinges only)
        q = jnp.asarray(sys.qpos0) + 0.7 * rng.normal(size=sys.topology.nq)
        np.testing.assert_allclose(derivative(q), measured(q)[1], atol=1e-9)


_MJX_TENDONS = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data", "tendon")


@pytest.mark.parametrize("name", ["tendon", "wrap_sidesite", "pulley_fixed_site_wrap"])
def test_mujocos_own_wrapping_models_match(name, x64):
    """MuJoCo's test models of wrapping with side sites, pulleys and fixed tendons (every
    spatial tendon given a spring, so the System keeps it): lengths and Jacobians."""
    with open(os.path.join(_MJX_TENDONS, f"{name}.xml")) as f:
        xml = re.sub(r"<spatial(?![^>]*stiffness)", '<spatial stiffness="1"', f.read())
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    spatial = [t for t in range(m.ntendon) if m.wrap_type[m.tendon_adr[t]] != 1]

    @jax.jit
    def measured(q):
        kin = physics.forward_kinematics(sys, q)
        return tendon.lengths_and_jacobian(sys, kin, q, sys.spring_tendons)

    rng = np.random.default_rng(0)
    wraps = 0
    for _ in range(50):
        d.qpos[:] = m.qpos0 + rng.normal(size=m.nq)
        mujoco.mj_forward(m, d)
        wraps += int((d.wrap_obj.ravel()[: d.ten_wrapnum.sum()] >= 0).sum())
        length, jac = measured(d.qpos)
        np.testing.assert_allclose(length, d.ten_length[spatial], atol=1e-9)
        np.testing.assert_allclose(jac, _dense_tendon_jacobian(m, d)[spatial], atol=2e-5)
    assert wraps > 50


def test_armature_on_a_wrapping_tendon_is_refused():
    """MuJoCo itself stops there (mj_tendonDot has no derivative of the wrap)."""
    xml = ARM.replace('<spatial name="biceps"', '<spatial name="biceps" armature="0.1"')
    with pytest.raises(physics.MJCFError, match="armature on a tendon that wraps"):
        physics.load_mjcf(xml)
