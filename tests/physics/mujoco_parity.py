"""Parity-test helpers: our constraint forces at a state set from MuJoCo's data, and our
step driven side by side with MuJoCo's."""

import re
from collections.abc import Iterable

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

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


def assert_constraint_force_matches(sys: physics.System, d: mujoco.MjData) -> set[int]:
    """Check our qfrc_constraint at MuJoCo's state d (after mj_forward, under d.ctrl) against
    MuJoCo's, to 2e-4 of its largest entry (or 2e-4); returns the kinds (mjtConstraint) of
    MuJoCo's constraint rows there."""
    expected = d.qfrc_constraint
    got = constraint_force_at(sys, d.qpos, d.qvel, d.ctrl)
    np.testing.assert_allclose(got, expected, atol=2e-4 * max(np.abs(expected).max(), 1))
    return set(d.efc_type.tolist())


_step = jax.jit(physics.step, static_argnames="n_substeps")


def without_contacts(xml: str) -> str:
    """``xml`` with MuJoCo's contact switch off (``<flag contact="disable"/>``), for models
    that test something else: an incidental geom pair (an arm's capsule against its own
    hand's box) is otherwise compiled into every step, and a capsule-box pair alone more than
    doubles a three-joint arm's program."""
    flag = '<option><flag contact="disable"/></option>'
    out, found = re.subn(r"(<mujoco\b[^>]*>)", lambda m: m.group(1) + flag, xml, count=1)
    if not found:
        raise ValueError("no <mujoco> element in the model")
    return out


def drive_alongside(
    sys: physics.System,
    m: mujoco.MjModel,
    d: mujoco.MjData,
    controls: Iterable[np.ndarray],
    substeps: int,
) -> physics.State:
    """From MuJoCo's d as it is (positions, velocities), apply each control for `substeps`
    steps in MuJoCo (d advances in place) and in our engine; returns our final state."""
    state = physics.init(sys, d.qpos, d.qvel)
    for ctrl in controls:
        d.ctrl[:] = ctrl
        mujoco.mj_step(m, d, nstep=substeps)
        state = _step(sys, state, jnp.asarray(ctrl), n_substeps=substeps)
    return state
