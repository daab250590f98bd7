"""Brax environments under accelrl's env API: `env.name=brax:ant`, or `brax:my_envs:MyEnv`.

A Brax env (`brax.envs.Env`: `reset(rng) -> State`, `step(State, action) -> State`) is
functional already, so the Brax `State` is our env state as it is. What Brax leaves to its
training wrappers is done by ours: the episode limit (TimeLimit at Brax's training default of
1000 steps, reported as `truncated`) and the reset at episode end (AutoReset). Brax's `done`
is the env's own end (`terminated`). Actions are Brax's [-1, 1] box; Brax envs do not clip,
so the agent's bounded actions keep them inside.

`brax:NAME` is `brax.envs.get_environment(NAME, **kwargs)` (e.g. `backend="positional"`);
`brax:module:Attribute` is a Brax Env class or factory of the user's own, called with the
kwargs. brax is optional (`pip install 'accelrl[brax]'`), imported only when such a name is
made.

A Brax env built on a System (Brax's `PipelineEnv`, every env Brax registers) renders like the
locomotion envs (`accelrl eval --render`): its System keeps the `mujoco.MjModel` it was built
from (`mj_model`) and every Brax pipeline state has MuJoCo's qpos as `q`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from accelrl.entry_points import load_entry_point
from accelrl.envs.base import Environment, TimeStep, first_timestep
from accelrl.envs.spaces import Box

PREFIX = "brax:"
EPISODE_LENGTH = 1000
"""Brax's training default `episode_length`: the limit when the config sets none."""


class BraxEnv(Environment[Any]):
    """The Brax env `name` (registered with brax, or `module:Attribute`), made with `kwargs`;
    or `BraxEnv(env=...)` around a Brax Env instance."""

    def __init__(self, name: str = "", env: Any = None, **kwargs: Any) -> None:
        self.name = name or type(env).__name__
        self.env = _make(name, kwargs) if env is None else env
        # traced, not run: Brax's `observation_size` runs a reset op by op (15 s on a CPU)
        obs = jax.eval_shape(self.env.reset, jax.random.PRNGKey(0)).obs
        if not isinstance(obs, jax.ShapeDtypeStruct):
            raise ValueError(
                f"{PREFIX}{self.name}: observations of structure {jax.tree.structure(obs)}: "
                "only array observations are supported (not dicts)"
            )
        self._observation_space = Box(tuple(obs.shape))
        self._action_space = Box((int(self.env.action_size),), -1.0, 1.0)

    def reset(self, key: jax.Array) -> tuple[Any, TimeStep]:
        state = self.env.reset(key)
        return state, first_timestep(state.obs)

    def step(self, state: Any, action: jax.Array) -> tuple[Any, TimeStep]:
        state = self.env.step(state, action)
        timestep = TimeStep(
            observation=state.obs,
            reward=jnp.asarray(state.reward, jnp.float32),
            terminated=state.done > 0.5,
            truncated=jnp.zeros((), bool),
        )
        return state, timestep

    # ------------------------------------------------------------------ rendering
    @property
    def mj_model(self) -> Any:
        """The MuJoCo model of the env's Brax System (None for an env without one)."""
        return getattr(getattr(self.env, "sys", None), "mj_model", None)

    @property
    def dt(self) -> float:
        """Seconds per env step."""
        return float(self.env.dt)

    def qpos(self, state: Any) -> jax.Array:
        """MuJoCo qpos of an env state (its pipeline state's `q`)."""
        return state.pipeline_state.q

    @property
    def observation_space(self) -> Box:
        return self._observation_space

    @property
    def action_space(self) -> Box:
        return self._action_space

    @property
    def default_max_steps(self) -> int:
        return EPISODE_LENGTH


def _make(name: str, kwargs: dict[str, Any]) -> Any:
    try:
        from brax import envs
    except ImportError as error:
        raise ValueError(
            f"environment {PREFIX}{name} needs brax, which is not installed: "
            f"pip install 'accelrl[brax]' ({error})"
        ) from None
    known = sorted(getattr(envs, "_envs", {}))  # brax keeps its registry there
    if ":" not in name and name not in known:
        raise ValueError(
            f"unknown Brax environment {name!r}; brax has: {', '.join(known)}, "
            "or name module:Attribute of your own"
        )
    factory = (
        load_entry_point(name, "Brax environment")
        if ":" in name
        else lambda **kw: envs.get_environment(name, **kw)
    )
    try:
        env = factory(**kwargs)
    except Exception as error:  # noqa: BLE001 - e.g. a bad backend or keyword
        raise ValueError(
            f"brax could not make {name!r} with {kwargs}: {type(error).__name__}: {error}"
        ) from None
    if not (hasattr(env, "reset") and hasattr(env, "step") and hasattr(env, "action_size")):
        raise ValueError(f"{PREFIX}{name} made a {type(env).__name__}, not a Brax Env")
    return env
