"""`accelrl eval RUN_DIR` for bridge runs: the saved policy on the run's CPU env, in-process.

The env is built exactly as an actor builds it (`bridge.envs.make_env`: same id, Atari
preprocessing and sticky actions), frames are stacked as the server stacks them, and the
policy acts greedily (V-trace: the policy's mode; R2D2: epsilon 0) through the same learner
code the server used, from the latest checkpoint. No server or actor process is involved.
One episode per env, `episodes` envs stepped in lockstep.
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
from accelrl.checkpoint import Checkpointer
from accelrl.config import ConfigError, TrainConfig
from accelrl.evaluate import STEP_CAP, EvalResult, summarize_episodes


def run_bridge_episodes(
    config: TrainConfig, learner: Any, params: Any, envs: list[Any], seed: int = 0
) -> EvalResult:
    """One greedy episode in each of `envs`, fresh gymnasium-API envs of `config.bridge.env`
    (the caller closes them)."""
    b = config.bridge
    spec = learner.spec
    episodes = len(envs)
    action_dtype = np.dtype(spec.action_dtype)
    frames = SlotTable(
        episodes, learner.agent.obs_shape, spec.observation_dtype, b.frame_stack,
        spec.action_shape, action_dtype, (),
    )  # fmt: skip
    ids = np.arange(episodes)
    step = jax.jit(learner.greedy_step)
    key = jax.random.PRNGKey(seed)
    carry = learner.agent.initial_carry(episodes)
    obs = [env.reset(seed=seed * 100_003 + i)[0] for i, env in enumerate(envs)]
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
        prev_action, is_first = action, np.zeros(episodes, bool)
    if not finished.any():
        raise RuntimeError(f"no episode finished within {STEP_CAP} steps")
    return summarize_episodes(returns, lengths, finished)


def evaluate_bridge_run(
    run_dir: Path, config: TrainConfig, episodes: int, seed: int = 0, render: Any = None
) -> EvalResult:
    """Evaluate the latest checkpoint of bridge run `run_dir`; writes `run_dir/eval.json`."""
    if render is not None:
        raise ConfigError("--render draws fused MJCF envs; this is a bridge run")
    try:  # the episodes run here, in this process: the env must be one it can build
        envs = [make_env(config.bridge.env, config.bridge.sticky_actions) for _ in range(episodes)]
    except UnsupportedEnv as error:
        raise ConfigError(
            f"bridge.env {config.bridge.env!r}: accelrl eval steps the env in this process and "
            f"cannot build it ({error}); evaluate with actors of your own"
        ) from None
    try:
        learner = make_learner(config, server_spec(config))
        checkpointer = Checkpointer(Path(run_dir) / "checkpoints")
        try:
            state = checkpointer.restore_latest(learner.init_state(config.seed))
        finally:
            checkpointer.close()
        result = run_bridge_episodes(config, learner, state.params, envs, seed)
    finally:
        for env in envs:
            env.close()
    result = EvalResult(**{**asdict(result), "checkpoint_iteration": int(state.iteration)})
    (Path(run_dir) / "eval.json").write_text(json.dumps(asdict(result), indent=2))
    return result
