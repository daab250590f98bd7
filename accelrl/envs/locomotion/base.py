"""Shared machinery of the locomotion environments: an MJCF model stepped by `physics`.

Every env owns a model file in `assets/` (package data), loaded once into a `physics.System`.
One env step holds the action for `frame_skip` physics substeps (Gymnasium's frame_skip), so
`dt = frame_skip * timestep`. Actions are the actuators' controls: non-finite entries are
replaced (NaN -> 0, +-inf -> the bound) and everything is clipped to the control range
(`action_space`) before it reaches the physics and the control cost, so any input gives a
finite step. Should the simulation itself diverge, the episode ends as terminated and the
observation and reward are zeroed rather than NaN.

Renderers use `mjcf_xml` (the model text, loadable by MuJoCo itself) and `qpos(state)` (MuJoCo
qpos of an env state, batch axes kept).
"""

from __future__ import annotations

import abc
from importlib import resources
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import physics
from accelrl.envs.base import Environment, TimeStep
from accelrl.envs.spaces import Box

EPISODE_STEPS = 1000


@struct.dataclass
class LocomotionState:
    """The physics state of one world (MuJoCo qpos/qvel and everything derived from them)."""

    pipeline: physics.State


def load_asset(name: str) -> str:
    """Text of the model file `assets/<name>` shipped with this package or, when there is
    none of that name, of the MJCF file at path `name` (a user's own model)."""
    shipped = resources.files(__package__).joinpath("assets", name)
    if shipped.is_file():
        return shipped.read_text()
    if Path(name).is_file():
        return Path(name).read_text()
    raise FileNotFoundError(f"model {name!r} is neither in {__package__}/assets nor a file")


def uniform_noise(key: jax.Array, n: int, scale: float) -> jax.Array:
    """[n] reset noise, uniform in [-scale, scale]."""
    return jax.random.uniform(key, (n,), jnp.float32, -scale, scale)


def ctrl_cost(weight: float, action: jax.Array) -> jax.Array:
    """weight * sum(action^2), the quadratic control cost of every env here."""
    return weight * jnp.sum(jnp.square(action))


def finite(*arrays: jax.Array) -> jax.Array:
    """True when every entry of every array is finite."""
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in arrays]))


class LocomotionEnv(Environment[LocomotionState], abc.ABC):
    """Base of the physics-backed envs; subclasses define the task on top of the model.

    Subclasses implement `_observation(pipeline, action)` and
    `_reward(before, after, action) -> (reward, terminated, metrics)`, and may override
    `_initial_state(key) -> (q, qd)`. `info["metrics"]` holds
    every reward term (Brax's names) after each step and zeros after reset.
    """

    steps_physics = True
    asset: str = ""  # a model file in assets/, or the path of your own MJCF file
    frame_skip: int = 1
    # Contacts solved per substep (physics.load_mjcf's max_contacts): the deepest this many.
    # Exact while no more are active (Ant has at most ~6 of its 25 slots); much faster.
    max_contacts: int | None = 8
    # Newton steps per constraint solve (physics.load_mjcf's newton_steps). These models' soft
    # contacts converge in 4 on nearly every step (tests/physics/test_contacts_vs_mujoco.py
    # checks trajectories against MuJoCo); under full-range random controls about 3 Ant steps
    # in 1000 need 5-6, as MuJoCo's own solver does, and 6 would cost ~20% of the step
    # throughput (docs/design.md). A model with stiffer contacts may need load_mjcf's default (8).
    newton_steps: int = 4

    def __init__(self) -> None:
        self.mjcf_xml: str = load_asset(self.asset)
        self.sys: physics.System = physics.load_mjcf(
            self.mjcf_xml, max_contacts=self.max_contacts, newton_steps=self.newton_steps
        )
        ctrl = np.asarray(self.sys.actuator_ctrlrange, np.float32)
        self._action_space = Box(shape=(self.sys.nu,), low=ctrl[:, 0], high=ctrl[:, 1])
        self.dt = float(self.sys.timestep) * self.frame_skip
        self._observation_space: Box | None = None

    # ------------------------------------------------------------------ task hooks
    def _initial_state(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """qpos and qvel of a new episode: qpos0 and zero velocity, each with uniform noise of
        `self.reset_noise_scale` (Gymnasium's default; envs with other noise override this)."""
        k1, k2 = jax.random.split(key)
        q = self.sys.qpos0 + uniform_noise(k1, self.sys.nq, self.reset_noise_scale)
        return q, uniform_noise(k2, self.sys.nv, self.reset_noise_scale)

    @abc.abstractmethod
    def _observation(self, pipeline: physics.State, action: jax.Array) -> jax.Array:
        """Observation of a physics state reached with `action` (zeros for the reset state)."""

    @abc.abstractmethod
    def _reward(
        self, before: physics.State, after: physics.State, action: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Reward, termination flag and reward terms of one step (`action` already clipped)."""

    # ------------------------------------------------------------------ env API
    def reset(self, key: jax.Array) -> tuple[LocomotionState, TimeStep]:
        q, qd = self._initial_state(key)
        pipeline = physics.init(self.sys, q, qd)
        action = jnp.zeros(self.sys.nu, jnp.float32)
        _, _, metrics = self._reward(pipeline, pipeline, action)
        timestep = TimeStep(
            observation=self._observation(pipeline, action).astype(jnp.float32),
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), bool),
            truncated=jnp.zeros((), bool),
            info={"metrics": jax.tree.map(jnp.zeros_like, metrics)},
        )
        return LocomotionState(pipeline), timestep

    def step(self, state: LocomotionState, action: jax.Array) -> tuple[LocomotionState, TimeStep]:
        action = self.clip_action(action)
        before = state.pipeline
        after = physics.step(self.sys, before, action, self.frame_skip)
        reward, terminated, metrics = self._reward(before, after, action)
        observation = self._observation(after, action)
        ok = finite(after.q, after.qd, observation, reward)
        timestep = TimeStep(
            observation=jnp.where(ok, observation, 0.0).astype(jnp.float32),
            reward=jnp.where(ok, reward, 0.0).astype(jnp.float32),
            terminated=jnp.asarray(terminated, bool) | ~ok,
            truncated=jnp.zeros((), bool),
            info={"metrics": jax.tree.map(lambda m: jnp.where(ok, m, 0.0), metrics)},
        )
        return LocomotionState(after), timestep

    def clip_action(self, action: jax.Array) -> jax.Array:
        """The control applied for `action`: non-finite entries fixed, clipped to the range."""
        low, high = self._action_space.low, self._action_space.high
        if jnp.shape(action) != (self.sys.nu,):
            raise ValueError(
                f"{type(self).__name__} takes actions of shape ({self.sys.nu},), "
                f"got {jnp.shape(action)}"
            )
        action = jnp.asarray(action, jnp.float32)
        action = jnp.nan_to_num(action, nan=0.0, posinf=float(high.max()), neginf=float(low.min()))
        return jnp.clip(action, low, high)

    def qpos(self, state: LocomotionState) -> jax.Array:
        """MuJoCo qpos of an env state ([..., nq]; batch axes kept). For a wrapped stack, pass
        `stack.unwrapped_state(state)`."""
        return state.pipeline.q

    @property
    def observation_space(self) -> Box:
        if self._observation_space is None:  # traced once, after the subclass is set up
            obs = jax.eval_shape(self.reset, jax.random.PRNGKey(0))[1].observation
            self._observation_space = Box(shape=obs.shape)
        return self._observation_space

    @property
    def action_space(self) -> Box:
        return self._action_space

    @property
    def default_max_steps(self) -> int:
        return EPISODE_STEPS
