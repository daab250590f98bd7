"""Torsional (condim 4) and rolling (condim 6) friction against MuJoCo 4.0, in both cones."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco_parity import drive_alongside

import physics
from physics import dynamics
from physics.step import smooth_force


def _scene(cone: str, condim: int) -> str:
    """A ball (condim as given) and a box (at most 4) on a plane, and a condim-3 capsule: one
    model mixes contacts of every kind."""
    return f"""<mujoco><option cone="{cone}" impratio="2"/><worldbody>
      <geom type="plane" size="2 2 .1" friction=".9 .08 .02"/>
      <body pos="0 0 .1"><freejoint/>
        <geom type="sphere" size=".1" condim="{condim}" friction=".6 .05 .01"/></body>
      <body pos=".5 0 .05"><freejoint/>
        <geom type="box" size=".05 .04 .05" condim="{min(condim, 4)}"/></body>
      <body pos="-.5 0 .05"><freejoint/>
        <geom type="capsule" size=".04" fromto="0 -.1 0 0 .1 0"/></body>
    </worldbody></mujoco>"""


def _resting(m: mujoco.MjModel, d: mujoco.MjData, rng: np.random.Generator) -> None:
    """Bodies touching the plane (slightly in or out) and moving: spinning, rolling, sliding."""
    mujoco.mj_resetData(m, d)
    for body, height in ((0, 0.1), (1, 0.05), (2, 0.04)):
        d.qpos[7 * body + 2] = height - rng.uniform(0.0005, 0.004)
    d.qvel[:] = rng.normal(size=m.nv) * 0.7
    mujoco.mj_forward(m, d)


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_constraint_forces_and_contact_torques_match_mujoco(cone):
    """Random touching states of a model with contacts of condim 6, 4 and 3."""
    condim = 6
    xml = _scene(cone, condim)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(xml)
    rng = np.random.default_rng(condim)
    for _ in range(12):
        _resting(m, d, rng)
        res = _solve(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
        np.testing.assert_allclose(res.qfrc_constraint, d.qfrc_constraint, rtol=1e-4, atol=1e-4)
    # the ball's contact force and torque in its frame (MuJoCo's mj_contactForce), cfrc_ext
    _resting(m, d, rng)
    res = _solve(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
    theirs = np.zeros(6)
    (i,) = [i for i in range(d.ncon) if set(d.contact.geom[i]) == {0, 1}]
    mujoco.mj_contactForce(m, d, i, theirs)
    (slot,) = [k for k, pair in enumerate(physics.contact_geoms(sys)) if set(pair) == {0, 1}]
    ours = np.concatenate([res.contact.force[slot], res.contact.torque[slot]])
    if cone == "elliptic":  # (a pyramid's edge pairs may carry them evenly: no net torque)
        assert np.abs(theirs[3:]).max() > 1e-3  # the friction torques are at work
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    mujoco.mj_rnePostConstraint(m, d)
    np.testing.assert_allclose(res.cfrc_ext, d.cfrc_ext, rtol=1e-4, atol=1e-4)


@jax.jit
def _solve(sys: physics.System, q: jax.Array, qd: jax.Array) -> physics.contact.ConstraintResult:
    state = physics.init(sys, q, qd)
    force = smooth_force(sys, state, jnp.zeros(sys.nu))
    return physics.solve_constraints(sys, state, dynamics.mass_matrix(sys, state.kin), force)


def test_rolling_and_spinning_slow_down_like_mujoco():
    """A ball rolling with rolling friction and a box spinning on its face (torsional
    friction) come to rest along MuJoCo's trajectory (elliptic cones: the pyramid's rows are
    the same Jacobians, checked above)."""
    xml = _scene("elliptic", 6)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    d.qvel[:6] = [0.6, 0, 0, 0, 6.0, 0]  # rolling along x
    d.qvel[6:12] = [0, 0, 0, 0, 0, 8.0]  # spinning about z
    sys = physics.load_mjcf(xml)
    state = drive_alongside(sys, m, d, [np.zeros(0)] * 30, substeps=10)
    np.testing.assert_allclose(state.q, d.qpos, atol=2e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=2e-3)
    assert abs(d.qvel[11]) < 4.0  # the spin has slowed


def test_condim_beyond_six_is_refused():
    xml = _scene("pyramidal", 6).replace('condim="6"', 'condim="5"')
    with pytest.raises(physics.MJCFError, match="condim other than 1, 3, 4 and 6"):
        physics.load_mjcf(xml)


PAIRS = """<mujoco><option cone="{cone}" impratio="1.5"/>
  <default><pair condim="4"/><geom friction=".7 .03 .002"/></default>
  <worldbody><geom name="floor" type="plane" size="2 2 .1"/>
    <body pos="0 0 .1"><freejoint/><geom name="ball" type="sphere" size=".1"/></body>
    <body pos=".5 0 .1"><freejoint/>
      <geom name="ghost" type="sphere" size=".1" contype="0" conaffinity="0"/></body>
    <body pos="-.5 0 .1"><freejoint/><geom name="plain" type="sphere" size=".1"/></body>
  </worldbody>
  <contact>
    <pair geom1="ball" geom2="floor" friction=".3 .4 .05 .01 .02" margin=".005" condim="6"
      solref=".03 1.1" solreffriction=".05 1" solimp=".8 .9 .002"/>
    <pair geom1="floor" geom2="ghost"/>
  </contact></mujoco>"""


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_explicit_pairs_collide_with_their_own_parameters_like_mujoco(cone):
    """<contact><pair>: its condim, friction (5), solref, solreffriction, solimp and margin
    replace the geoms' mix; it collides geoms whatever their contype (the ghost) and replaces
    the geoms' own pair (one contact for the ball, not two); the pair default class applies."""
    xml = PAIRS.format(cone=cone)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(xml)
    assert sys.pair_condim == (6, 4) and len(sys.contact_pairs) == 4  # and ball-plain
    rng = np.random.default_rng(1)
    for _ in range(8):
        mujoco.mj_resetData(m, d)
        for body in range(3):
            d.qpos[7 * body + 2] = 0.1 - rng.uniform(0.0005, 0.004)
        d.qvel[:] = rng.normal(size=m.nv) * 0.7
        mujoco.mj_forward(m, d)
        assert d.ncon == 3
        res = _solve(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
        np.testing.assert_allclose(res.qfrc_constraint, d.qfrc_constraint, rtol=1e-4, atol=1e-4)
    d.qvel[:6] = [0.5, 0, 0, 0, 5.0, 3.0]
    state = drive_alongside(sys, m, d, [np.zeros(0)] * 10, substeps=10)
    np.testing.assert_allclose(state.q, d.qpos, atol=2e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=2e-3)


def test_explicit_pair_errors_name_the_pair():
    for pair, message in [
        ('<pair geom1="ball"/>', "pair needs geom2"),
        ('<pair geom1="ball" geom2="nope"/>', "unknown geom 'nope'"),
        ('<pair geom1="ball" geom2="ball"/>', "two different geoms"),
        ('<pair geom1="ball" geom2="floor" condim="2"/>', "condim=2 must be 1, 3, 4 or 6"),
    ]:
        xml = PAIRS.format(cone="pyramidal")
        xml = xml[: xml.index("<contact>")] + f"<contact>{pair}</contact></mujoco>"
        with pytest.raises(physics.MJCFError, match=message):
            physics.load_mjcf(xml)
