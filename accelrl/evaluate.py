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

from accelrl.checkpoint import Checkpointer, abstract
from accelrl.config import ConfigError, TrainConfig, load_config
from accelrl.envs import (
    Environment,
    NormalizeObservation,
    RunningStats,
    TimeStep,
    make,
    make_training_env,
)
from accelrl.fused import make_agent, make_fused_trainer
from accelrl.render import (
    VIDEO_SUFFIXES,
    check_target,
    gl,
    model_of,
    renderable,
    write_render,
)

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


Recorder = Callable[[Any], jax.Array]
"""`record(env_state) -> [K, ...]`: what to keep of the first K envs' states at every step."""


def _play(
    env: Environment,
    policy: Policy,
    policy_state: Any,
    episodes: int,
    seed: int,
    record: Recorder | None,
) -> tuple[np.ndarray, ...]:
    """Steps `episodes` envs until each finished an episode (or the step cap passed).

    Returns returns, lengths, finished and, when `record` is given, the recorded [cap, K, ...]
    (row t: the state acted on at step t; rows past an env's episode belong to later ones).
    """
    cap = env.default_max_steps or STEP_CAP

    @jax.jit
    def run(key: jax.Array) -> tuple[jax.Array, ...]:
        env_state, timestep = env.reset(key)
        zeros = jnp.zeros((episodes,), jnp.float32)
        first = jnp.ones((episodes,), bool)
        trace = None
        if record is not None:
            shape = jax.eval_shape(record, env_state)
            trace = jnp.zeros((cap, *shape.shape), shape.dtype)
        init = (env_state, timestep, first, policy_state, zeros, zeros, ~first, jnp.int32(0), trace)

        def running(loop: tuple) -> jax.Array:
            *_, finished, steps, _ = loop
            return jnp.logical_and(jnp.logical_not(jnp.all(finished)), steps < cap)

        def body(loop: tuple) -> tuple:
            env_state, timestep, is_first, state, returns, lengths, finished, steps, trace = loop
            if record is not None:
                trace = trace.at[steps].set(record(env_state))
            state, action = policy(state, timestep, is_first)
            env_state, timestep = env.step(env_state, action)
            newly = jnp.logical_and(timestep.done, jnp.logical_not(finished))
            returns = jnp.where(newly, timestep.info["episode_return"], returns)
            lengths = jnp.where(newly, timestep.info["episode_length"], lengths)
            finished = jnp.logical_or(finished, timestep.done)
            done = timestep.done
            return env_state, timestep, done, state, returns, lengths, finished, steps + 1, trace

        *_, returns, lengths, finished, _, trace = jax.lax.while_loop(running, body, init)
        return returns, lengths, finished, trace

    returns, lengths, finished, trace = jax.device_get(run(jax.random.PRNGKey(seed)))
    if not finished.any():
        raise RuntimeError(f"no episode finished within {cap} steps")
    return returns, lengths, finished, trace


def summarize_episodes(
    returns: np.ndarray, lengths: np.ndarray, finished: np.ndarray
) -> EvalResult:
    """The finished episodes' returns and lengths as an EvalResult (shared by the bridge's eval)."""
    returns, lengths = returns[finished], lengths[finished]
    return EvalResult(
        mean_return=float(np.mean(returns)),
        std_return=float(np.std(returns)),
        mean_length=float(np.mean(lengths)),
        episodes=int(finished.sum()),
        returns=[float(r) for r in returns],
    )


def run_episodes(
    env: Environment, policy: Policy, policy_state: Any, episodes: int, seed: int = 0
) -> EvalResult:
    """Step `episodes` envs until each has finished one episode (or STEP_CAP steps pass)."""
    returns, lengths, finished, _ = _play(env, policy, policy_state, episodes, seed, None)
    return summarize_episodes(returns, lengths, finished)


def record_episodes(
    env: Environment,
    policy: Policy,
    policy_state: Any,
    episodes: int,
    record: Recorder,
    seed: int = 0,
) -> tuple[EvalResult, list[np.ndarray]]:
    """`run_episodes`, also keeping `record(env_state)` over the first episode of each of the
    first K envs: one [length, ...] array per env (the states acted on; capped episodes keep
    all steps)."""
    returns, lengths, finished, trace = _play(env, policy, policy_state, episodes, seed, record)
    steps = np.where(finished, lengths, len(trace)).astype(int)
    trajectories = [trace[: steps[k], k] for k in range(trace.shape[1])]
    return summarize_episodes(returns, lengths, finished), trajectories


