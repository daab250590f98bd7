"""Branchless rigid-body physics in JAX with MuJoCo semantics (reduced coordinates).

sys = physics.load_mjcf("ant.xml")
state = physics.init(sys)
state = physics.step(sys, state, ctrl, n_substeps=5)

The functions that compute from a System and a State run as one compiled program when called
eagerly and trace inline inside the caller's jit, vmap or grad
(:func:`physics.math.jit_when_eager`; Ant's eager ``init`` took 6 s op by op, 0.8 s so).
"""

import physics.xla_cpu  # noqa: F401  (sets XLA_FLAGS: before any computation)
from physics import contact as _contact
from physics import fluid as _fluid
from physics import kinematics as _kinematics
from physics import step as _step
from physics.contact import ContactState, contact_geoms
from physics.kinematics import Kinematics, forward_kinematics, point_jacobian
from physics.math import jit_when_eager
from physics.mjcf import MJCFError, MJCFWarning, load_mjcf
from physics.step import State
from physics.system import System

init = jit_when_eager(_step.init)
step = jit_when_eager(_step.step, static_argnames="n_substeps")
forward = jit_when_eager(_step.forward)
constraint_force = jit_when_eager(_step.constraint_force)
body_velocity = jit_when_eager(_step.body_velocity)
center_of_mass = jit_when_eager(_step.center_of_mass)
site_frames = jit_when_eager(_kinematics.site_frames)
solve_constraints = jit_when_eager(_contact.solve_constraints)
contact_forces = jit_when_eager(_contact.contact_forces)
external_contact_forces = jit_when_eager(_contact.external_contact_forces)
fluid_force = jit_when_eager(_fluid.fluid_force)

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
