"""Differentiability: gradients through 100 steps are finite and match finite differences."""

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import physics

PENDULUM = """
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <body><joint name="a" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05"/>
      <body pos="0 0 -0.5"><joint name="b" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 -0.3" size="0.04"/></body>
    </body>
  </worldbody>
  <actuator><motor joint="a" gear="2"/><motor joint="b"/></actuator>
</mujoco>"""


def _final_loss(sys, n):
    def loss(ctrl, q0):
        state = physics.step(sys, physics.init(sys, q0), ctrl, n_substeps=n)
        return jnp.sum(jnp.sin(state.q)) + 0.1 * jnp.sum(state.qd)

    return loss


def test_pendulum_gradient_matches_finite_differences():
    sys = physics.load_mjcf(PENDULUM)
    loss = _final_loss(sys, 100)
    ctrl, q0 = jnp.array([0.3, -0.2]), jnp.array([0.4, 0.2])
    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(ctrl, q0)
    f64 = jax.jit(loss)
    eps = 1e-2
    for arg, g in zip((0, 1), grads, strict=True):
        assert np.all(np.isfinite(g))
        for i in range(2):
            args = [ctrl, q0]
            d = jnp.zeros(2).at[i].set(eps)
            hi = f64(*[a + d if k == arg else a for k, a in enumerate(args)])
            lo = f64(*[a - d if k == arg else a for k, a in enumerate(args)])
            fd = (hi - lo) / (2 * eps)
            assert float(g[i]) == pytest.approx(float(fd), rel=2e-2, abs=2e-3)


def test_ant_gradient_is_finite():
    gym = pytest.importorskip("gymnasium")
    path = os.path.join(os.path.dirname(gym.__file__), "envs", "mujoco", "assets", "ant.xml")
    sys = physics.load_mjcf(path, max_contacts=8, newton_steps=4)  # as the Ant env solves it,
    sys = dataclasses.replace(sys, integrator="Euler")  # and integrates it (the XML asks RK4)
    loss = _final_loss(sys, 100)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(jnp.full(8, 0.5), sys.qpos0)
    assert all(np.all(np.isfinite(g)) for g in grads)
    assert float(jnp.abs(grads[0]).max()) > 0


# The constraint solve is differentiated implicitly (at its solution, not through its Newton
# iterations): these check the result against finite differences where the set of active rows
# does not change, so the final state is a smooth function of the inputs.
HINGE = """
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <body><joint name="a" type="hinge" axis="0 1 0" {joint}/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.05" mass="0.1"/></body>
  </worldbody>
  <actuator><motor joint="a"/></actuator>
</mujoco>"""
LIMITED = HINGE.format(joint='range="-30 30" damping="0.2"')
FRICTION = HINGE.format(joint='frictionloss="0.05"')

RESTING = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <body pos="0 0 0.1"><joint name="z" type="slide" axis="0 0 1" damping="1"/>
      <geom type="sphere" size="0.1" mass="1"/></body>
  </worldbody>
  <actuator><motor joint="z"/></actuator>
</mujoco>"""


@pytest.mark.parametrize(
    "xml, ctrl, q0",
    [
        (LIMITED, [-1.0], [-0.53]),  # the limit row holds it the whole time
        (RESTING, [-3.0], [-0.002]),  # the 4 pyramid rows of the contact hold it
        (FRICTION, [0.3], [0.1]),  # friction loss saturated: it slides
    ],
    ids=["joint-limit", "contact", "friction-loss"],
)
def test_gradient_through_constraints_matches_finite_differences(xml, ctrl, q0):
    sys = physics.load_mjcf(xml)
    n = 50

    def loss(ctrl, q0):
        state = physics.step(sys, physics.init(sys, q0), ctrl, n_substeps=n)
        return jnp.sum(state.q) + 0.1 * jnp.sum(state.qd)

    ctrl, q0 = jnp.array(ctrl), jnp.array(q0)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(ctrl, q0)
    f = jax.jit(loss)
    eps = 1e-3
    for k, g in enumerate(grads):
        assert np.all(np.isfinite(g))
        d = jnp.full(1, eps)
        args_hi = [ctrl + d, q0] if k == 0 else [ctrl, q0 + d]
        args_lo = [ctrl - d, q0] if k == 0 else [ctrl, q0 - d]
        fd = (f(*args_hi) - f(*args_lo)) / (2 * eps)
        assert float(g[0]) == pytest.approx(float(fd), rel=3e-2, abs=1e-3), (k, g, fd)