def qpos_recorder(env: Environment, count: int) -> Recorder:
    """Records MuJoCo qpos of the first `count` envs of a batched stack over an MJCF env."""
    base = env.unwrapped

    def record(env_state: Any) -> jax.Array:
        states = jax.tree.map(lambda x: x[:count], env.unwrapped_state(env_state))
        return jax.vmap(base.qpos)(states)

    return record


def _actor_critic_policy(
    config: TrainConfig, params: Any, env: Environment, episodes: int
) -> tuple[Policy, Any]:
    """The agent's mode action (no exploration) as a `Policy`, with its initial state."""
    agent = make_agent(config, env)
    key = jax.random.PRNGKey(0)  # unused by the deterministic policy

    def policy(carry: Any, timestep: TimeStep, is_first: jax.Array) -> tuple[Any, jax.Array]:
        carry, out = agent.act(params, carry, timestep.observation, is_first, key, True)
        return carry, out.env_action

    return policy, agent.initial_carry(episodes)


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
    policy, initial = _actor_critic_policy(config, params, env, episodes)
    return run_episodes(env, policy, initial, episodes, seed)


def evaluate_recorded(
    config: TrainConfig,
    params: Any,
    episodes: int,
    recorded: int,
    seed: int = 0,
    obs_stats: RunningStats | None = None,
) -> tuple[EvalResult, list[np.ndarray]]:
    """`evaluate` (actor-critic runs on MJCF envs), also returning the qpos trajectory
    [length, nq] of the first `recorded` episodes."""
    env = eval_env(config, episodes, obs_stats)
    policy, initial = _actor_critic_policy(config, params, env, episodes)
    return record_episodes(env, policy, initial, episodes, qpos_recorder(env, recorded), seed)


def _check_render(config: TrainConfig, path: Path) -> Any:
    """The run's bare env when `path` can be rendered from it, else ConfigError."""
    check_target(path)
    if path.suffix.lower() in VIDEO_SUFFIXES:
        gl.backend()  # no OpenGL: fail now, not after the evaluation
    base = renderable(make(config.env.name), config.env.name)
    if config.algorithm != "vtrace":
        raise ConfigError(f"rendering supports vtrace runs, this one is {config.algorithm!r}")
    return base


def evaluate_run(
    run_dir: Path,
    episodes: int,
    seed: int = 0,
    render: Path | None = None,
    render_episodes: int = 1,
) -> EvalResult:
    """Evaluate the latest checkpoint of `run_dir` and write `run_dir/eval.json`.

    With `render` (.gif, .mp4 or .html), the first `render_episodes` episodes are also drawn
    there (fused runs: MJCF environments, through MuJoCo's renderer; bridge runs: .gif or .mp4
    of the env's own rgb_array frames), checked before anything is loaded.
    """
    run_dir = Path(run_dir)
    config = load_config(run_dir / "config.yaml")
    if render is not None and not 1 <= render_episodes <= episodes:
        raise ConfigError(
            f"render episodes must be in 1..{episodes} (--episodes), got {render_episodes}"
        )
    if config.bridge.env:  # a bridge run: its CPU env is stepped in-process
        from accelrl.bridge.evaluate import evaluate_bridge_run

        return evaluate_bridge_run(run_dir, config, episodes, seed, render, render_episodes)
    trainer = make_fused_trainer(config)  # (a ConfigError when the env cannot be made)
    base = None if render is None else _check_render(config, render)
    checkpointer = Checkpointer(run_dir / "checkpoints")
    try:
        state = checkpointer.restore_latest(abstract(trainer.init(jax.random.PRNGKey(config.seed))))
    finally:
        checkpointer.close()
    obs_stats = state.env_state.stats if config.env.normalize_observation else None
    if base is None:
        result = evaluate(config, state.params, episodes, seed=seed, obs_stats=obs_stats)
    else:
        result, trajectories = evaluate_recorded(
            config, state.params, episodes, render_episodes, seed=seed, obs_stats=obs_stats
        )
    result = EvalResult(**{**asdict(result), "checkpoint_iteration": int(state.iteration)})
    (run_dir / "eval.json").write_text(json.dumps(asdict(result), indent=2))
    if base is not None:
        write_render(render, model_of(base), trajectories, base.dt * config.env.action_repeat)
    return result
