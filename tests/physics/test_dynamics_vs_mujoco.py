"""Contact-free dynamics against MuJoCo on random states (float32 engine vs float64 MuJoCo).

Tolerances are relative to the largest reference entry (max|ours - mujoco| / max|mujoco|):
1e-4 for M, qfrc_bias, qacc, body frames; a 100-step trajectory (with the file's integrator,
RK4 for most of gymnasium's models; constraints disabled) stays within 1e-4 (q) and 1e-3 (qd)
absolute.
"""

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from gym_assets import GYM_MODELS, gym_asset

import physics
from physics import dynamics

BALL_XML = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="free" pos="0.1 0.2 1" euler="10 20 30">
      <joint type="free" stiffness="3"/>
      <geom type="box" size="0.1 0.2 0.3"/>
      <body pos="0.2 0 0.1">
        <joint type="ball" pos="0 0 0.05" damping="0.3" armature="0.01" stiffness="1.5"/>
        <geom type="capsule" fromto="0 0 0 0.3 0.1 0" size="0.05"/>
        <body pos="0.3 0.1 0">
          <joint type="hinge" axis="0 1 1" stiffness="2" springref="10"/>
          <joint type="slide" axis="1 0 0"/>
          <geom type="sphere" size="0.07"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def _models(name):
    src = BALL_XML if name == "ball_chain" else gym_asset(name)
    m = (
        mujoco.MjModel.from_xml_string(src)
        if name == "ball_chain"
        else mujoco.MjModel.from_xml_path(src)
    )
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    sys = physics.load_mjcf(src)  # constraints off on both sides
    return dataclasses.replace(sys, disable_contact=True, disable_limit=True), m


def _random_state(m, seed):
    rng = np.random.default_rng(seed)
    q = m.qpos0 + 0.3 * rng.normal(size=m.nq)
    for j in range(m.njnt):
        adr = m.jnt_qposadr[j]
        if m.jnt_type[j] in (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL):
            a = adr + (3 if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE else 0)
            q[a : a + 4] = rng.normal(size=4)
            q[a : a + 4] /= np.linalg.norm(q[a : a + 4])
    return q, rng.normal(size=m.nv), rng.uniform(-1, 1, size=m.nu)


def _rel(ours, ref):
    return float(np.abs(np.asarray(ours) - ref).max() / max(np.abs(ref).max(), 1e-9))


@jax.jit
def _quantities(sys, q, qd, ctrl):
    state = physics.init(sys, q, qd)
    m = dynamics.mass_matrix(sys, state.kin)
    bias = dynamics.bias_force(sys, state.kin, state.cvel, state.qd)
    return state, m, bias, physics.forward(sys, state, ctrl)


@pytest.mark.parametrize("name", GYM_MODELS + ["ball_chain"])
def test_smooth_dynamics_match_mujoco(name):
    sys, m = _models(name)
    d = mujoco.MjData(m)
    for seed in range(3):
        q, qd, ctrl = _random_state(m, seed)
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, qd, ctrl
        mujoco.mj_forward(m, d)
        full_m = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, full_m)
        state, mass, bias, qacc = _quantities(sys, q, qd, ctrl)
        assert _rel(mass, full_m) < 1e-4
        assert _rel(bias, d.qfrc_bias) < 1e-4
        assert _rel(qacc, d.qacc) < 1e-4
        assert _rel(state.xpos, d.xpos) < 1e-4
        assert _rel(state.xmat.reshape(-1, 9), d.xmat) < 1e-4
        assert _rel(state.xipos, d.xipos) < 1e-4
        assert _rel(state.kin.subtree_com[1:], d.subtree_com[1:]) < 1e-4
        assert _rel(state.kin.cdof, d.cdof) < 1e-4
        assert _rel(state.cvel, d.cvel) < 1e-4
        quat = np.asarray(state.xquat)
        np.testing.assert_allclose(np.abs(np.sum(quat * d.xquat, axis=-1)), 1.0, atol=1e-5)
        assert _rel(state.kin.geom_xpos, d.geom_xpos) < 1e-4
        assert _rel(state.kin.geom_xmat.reshape(-1, 9), d.geom_xmat) < 1e-4


@pytest.mark.parametrize("name", GYM_MODELS + ["ball_chain"])
def test_trajectory_matches_mujoco(name):
    sys, m = _models(name)
    d = mujoco.MjData(m)
    q, qd, ctrl = _random_state(m, 7)
    qd *= 0.5
    d.qpos[:], d.qvel[:], d.ctrl[:] = q, qd, ctrl
    state = jax.jit(physics.step, static_argnames="n_substeps")(
        sys, physics.init(sys, q, qd), ctrl, n_substeps=100
    )
    for _ in range(100):
        mujoco.mj_step(m, d)
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=1e-4)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, atol=1e-3, rtol=1e-4)
    assert float(state.time) == pytest.approx(d.time, rel=1e-5)


def test_point_jacobian_matches_mujoco():
    sys, m = _models("ball_chain")
    d = mujoco.MjData(m)
    q, qd, _ = _random_state(m, 3)
    d.qpos[:], d.qvel[:] = q, qd
    mujoco.mj_forward(m, d)
    state = physics.init(sys, q, qd)
    point = np.array([0.3, -0.2, 0.5])
    for body in range(1, m.nbody):
        jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        mujoco.mj_jac(m, d, jacp, jacr, point, body)
        jac = np.asarray(physics.point_jacobian(sys, state.kin, jnp.asarray(point), body))
        np.testing.assert_allclose(jac[:3], jacr, atol=1e-5)
        np.testing.assert_allclose(jac[3:], jacp, atol=1e-5)
    bodies = np.arange(1, m.nbody)
    points = jnp.asarray(np.random.default_rng(0).normal(size=(len(bodies), 3)))
    batched = np.asarray(physics.point_jacobian(sys, state.kin, points, bodies))
    for i, body in enumerate(bodies):
        single = physics.point_jacobian(sys, state.kin, points[i], int(body))
        np.testing.assert_allclose(batched[i], single, atol=1e-6)


def test_ctrl_is_clipped_and_batched_step_matches_single():
    sys = physics.load_mjcf(gym_asset("ant"), max_contacts=8, newton_steps=4)  # as the Ant env
    step = jax.jit(jax.vmap(physics.step, in_axes=(None, 0, 0)))
    # Batch 512: XLA:CPU deadlocked on this call at this size before physics/xla_cpu.py.
    states = jax.jit(jax.vmap(lambda _: physics.init(sys)))(jnp.arange(512))
    ctrl = jnp.stack([jnp.full(8, 0.5), jnp.full(8, 1.0), jnp.full(8, 100.0)])
    out = step(sys, states, jnp.tile(ctrl, (171, 1))[:512])
    np.testing.assert_allclose(out.q[1], out.q[2], atol=1e-6)  # 100 clipped to 1
    single = jax.jit(physics.step)(sys, physics.init(sys), ctrl[0])
    np.testing.assert_allclose(out.q[0], single.q, atol=1e-6)
