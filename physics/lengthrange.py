"""Muscle constants computed when a model is built: each actuator's acceleration per unit
force at qpos0 (MuJoCo's actuator_acc0) and the range of lengths a muscle reaches (MuJoCo's
actuator_lengthrange, from its compiler's simulation, mj_setLengthRange).

The length range is found as MuJoCo finds it: from qpos0 at rest, the actuator alone pulls,
then pushes, with the force that gives the model a fixed acceleration (`accel`) along its
moment arms, while the velocity decays with a time constant; contacts, gravity, springs,
dampers, friction loss and the other actuators are off, joint and tendon limits and
equalities stay. The shortest length over the last `interval` seconds of pulling and the
longest of pushing are the range. Every (actuator, direction) pair simulates in one batch.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from physics import dynamics, kinematics, linalg, step
from physics.system import System

MINVAL = 1e-15  # MuJoCo's mjMINVAL


@dataclasses.dataclass(frozen=True)
class LengthRangeOptions:
    """MuJoCo's <compiler><lengthrange> attributes (mjLROpt), with its defaults."""

    mode: str = "muscle"  # which actuators get one: none, muscle, muscleuser, all
    useexisting: bool = True  # keep a range the actuator gives (lo < hi)
    uselimit: bool = False  # take a limited joint's or tendon's range instead of simulating
    accel: float = 20.0  # the acceleration the pulling force gives the model
    maxforce: float = 0.0  # a bound on that force's norm (0: none)
    timeconst: float = 1.0  # the velocity's decay time constant
    timestep: float = 0.01  # the simulation's timestep (0: the model's)
    inttotal: float = 10.0  # seconds simulated in each direction
    interval: float = 2.0  # the last seconds measured
    tolrange: float = 0.05  # allowed spread over them, relative to the range


class LengthRangeError(ValueError):
    """The simulation did not settle (MuJoCo's compiler fails the same way)."""


def moments_and_inverse_mass(sys: System) -> tuple[np.ndarray, np.ndarray]:
    """(actuators' moment arms [nu, nv], gear included; M^-1 [nv, nv]) at qpos0 in float64,
    M inverted as MuJoCo's compiler does (linalg.inverse_like_mujoco)."""
    kin = kinematics.forward_kinematics(sys, sys.qpos0)
    mass = np.asarray(dynamics.mass_matrix(sys, kin), np.float64)
    _, moment = dynamics.actuator_moments(sys, kin, sys.qpos0)
    moment = np.asarray(moment, np.float64) * np.asarray(sys.actuator_gear, np.float64)[:, None]
    return moment, linalg.inverse_like_mujoco(mass)[0]


def unit_force_acceleration(sys: System) -> np.ndarray:
    """[nu] |M^-1 moment| at qpos0 for each actuator (gear included): MuJoCo's actuator_acc0,
    by which a muscle of force < 0 gets its peak force, scale / acc0."""
    moment, minv = moments_and_inverse_mass(sys)
    return np.linalg.norm(minv @ moment.T, axis=0)


def _pulling_system(sys: System, timestep: float) -> System:
    """`sys` as MuJoCo's length-range simulation runs it: contacts, gravity, springs, dampers,
    friction loss and actuation off; each actuator a unit-gain motor on its transmission,
    which the simulation drives one at a time."""
    nu = sys.nu
    dtype = sys.body_mass.dtype
    return dataclasses.replace(
        sys,
        timestep=jnp.asarray(timestep, dtype) if timestep > 0 else sys.timestep,
        gravity=jnp.zeros_like(sys.gravity),
        disable_contact=True,
        disable_frictionloss=True,
        jnt_stiffness=jnp.zeros_like(sys.jnt_stiffness),
        dof_damping=jnp.zeros_like(sys.dof_damping),
        tendon_stiffness=jnp.zeros_like(sys.tendon_stiffness),
        tendon_damping=jnp.zeros_like(sys.tendon_damping),
        actuator_gain=jnp.zeros((nu, 3), dtype).at[:, 0].set(1.0),
        actuator_bias=jnp.zeros((nu, 3), dtype),
        actuator_ctrlrange=jnp.tile(jnp.asarray([-jnp.inf, jnp.inf], dtype), (nu, 1)),
        actuator_forcerange=jnp.tile(jnp.asarray([-jnp.inf, jnp.inf], dtype), (nu, 1)),
        actuator_dyntype=(0,) * nu,
        actuator_actearly=(False,) * nu,
        actuator_muscle_gain=(),
        actuator_muscle_bias=(),
        tendon_actuator_force_limits=(),
        jnt_actfrclimited=(False,) * len(sys.jnt_actfrclimited),
        disable_actuation=False,
    )


