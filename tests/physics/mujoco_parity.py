"""Our constraint forces at a state set from MuJoCo's data, for parity tests."""

import jax

import physics
from physics import dynamics
from physics.step import smooth_force


@jax.jit
def constraint_force_at(
    sys: physics.System, q: jax.Array, qd: jax.Array, ctrl: jax.Array
) -> jax.Array:
    """qfrc_constraint at (q, qd) under ctrl: MuJoCo's d.qfrc_constraint after mj_forward."""
    state = physics.init(sys, q, qd)
    mass = dynamics.mass_matrix(sys, state.kin)
    return physics.constraint_force(sys, state, mass, smooth_force(sys, state, ctrl))
