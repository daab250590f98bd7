"""CPU environments for bridge actors, by id. JAX-free (imported by the actor).

Ids are `family:name`:

- `gymnasium:<id>`: any registered gymnasium env (`gymnasium:CartPole-v1`). Atari games, by
  any of ale-py's ids (`gymnasium:ALE/Pong-v5`, `gymnasium:PongNoFrameskip-v4`), get the
  standard Atari preprocessing below.
- `atari:<Game>`: shorthand for `gymnasium:ALE/<Game>-v5`.
- `grf:<scenario>`: Google Research Football (`grf:academy_empty_goal_close`), see `make grf`.
- `trivial:<obs_size>`: a do-nothing env for measuring pure bridge overhead.

Spaces: the bridge carries Box observations and Discrete, MultiDiscrete or Box
actions. Other observation spaces of gymnasium envs are flattened by gymnasium's
`FlattenObservation`, as Stable-Baselines3 preprocesses them: Discrete one-hot, MultiDiscrete
one-hot per part, MultiBinary as is, Tuple and Dict the concatenation of their flattened
parts. A `Discrete(n, start=s)` action space is offered as 0..n-1 and shifted by s on the way
in; a MultiDiscrete one as its flattened nvec with each component from 0 (shifted by its start
and reshaped on the way in), and MultiBinary(n) as MultiDiscrete of n twos (SB3 and CleanRL
treat both as independent categoricals). A Box of any shape travels flattened and is reshaped
on the way in; one with an infinite bound gets a Gaussian policy whose samples are clipped to
the finite bounds (SB3's DiagGaussian), a bounded one a tanh-squashed Gaussian. Any other action
space (Tuple, Dict, Text...) is refused with `UnsupportedEnv`.

Atari preprocessing (where each step happens): on the ACTOR, ALE runs with `frameskip=1` and
the `repeat_action_probability` given (sticky actions; 0.25 is v5's default, 0 the classic
DQN setting); gymnasium's `AtariPreprocessing` then repeats each action 4 times (frame skip 4,
rewards summed, max over the last two frames), converts to grayscale, resizes to 84x84 (uint8)
and applies up to 30 no-op actions at reset. Only that single 84x84 frame is sent per step;
the 4-frame stack is kept on the SERVER (`bridge.frame_stack=4`), as SEED RL does, so each
message carries 7 KB per env instead of 28 KB. Rewards travel unclipped (episode returns are
the game's); scale them for learning with `agent.reward_scale`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelrl.bridge.codec import EnvSpec


class UnsupportedEnv(ValueError):
    """An env id or space the bridge cannot carry (the message names which)."""


class TrivialEnv:
    """Constant observations, reward 1, episodes of 100 steps (truncated): pure overhead."""

    def __init__(self, obs_size: int = 4, episode_length: int = 100) -> None:
        self._obs = np.zeros((obs_size,), np.float32)
        self._length = episode_length
        self._t = 0
        self.spec_ = EnvSpec((obs_size,), "float32", num_actions=2)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:
        self._t = 0
        return self._obs, {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self._t += 1
        return self._obs, 1.0, False, self._t >= self._length, {}

    def close(self) -> None:
        pass


def _is_atari(name: str) -> bool:
    """Whether gymnasium id `name` is an ALE game (ale-py's ids: `ALE/Pong-v5`,
    `PongNoFrameskip-v4`, ...); registers ale-py's envs with gymnasium when it is one."""
    import gymnasium

    if not name.startswith("ALE/"):
        try:
            return "ale_py" in str(gymnasium.spec(name).entry_point)
        except gymnasium.error.Error:  # not registered (yet): maybe one of ale-py's old ids
            pass
        except ImportError:  # a `module:Name` id whose module is missing: make says so
            return False
    try:
        import ale_py
    except ImportError:
        if name.startswith("ALE/"):
            raise UnsupportedEnv(
                f"{name}: Atari games need ale-py: pip install 'accelrl[atari]'"
            ) from None
        return False
    gymnasium.register_envs(ale_py)
    try:
        return "ale_py" in str(gymnasium.spec(name).entry_point)
    except gymnasium.error.Error:
        return name.startswith("ALE/")  # a misspelt game: make names the closest


def _gymnasium_make(env_id: str, name: str, **kwargs: Any) -> Any:
    """`gymnasium.make(name, **kwargs)`; its failures (unknown id, missing dependency, an env
    moved out of gymnasium) become UnsupportedEnv naming `env_id`."""
    import gymnasium

    try:
        return gymnasium.make(name, **kwargs)
    except (gymnasium.error.Error, ImportError) as error:
        raise UnsupportedEnv(f"{env_id}: {error}") from None