def _measured_steps(options: LengthRangeOptions, timestep: float) -> np.ndarray:
    """Per step of MuJoCo's `while (time < inttotal)` loop, whether the length measured in it
    counts (time after the step within the last interval): its float64 time, reproduced."""
    counted, time = [], 0.0
    while time < options.inttotal:
        time += timestep
        counted.append(time > options.inttotal - options.interval)
    return np.asarray(counted)


@jax.jit
def _extremes(
    pulling: System,
    actuator: jax.Array,
    direction: jax.Array,
    measured: jax.Array,
    accel: jax.Array,
    maxforce: jax.Array,
    decay: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """(min, max) of each actuator's length over the measured steps while it pulls
    (direction -1) or pushes (+1) `pulling` (a `_pulling_system`) with acceleration `accel`,
    its force bounded by `maxforce` (0: unbounded), the velocity scaled by `decay` each step;
    batched over `actuator` and `direction`, compiled once per model structure."""
    gear = pulling.actuator_gear

    def simulate(actuator: jax.Array, direction: jax.Array) -> tuple[jax.Array, jax.Array]:
        def one_step(state: step.State, counted: jax.Array) -> tuple[step.State, tuple]:
            qd = decay * state.qd
            state = state._replace(qd=qd, cvel=kinematics.com_velocity(pulling, state.kin.cdof, qd))
            length, moment = dynamics.actuator_moments(pulling, state.kin, state.q)
            row = gear[actuator] * moment[actuator]
            mass = dynamics.mass_matrix(pulling, state.kin)
            pull = (
                direction
                * accel
                / jnp.maximum(MINVAL, jnp.linalg.norm(jnp.linalg.solve(mass, row)))
            )
            norm = jnp.abs(pull) * jnp.linalg.norm(row)
            bound = jnp.where(maxforce > 0, maxforce / jnp.maximum(MINVAL, norm), 1.0)
            pull = pull * jnp.minimum(1.0, bound)
            ctrl = jnp.zeros(pulling.nu, qd.dtype).at[actuator].set(pull)
            now = gear[actuator] * length[actuator]
            return step.step(pulling, state, ctrl), (now, counted)

        _, (lengths, counted) = jax.lax.scan(one_step, step.init(pulling), measured)
        inf = jnp.asarray(jnp.inf, lengths.dtype)
        return jnp.min(jnp.where(counted, lengths, inf)), jnp.max(jnp.where(counted, lengths, -inf))

    return jax.vmap(simulate)(actuator, direction)


def lengthranges(sys: System, actuators: list[int], options: LengthRangeOptions) -> np.ndarray:
    """[len(actuators), 2] the length ranges of `actuators` by MuJoCo's simulation (see the
    module's docstring); raises LengthRangeError where it does not settle."""
    pulling = _pulling_system(sys, options.timestep)
    which = np.repeat(np.asarray(actuators, np.int32), 2)
    direction = np.tile(np.asarray([-1.0, 1.0]), len(actuators))
    dt = float(pulling.timestep)
    measured = jnp.asarray(_measured_steps(options, dt))
    decay = np.exp(-dt / max(0.01, options.timeconst))
    low, high = _extremes(
        pulling, which, direction, measured, options.accel, options.maxforce, decay
    )
    low, high = (
        np.asarray(low, np.float64).reshape(-1, 2),
        np.asarray(high, np.float64).reshape(-1, 2),
    )
    ranges = np.stack([low[:, 0], high[:, 1]], axis=-1)
    for k, actuator in enumerate(actuators):
        lo, hi = ranges[k]
        if not np.isfinite([low[k], high[k]]).all():
            raise LengthRangeError(f"unstable length-range simulation of actuator {actuator}")
        if not hi > lo:
            raise LengthRangeError(f"invalid length range ({lo:g}, {hi:g}) of actuator {actuator}")
        for side, name in ((0, "pulling"), (1, "pushing")):
            spread = high[k, side] - low[k, side]
            if spread > options.tolrange * (hi - lo):
                raise LengthRangeError(
                    f"the length-range simulation of actuator {actuator} did not settle "
                    f"{name}: its length still spans ({low[k, side]:g}, {high[k, side]:g}) "
                    f"over the last {options.interval:g} s, range ({lo:g}, {hi:g}) (limit the "
                    "joints or tendons it moves, or give the actuator a lengthrange)"
                )
    return ranges
