"""`accelrl eval RUN_DIR` for bridge runs: the saved policy on the run's CPU env, in-process.

The env is built exactly as an actor builds it (`bridge.envs.make_env`: same id, Atari
preprocessing and sticky actions), frames are stacked as the server stacks them, and the
policy acts greedily (V-trace: the policy's mode; R2D2: epsilon 0) through the same learner
code the server used, from the latest checkpoint. No server or actor process is involved.
One episode per env, `episodes` envs stepped in lockstep. `--render out.gif|out.mp4` records
the first episodes through the env's own `render()` (gymnasium's rgb_array mode: Atari's
screen in colour, CartPole's drawing, ...).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import jax
import numpy as np

from accelrl.bridge.envs import UnsupportedEnv, make_env
from accelrl.bridge.run_setup import make_learner, server_spec
from accelrl.bridge.slots import SlotTable
from accelrl.checkpoint import Checkpointer, abstract
from accelrl.config import ConfigError, TrainConfig
from accelrl.evaluate import STEP_CAP, EvalResult, summarize_episodes
from accelrl.render import VIDEO_SUFFIXES
from physics.xla_cpu import NETWORK_COMPILE


def run_bridge_episodes(
    config: TrainConfig,
    learner: Any,
    params: Any,
    envs: list[Any],
    seed: int = 0,
    recorded: int = 0,
) -> tuple[EvalResult, list[list[np.ndarray]]]:
    """One greedy episode in each of `envs`, fresh gymnasium-API envs of `config.bridge.env`
    (the caller closes them); also the frames (`env.render()`) of the first `recorded`
    episodes, each from its reset to its end."""
    b = config.bridge
    spec = learner.spec
    episodes = len(envs)
    action_dtype = np.dtype(spec.action_dtype)
    frames = SlotTable(
        episodes, learner.agent.obs_shape, spec.observation_dtype, b.frame_stack,
        spec.action_shape, action_dtype, (),
    )  # fmt: skip
    ids = np.arange(episodes)
    step = jax.jit(learner.greedy_step, compiler_options=NETWORK_COMPILE)
    key = jax.random.PRNGKey(seed)
    carry = learner.agent.initial_carry(episodes)
    obs = [env.reset(seed=seed * 100_003 + i)[0] for i, env in enumerate(envs)]
    videos = [[envs[i].render()] for i in range(recorded)]
    is_first = np.ones(episodes, bool)
    prev_action = np.zeros((episodes, *spec.action_shape), action_dtype)
    prev_reward = np.zeros(episodes, np.float32)
    returns, lengths = np.zeros(episodes), np.zeros(episodes, np.int64)
    finished = np.zeros(episodes, bool)
    for _ in range(STEP_CAP):
        if finished.all():
            break
        batch = np.stack(obs).astype(spec.observation_dtype, copy=False)
        observation = frames.stack(ids, batch, is_first)
        frames.pending_obs[ids] = observation
        inputs = {
            "observation": observation,
            "is_first": is_first,
            "prev_action": prev_action,
            "prev_reward": prev_reward,
        }
        carry, action = step(params, carry, inputs, key)
        action = np.asarray(action, action_dtype)
        for i in np.flatnonzero(~finished):
            obs[i], reward, terminated, truncated, _ = envs[i].step(action[i])
            returns[i] += reward
            lengths[i] += 1
            prev_reward[i] = reward
            finished[i] = terminated or truncated
            if i < recorded:
                videos[i].append(envs[i].render())
        prev_action, is_first = action, np.zeros(episodes, bool)
    if not finished.any():
        raise RuntimeError(f"no episode finished within {STEP_CAP} steps")
    return summarize_episodes(returns, lengths, finished), videos


def _check_render(config: TrainConfig, path: Path) -> None:
    """ConfigError unless `path` is a video and the run's env draws rgb_array frames (one
    frame is drawn to find out)."""
    if Path(path).suffix.lower() not in VIDEO_SUFFIXES:
        raise ConfigError(
            f"cannot render to {path}: a bridge run renders to {VIDEO_SUFFIXES} (the HTML viewer "
            "draws MJCF models)"
        )
    import gymnasium

    b = config.bridge
    env = None
    try:
        env = make_env(b.env, b.sticky_actions, render_mode="rgb_array")
        env.reset(seed=0)
        frame = env.render()
    except (UnsupportedEnv, gymnasium.error.Error) as error:
        frame = error
    if env is not None:
        env.close()
    if not (isinstance(frame, np.ndarray) and frame.ndim == 3 and frame.shape[-1] == 3):
        detail = f": {frame}" if isinstance(frame, Exception) else ""
        raise ConfigError(f"bridge.env {b.env!r} cannot render rgb_array frames{detail}")


def evaluate_bridge_run(
    run_dir: Path,
    config: TrainConfig,
    episodes: int,
    seed: int = 0,
    render: Path | None = None,
    render_episodes: int = 1,
) -> EvalResult:
    """Evaluate the latest checkpoint of bridge run `run_dir`; writes `run_dir/eval.json`, and
    with `render` (.gif or .mp4) the first `render_episodes` episodes' frames."""
    recorded = 0
    if render is not None:
        _check_render(config, render)
        recorded = render_episodes
    b = config.bridge
    try:  # the episodes run here, in this process: the env must be one it can build
        envs = [
            make_env(b.env, b.sticky_actions, render_mode="rgb_array" if i < recorded else None)
            for i in range(episodes)
        ]
    except UnsupportedEnv as error:
        raise ConfigError(
            f"bridge.env {b.env!r}: accelrl eval steps the env in this process and "
            f"cannot build it ({error}); evaluate with actors of your own"
        ) from None
    try:
        learner = make_learner(config, server_spec(config))
        checkpointer = Checkpointer(Path(run_dir) / "checkpoints")
        try:
            state = checkpointer.restore_latest(abstract(learner.init_state(config.seed)))
        finally:
            checkpointer.close()
        result, videos = run_bridge_episodes(config, learner, state.params, envs, seed, recorded)
        fps = float(envs[0].metadata.get("render_fps") or 30) if recorded else 0.0
    finally:
        for env in envs:
            env.close()
    result = EvalResult(**{**asdict(result), "checkpoint_iteration": int(state.iteration)})
    (Path(run_dir) / "eval.json").write_text(json.dumps(asdict(result), indent=2))
    if recorded:
        from accelrl.render.video import write_video

        write_video(Path(render), np.stack([f for video in videos for f in video]), fps)
    return result
