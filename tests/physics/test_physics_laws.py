"""Physics laws: free fall, pendulum period, energy and momentum conservation (no contacts)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import physics
from physics import dynamics

run = jax.jit(physics.step, static_argnames="n_substeps")


def _pendulum(dt, damping=0.0):
    # point-like bob: 1 kg at 0.5 m below a frictionless hinge about y
    return physics.load_mjcf(f"""
<mujoco>
  <option timestep="{dt}" gravity="0 0 -9.81"/>
  <worldbody>
    <body>
      <joint name="hinge" type="hinge" axis="0 1 0" damping="{damping}"/>
      <inertial pos="0 0 -0.5" mass="1" diaginertia="1e-3 1e-3 1e-3"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" gear="1"/></actuator>
</mujoco>""")


def _energy(sys, state):
    kinetic = 0.5 * state.qd @ dynamics.mass_matrix(sys, state.kin) @ state.qd
    potential = -jnp.sum(sys.body_mass * (state.kin.xipos @ sys.gravity))
    return kinetic + potential


def test_free_fall_matches_semi_implicit_euler_exactly():
    sys = physics.load_mjcf("""
<mujoco><option timestep="0.01"/><worldbody>
  <body pos="0 0 10"><freejoint/><geom type="sphere" size="0.1"/></body>
</worldbody></mujoco>""")
    n = 100
    state = run(sys, physics.init(sys), jnp.zeros(0), n_substeps=n)
    g, dt = 9.81, 0.01
    # semi-implicit Euler: v_n = -g n dt, z_n = z_0 - g dt^2 n (n + 1) / 2
    assert float(state.qd[2]) == pytest.approx(-g * n * dt, rel=1e-5)
    assert float(state.q[2]) == pytest.approx(10 - g * dt * dt * n * (n + 1) / 2, rel=1e-5)
    # and that tends to the analytic z0 - g t^2 / 2 as dt -> 0
    assert float(state.q[2]) == pytest.approx(10 - g / 2, abs=g * dt)
    np.testing.assert_allclose(state.q[3:], [1, 0, 0, 0], atol=1e-6)


def test_pendulum_small_angle_period():
    dt = 1e-3
    sys = _pendulum(dt)
    state = physics.init(sys, jnp.array([0.05]))
    traj = jax.jit(
        lambda s: jax.lax.scan(
            lambda s, _: (physics.step(sys, s, jnp.zeros(1)), s.q[0]), s, None, length=4000
        )
    )
    _, angle = traj(state)
    angle = np.asarray(angle)
    up = np.nonzero((angle[:-1] < 0) & (angle[1:] >= 0))[0]
    # linear interpolation of the upward zero crossings
    t = (up + -angle[up] / (angle[up + 1] - angle[up])) * dt
    period = np.mean(np.diff(t))
    inertia, m, g, length = 1 * 0.5**2 + 1e-3, 1.0, 9.81, 0.5
    assert period == pytest.approx(2 * np.pi * np.sqrt(inertia / (m * g * length)), rel=2e-3)


def test_pendulum_energy_drift_below_1e3_over_1000_steps():
    """dt = 0.25 ms, 1 rad swing; drift relative to the swing's energy m g l (1 - cos 1).

    Semi-implicit Euler is symplectic: the energy error oscillates with amplitude O(dt) and does
    not grow (at dt = 1 ms it is 2e-3 of the swing energy).
    """
    sys = _pendulum(2.5e-4)
    state = physics.init(sys, jnp.array([1.0]))
    e0 = _energy(sys, state)
    traj = jax.jit(
        lambda s: jax.lax.scan(
            lambda s, _: (physics.step(sys, s, jnp.zeros(1)), _energy(sys, s)), s, None, length=1000
        )
    )
    _, energy = traj(state)
    scale = 9.81 * 0.5 * (1 - np.cos(1.0))
    assert np.abs(np.asarray(energy) - float(e0)).max() / scale < 1e-3


def test_free_body_conserves_momentum_without_gravity():
    """A tumbling box: linear momentum exactly, angular momentum (about the com) to O(dt).

    (In a floating multi-body system semi-implicit Euler conserves momentum only to O(dt).)
    """
    sys = physics.load_mjcf("""
<mujoco><option timestep="0.001" gravity="0 0 0"/><worldbody>
  <body pos="0 0 1"><freejoint/><geom type="box" size="0.1 0.2 0.4" euler="10 20 30"/></body>
</worldbody></mujoco>""")
    qd = jnp.array([0.3, -0.2, 0.1, 1.0, 2.0, -3.0])
    state = physics.init(sys, qd=qd)

    def momentum(s):
        # spatial momentum of each body at its tree com, summed: (angular about com; linear)
        h = jnp.einsum("bij,bj->bi", s.kin.cinert, s.cvel).sum(0)
        com = physics.center_of_mass(sys, s)
        return jnp.concatenate([h[:3] + jnp.cross(s.kin.subtree_com[1] - com, h[3:]), h[3:]])

    traj = jax.jit(
        lambda s: jax.lax.scan(
            lambda s, _: (physics.step(sys, s, jnp.zeros(0)), momentum(s)), s, None, length=1000
        )
    )
    _, h = traj(state)
    h = np.asarray(h)
    np.testing.assert_allclose(h[:, 3:], np.broadcast_to(h[0, 3:], h[:, 3:].shape), atol=1e-5)
    ang = np.linalg.norm(h[:, :3] - h[0, :3], axis=-1) / np.linalg.norm(h[0, :3])
    assert ang.max() < 3e-3  # explicit gyroscopic term: O(dt) drift (1.7e-3 at dt = 1 ms)
