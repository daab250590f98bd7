"""MuJoCo's noslip post-processor (physics.noslip): its QCQP, and trajectories against MuJoCo."""

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco_parity import drive_alongside

import physics
from physics import noslip

# Pushed sideways by a tilted gravity: a box (4 contacts, condim 3), a ball that can twist
# and roll (condim 6) and a frictionless one (condim 1, as the floor's) on the floor, and a
# hinge whose dry friction holds it against gravity. The main solve runs to 1e-14 and
# MuJoCo's noslip to no tolerance, so both sides sweep the same number of times.
SCENE = """<mujoco><option gravity="3 1 -9.81" cone="{cone}" noslip_iterations="{sweeps}"
    tolerance="1e-14" noslip_tolerance="1e-30"/>
  <worldbody><geom type="plane" size="5 5 .1" condim="1"/>
    <body pos="0 0 .1"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body pos="1 0 .1"><freejoint/><geom type="sphere" size=".1" condim="6"/></body>
    <body pos="2 0 .1"><freejoint/><geom type="sphere" size=".1" condim="1"/></body>
    <body pos="0 2 1"><joint axis="1 0 0" frictionloss="8"/>
      <geom type="capsule" fromto="0 0 0 0 .3 0" size=".05"/></body>
  </worldbody></mujoco>"""


BALL = """<mujoco><option gravity="3 1 -9.81" cone="{cone}" noslip_iterations="{sweeps}"/>
  <worldbody><geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .1"><freejoint/><geom type="sphere" size=".1" condim="3"/></body>
  </worldbody></mujoco>"""


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_noslip_sweeps_follow_mujoco(x64, cone):
    """100 steps against MuJoCo: the same to rounding, and not what the soft contacts alone
    give (the box creeps less)."""
    xml = SCENE.format(cone=cone, sweeps=3)
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    assert sys.noslip_iterations == 3
    d = mujoco.MjData(m)
    state = drive_alongside(sys, m, d, [np.zeros(0)] * 5, 20)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-12)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-12)
    np.testing.assert_allclose(_forces_by_pair(sys, state), _mujoco_forces_by_pair(m, d), atol=1e-9)
    soft = mujoco.MjModel.from_xml_string(SCENE.format(cone=cone, sweeps=0))
    creep = mujoco.MjData(soft)
    mujoco.mj_step(soft, creep, nstep=100)
    assert abs(creep.qpos[0]) > 2 * abs(d.qpos[0]) > 0


def _forces_by_pair(sys, state):
    """[ngeom, ngeom, 3] summed world force of the contacts between each geom pair."""
    out = np.zeros((sys.ngeom, sys.ngeom, 3))
    forces = np.asarray(physics.contact_forces(sys, state))
    for (g1, g2), force in zip(physics.contact_geoms(sys), forces, strict=True):
        out[g1, g2] += force
    return out


def _mujoco_forces_by_pair(m, d):
    out, local = np.zeros((m.ngeom, m.ngeom, 3)), np.zeros(6)
    for i, c in enumerate(d.contact[: d.ncon]):
        mujoco.mj_contactForce(m, d, i, local)
        out[c.geom1, c.geom2] += c.frame.reshape(3, 3).T @ local[:3]
    return out


def test_gradient_through_noslip_is_finite():
    """Through the sweeps of a ball that rolls on the floor."""
    sys = physics.load_mjcf(BALL.format(cone="elliptic", sweeps=2))

    def loss(qd):
        state = physics.step(sys, physics.init(sys, qd=qd), jnp.zeros(0), n_substeps=20)
        return jnp.sum(state.q[:3] ** 2)

    grad = jax.jit(jax.grad(loss))(jnp.full(sys.nv, 0.3))
    assert np.isfinite(np.asarray(grad)).all() and np.abs(np.asarray(grad)).max() > 0


def _brute_force(a, b, d, r):
    """The 2-D QCQP's minimizer: the unconstrained one if inside, else the best of 20k points
    on the ellipse."""
    inside = -np.linalg.solve(a, b)
    if np.sum((inside / d) ** 2) <= r * r:
        return inside
    angle = np.linspace(0, 2 * np.pi, 20_000, endpoint=False)
    x = r * d * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    return x[np.argmin(0.5 * np.einsum("ki,ij,kj->k", x, a, x) + x @ b)]


def test_qcqp_minimizes_within_the_ellipse_and_leaves_missing_directions_out(x64):
    qcqp = jax.jit(noslip.qcqp)
    rng = np.random.default_rng(0)
    for _ in range(10):
        g = rng.normal(size=(2, 2))
        a, b = g @ g.T + 0.1 * np.eye(2), rng.normal(size=2)
        d, r = rng.uniform(0.2, 2.0, 2), rng.uniform(0.05, 1.0)
        expect = _brute_force(a, b, d, r)
        # the same problem among 5 directions, 3 of them missing (a condim-3 contact in a
        # model with rolling friction): coupled to the others, they must stay out
        big = rng.normal(size=(5, 5))
        big = big @ big.T + np.eye(5)
        keep = np.array([0, 3])
        big[np.ix_(keep, keep)] = a
        b5, d5 = rng.normal(size=5), rng.uniform(0.2, 2.0, 5)
        b5[keep], d5[keep] = b, d
        has = np.isin(np.arange(5), keep)
        # where a + la is not positive definite, nothing: tested as MuJoCo does, on the
        # determinant for 2 or 3 directions (1e-12 here), on a Cholesky pivot for more
        for n, scale, fails in [(2, 1e-6, True), (5, 1e-6, False), (5, 1e-11, True)]:
            x, binds = qcqp(scale * jnp.eye(n), jnp.ones(n), jnp.ones(n), 0.1, jnp.ones(n, bool))
            assert (not np.any(np.asarray(x)) and not binds) == fails
        for args, rows in [
            ((a, b, d, r, np.ones(2, bool)), slice(None)),
            ((big, b5, d5, r, has), keep),
        ]:
            x, binds = qcqp(*map(jnp.asarray, args))
            x = np.asarray(x)
            np.testing.assert_allclose(x[rows], expect, atol=2e-3 * r)
            assert not np.any(x[~args[-1]])
            assert bool(binds) == (np.sum((-np.linalg.solve(a, b) / d) ** 2) > r * r)


def test_noslip_options_are_read_and_checked():
    sys = physics.load_mjcf(SCENE.format(cone="pyramidal", sweeps=0))
    assert sys.noslip_iterations == 0
    assert dataclasses.replace(sys, noslip_iterations=2).noslip_iterations == 2
    with pytest.raises(physics.MJCFError, match="noslip_iterations=-1 must be >= 0"):
        physics.load_mjcf(SCENE.format(cone="pyramidal", sweeps=-1))
