"""Differentiability: gradients through 100 steps are finite and match finite differences."""

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
    sys = physics.load_mjcf(path, max_contacts=8, newton_steps=4)  # as the Ant env solves it
    loss = _final_loss(sys, 100)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(jnp.full(8, 0.5), sys.qpos0)
    assert all(np.all(np.isfinite(g)) for g in grads)
    assert float(jnp.abs(grads[0]).max()) > 0
