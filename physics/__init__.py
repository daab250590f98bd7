"""Branchless rigid-body physics in JAX with MuJoCo semantics (reduced coordinates).

sys = physics.load_mjcf("ant.xml")
state = physics.init(sys)
state = jax.jit(physics.step, static_argnames="n_substeps")(sys, state, ctrl, n_substeps=5)
"""

import physics.xla_cpu  # noqa: F401  (first: sets XLA_FLAGS before any computation)
from physics.contact import (
    ContactState,
    contact_forces,
    contact_geoms,
    external_contact_forces,
    solve_constraints,
)
from physics.fluid import fluid_force
from physics.kinematics import Kinematics, forward_kinematics, point_jacobian, site_frames
from physics.mjcf import MJCFError, MJCFWarning, load_mjcf
from physics.step import (
    State,
    body_velocity,
    center_of_mass,
    constraint_force,
    forward,
    init,
    step,
)
from physics.system import System

__all__ = [
    "ContactState",
    "contact_forces",
    "contact_geoms",
    "external_contact_forces",
    "solve_constraints",
    "Kinematics",
    "MJCFError",
    "MJCFWarning",
    "State",
    "System",
    "body_velocity",
    "center_of_mass",
    "constraint_force",
    "forward",
    "fluid_force",
    "forward_kinematics",
    "init",
    "load_mjcf",
    "point_jacobian",
    "site_frames",
    "step",
]
