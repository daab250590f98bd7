"""Deterministic-policy evaluation: N episodes stepped in parallel, one per env."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from accelrl.checkpoint import Checkpointer
from accelrl.config import TrainConfig, load_config
from accelrl.envs import (
    Environment,
    NormalizeObservation,
    RunningStats,
    TimeStep,
    make_training_env,
)
from accelrl.fused import make_agent, make_fused_trainer

STEP_CAP = 100_000
"""Bound on eval steps for environments without a time limit."""


@dataclass(frozen=True)
class EvalResult:
    mean_return: float
    std_return: float
    mean_length: float
    episodes: int
    returns: list[float]
    checkpoint_iteration: int | None = None


Policy = Callable[[Any, TimeStep, jax.Array], tuple[Any, jax.Array]]
"""`policy(policy_state, timestep, is_first) -> (policy_state, env_action)` for a batch."""


def eval_env(config: TrainConfig, episodes: int, obs_stats: RunningStats | None) -> Environment:
    """The training env stack for `episodes` envs, with frozen trained observation stats."""
    e = config.env
    env = make_training_env(e.name, episodes, max_steps=e.max_steps, action_repeat=e.action_repeat)
    if e.normalize_observation:
        if obs_stats is None:
            raise ValueError("config normalises observations: pass the trained obs_stats")
        env = NormalizeObservation(env, update=False, initial_stats=obs_stats)
    return env


def run_episodes(
    env: Environment, policy: Policy, policy_state: Any, episodes: int, seed: int = 0
) -> EvalResult:
    """Step `episodes` envs until each has finished one episode (or STEP_CAP steps pass)."""
    cap = env.default_max_steps or STEP_CAP

    @jax.jit
    def run(key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        env_state, timestep = env.reset(key)
        zeros = jnp.zeros((episodes,), jnp.float32)
        first = jnp.ones((episodes,), bool)
        init = (env_state, timestep, first, policy_state, zeros, zeros, ~first, jnp.int32(0))

        def running(loop: tuple) -> jax.Array:
            *_, finished, steps = loop
            return jnp.logical_and(jnp.logical_not(jnp.all(finished)), steps < cap)

        def body(loop: tuple) -> tuple:
            env_state, timestep, is_first, state, returns, lengths, finished, steps = loop
            state, action = policy(state, timestep, is_first)
            env_state, timestep = env.step(env_state, action)
            newly = jnp.logical_and(timestep.done, jnp.logical_not(finished))
            returns = jnp.where(newly, timestep.info["episode_return"], returns)
            lengths = jnp.where(newly, timestep.info["episode_length"], lengths)
            finished = jnp.logical_or(finished, timestep.done)
            return env_state, timestep, timestep.done, state, returns, lengths, finished, steps + 1

        *_, returns, lengths, finished, _ = jax.lax.while_loop(running, body, init)
        return returns, lengths, finished

    returns, lengths, finished = jax.device_get(run(jax.random.PRNGKey(seed)))
    if not finished.any():
        raise RuntimeError(f"no episode finished within {cap} steps")
    returns, lengths = returns[finished], lengths[finished]
    return EvalResult(
        mean_return=float(np.mean(returns)),
        std_return=float(np.std(returns)),
        mean_length=float(np.mean(lengths)),
        episodes=int(finished.sum()),
        returns=[float(r) for r in returns],
    )


def evaluate(
    config: TrainConfig,
    params: Any,
    episodes: int,
    seed: int = 0,
    obs_stats: RunningStats | None = None,
) -> EvalResult:
    """Run one episode in each of `episodes` envs with the policy's mode (no exploration).

    `obs_stats` are the training run's frozen observation statistics (when it normalised).
    """
    if config.algorithm == "r2d2":  # greedy Q-values
        from accelrl.fused_r2d2 import evaluate_greedy

        return evaluate_greedy(config, params, episodes, seed=seed, obs_stats=obs_stats)
    env = eval_env(config, episodes, obs_stats)
    agent = make_agent(config, env)
    key = jax.random.PRNGKey(0)  # unused by the deterministic policy

    def policy(carry: Any, timestep: TimeStep, is_first: jax.Array) -> tuple[Any, jax.Array]:
        carry, out = agent.act(params, carry, timestep.observation, is_first, key, True)
        return carry, out.env_action

    return run_episodes(env, policy, agent.initial_carry(episodes), episodes, seed)


def evaluate_run(run_dir: Path, episodes: int, seed: int = 0) -> EvalResult:
    """Evaluate the latest checkpoint of `run_dir` and write `run_dir/eval.json`."""
    run_dir = Path(run_dir)
    config = load_config(run_dir / "config.yaml")
    trainer = make_fused_trainer(config)
    checkpointer = Checkpointer(run_dir / "checkpoints")
    try:
        state = checkpointer.restore_latest(trainer.init(jax.random.PRNGKey(config.seed)))
    finally:
        checkpointer.close()
    obs_stats = state.env_state.stats if config.env.normalize_observation else None
    result = evaluate(config, state.params, episodes, seed=seed, obs_stats=obs_stats)
    result = EvalResult(**{**asdict(result), "checkpoint_iteration": int(state.iteration)})
    (run_dir / "eval.json").write_text(json.dumps(asdict(result), indent=2))
    return result