def make_env(env_id: str, sticky_actions: float = 0.25, render_mode: str | None = None) -> Any:
    """A gymnasium-API env (reset(seed) -> (obs, info); step(a) -> 5-tuple) for `env_id`.

    `render_mode="rgb_array"` (gymnasium envs only): `env.render()` returns the current frame,
    and `env.metadata["render_fps"]` its rate (Atari: 15, one frame per agent step).
    """
    family, _, name = env_id.partition(":")
    if not name:
        raise UnsupportedEnv(f"env id {env_id!r} is not of the form family:name")
    if family == "atari":
        family, name = "gymnasium", f"ALE/{name}-v5"
    if render_mode is not None and family != "gymnasium":
        raise UnsupportedEnv(f"{env_id}: only gymnasium envs render frames")
    if family == "trivial":
        return TrivialEnv(int(name))
    if family == "gymnasium":
        import gymnasium

        # only when asked: gymnasium passes render_mode=None on to envs that may not take it
        rendering = {} if render_mode is None else {"render_mode": render_mode}
        if not _is_atari(name):
            return _bridgeable(_gymnasium_make(env_id, name, **rendering), env_id)
        env = _gymnasium_make(
            env_id, name, frameskip=1, repeat_action_probability=sticky_actions, **rendering
        )
        env = gymnasium.wrappers.AtariPreprocessing(
            env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True
        )
        # real time: the console draws 60 frames/s and an agent step is 4 of them
        env.metadata = {**env.metadata, "render_fps": 60 / 4}
        return env
    if family == "grf":
        from accelrl.bridge.grf import make_grf_env

        return make_grf_env(name)
    families = "gymnasium, atari, grf, trivial"
    raise UnsupportedEnv(f"unknown env family {family!r} in {env_id!r} ({families})")


def _bridgeable(env: Any, env_id: str) -> Any:
    """`env` with the spaces the bridge carries (module docstring), or UnsupportedEnv."""
    import gymnasium
    from gymnasium import spaces

    actions = env.action_space
    if isinstance(actions, spaces.Discrete) and actions.start != 0:
        start = actions.start
        env = gymnasium.wrappers.TransformAction(
            env, lambda a: start + a, spaces.Discrete(actions.n)
        )
    elif isinstance(actions, spaces.MultiDiscrete | spaces.MultiBinary):
        env = _as_flat_multi_discrete(env, actions)
    elif isinstance(actions, spaces.Box) and len(actions.shape) != 1:
        shape, dtype = actions.shape, actions.dtype
        flat = spaces.Box(actions.low.ravel(), actions.high.ravel(), dtype=actions.dtype)
        to_env = lambda a: np.asarray(a, dtype).reshape(shape)
        env = gymnasium.wrappers.TransformAction(env, to_env, flat)
    elif not isinstance(actions, spaces.Discrete | spaces.Box):
        raise UnsupportedEnv(
            f"{env_id}: action space {actions} is not supported (Discrete, MultiDiscrete, "
            "MultiBinary or Box)"
        )
    if not isinstance(env.observation_space, spaces.Box):
        space = env.observation_space
        try:
            env = gymnasium.wrappers.FlattenObservation(env)
        except NotImplementedError:
            pass
        if not isinstance(env.observation_space, spaces.Box):
            raise UnsupportedEnv(f"{env_id}: observation space {space} cannot be flattened")
    return env


def _as_flat_multi_discrete(env: Any, actions: Any) -> Any:
    """`env` taking flat MultiDiscrete actions from 0 for its MultiDiscrete or MultiBinary
    `actions`: each component shifted by its start and the vector reshaped on the way in."""
    import gymnasium
    from gymnasium import spaces

    if isinstance(actions, spaces.MultiBinary):
        nvec, start, dtype = np.full(actions.shape, 2), np.zeros(actions.shape, np.int64), np.int8
    else:
        nvec, start, dtype = actions.nvec, getattr(actions, "start", 0), actions.dtype
    shape, start = nvec.shape, np.broadcast_to(start, nvec.shape).ravel()
    flat = spaces.MultiDiscrete(nvec.ravel())
    to_env = lambda a: (start + np.asarray(a)).reshape(shape).astype(dtype)
    return gymnasium.wrappers.TransformAction(env, to_env, flat)


def env_spec(env: Any) -> EnvSpec:
    """The EnvSpec of one env step, from a gymnasium-API env's spaces."""
    if isinstance(env, TrivialEnv):
        return env.spec_
    obs_space, act_space = env.observation_space, env.action_space
    shape = tuple(int(d) for d in obs_space.shape)
    dtype = np.dtype(obs_space.dtype).name
    if dtype == "float64":
        dtype = "float32"  # sent as float32 (the agent computes in float32 anyway)
    if hasattr(act_space, "nvec"):
        return EnvSpec(shape, dtype, action_nvec=tuple(int(n) for n in act_space.nvec))
    if hasattr(act_space, "n"):
        return EnvSpec(shape, dtype, num_actions=int(act_space.n))
    low = tuple(float(v) for v in np.ravel(act_space.low))
    high = tuple(float(v) for v in np.ravel(act_space.high))
    return EnvSpec(shape, dtype, 0, low, high)
