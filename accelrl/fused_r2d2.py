"""R2D2 in the fused step: acting, sequence replay and learning in one jitted function.

One iteration: every env takes `r2d2.period` epsilon-greedy steps (Ape-X per-env epsilons);
each env's window of the last `burn_in + trace_length` steps (with the recurrent state the
actor had at every step) becomes one new sequence in the prioritised replay; then K learner
updates sample sequences, train, write back their priorities and periodically refresh the
target network. While the replay holds fewer than `min_replay_size` sequences the updates are
computed but masked (branchless). Everything, replay included, lives in `R2D2TrainState`, so
checkpoints hold the replay contents and priorities and resume exactly.

Multi-device: the env axis is sharded over the 1-D "envs" mesh as for V-trace, and the replay
has a leading shard axis (one shard per device, sharded the same way): the envs of device d
insert into shard d, and each update samples batch_size / D sequences from every shard. The
importance weights use the global probability P(i) = P_shard(i) / D. Unlike V-trace, results on
D devices are not those of one device (sampling differs), only statistically equivalent.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from accelrl import replay
from accelrl.config import ConfigError, TrainConfig
from accelrl.envs import (
    Discrete,
    Environment,
    RunningStats,
    TimeStep,
)
from accelrl.fused import (
    ChunkMetrics,
    compile_chunk,
    env_batch_axes,
    make_env,
    make_mesh,
    num_chunks,
)
from accelrl.r2d2_learning import (
    LearnState,
    init_replay,
    insert,
    learner_update,
    make_r2d2_learner,
    zero_sequences,
)
from accelrl.r2d2_learning import make_r2d2_agent as r2d2_agent
from agents.r2d2 import R2D2Agent, R2D2Learner, Sequences, epsilons


class R2D2TrainState(struct.PyTreeNode):
    """Everything needed to resume an R2D2 run exactly, replay included."""

    params: Any
    target_params: Any
    opt_state: Any
    env_state: Any
    timestep: TimeStep  # the latest, batched; its observation is the next to act on
    is_first: jax.Array  # [B]
    carry: Any  # acting LSTM state [B, H] pair
    prev_action: jax.Array  # [B] int32, the network's extra input
    prev_reward: jax.Array  # [B]
    window: Sequences  # [B, L, ...] last L steps per env; start_carry holds every step's carry
    replay: replay.ReplayState  # leading shard axis [D, ...] on every leaf
    key: jax.Array
    iteration: jax.Array  # completed iterations (int32)
    updates: jax.Array  # learner updates applied (int32; masked ones not counted)


def make_r2d2_agent(config: TrainConfig, env: Environment) -> R2D2Agent:
    """The Q-network for `env` (discrete actions only), shaped by `config.r2d2`."""
    space = env.action_space
    if not isinstance(space, Discrete):
        raise ConfigError(f"r2d2 needs discrete actions; env {config.env.name!r} has {space}")
    return r2d2_agent(config, tuple(env.observation_space.shape), space.num_values)


def updates_per_iteration(config: TrainConfig) -> int:
    r = config.r2d2
    return round(r.replay_ratio * config.env.num_envs / r.batch_size)


def _empty_window(agent: R2D2Agent, timestep: TimeStep, num_envs: int, length: int) -> Sequences:
    obs = timestep.observation  # [B, ...]
    return zero_sequences(agent, obs.dtype, (num_envs, length), (num_envs, length))


def _sequence_item(window: Sequences) -> Sequences:
    """Per-env sequences [B, L, ...] from the window: the start carry is step 0's."""
    return window._replace(start_carry=jax.tree.map(lambda c: c[:, 0], window.start_carry))


@dataclass(frozen=True)
class R2D2FusedTrainer:
    """Builds the R2D2 train state and runs chunks of fused iterations."""

    config: TrainConfig
    env: Environment
    agent: R2D2Agent
    learner: R2D2Learner
    schedule: Any  # learner update count -> learning rate
    mesh: Mesh
    state_sharding: Any

    @property
    def num_shards(self) -> int:
        return self.mesh.size

    @property
    def sequence_length(self) -> int:
        return self.config.r2d2.burn_in + self.config.r2d2.trace_length

    @property
    def steps_per_chunk(self) -> int:
        c = self.config
        return c.env.num_envs * c.r2d2.period * c.env.action_repeat * c.iterations_per_chunk

    @functools.cached_property
    def _jitted_init(self) -> Any:
        # One jit object: `jax.eval_shape(trainer.init, key)` and the compile share one trace.
        return jax.jit(self._init, out_shardings=self.state_sharding)

    def init(self, key: jax.Array) -> R2D2TrainState:
        """A fresh train state, placed on the mesh.

        Compiled with XLA's default options: unlike the V-trace init, `run_once`'s unoptimised
        code would change the initial parameters' last bits, and the CartPole learning test's
        outcome with them (measured: greedy 431 instead of 499).
        """
        return self._jitted_init(key)

    def _init(self, key: jax.Array) -> R2D2TrainState:
        param_key, env_key, key = jax.random.split(key, 3)
        params = self.agent.init(param_key)
        env_state, timestep = self.env.reset(env_key)
        num_envs = self.config.env.num_envs
        window = _empty_window(self.agent, timestep, num_envs, self.sequence_length)
        example = jax.tree.map(lambda x: x[0], _sequence_item(window))
        shards = init_replay(example, self.config.r2d2.replay_capacity, self.num_shards)
        return R2D2TrainState(
            params=params,
            target_params=params,
            opt_state=self.learner.init(params),
            env_state=env_state,
            timestep=timestep,
            is_first=jnp.ones((num_envs,), bool),
            carry=self.agent.initial_carry(num_envs),
            prev_action=jnp.zeros((num_envs,), jnp.int32),
            prev_reward=jnp.zeros((num_envs,), jnp.float32),
            window=window,
            replay=shards,
            key=key,
            iteration=jnp.zeros((), jnp.int32),
            updates=jnp.zeros((), jnp.int32),
        )

    def compile_chunk(self, state: R2D2TrainState) -> Any:
        """AOT-compile `run_chunk` for `state`'s shapes (donating the state)."""
        return compile_chunk(self.run_chunk, self.mesh, self.state_sharding, state, self.env)

    def run_chunk(self, state: R2D2TrainState) -> tuple[R2D2TrainState, ChunkMetrics]:
        """`iterations_per_chunk` fused iterations; pure, for jit."""
        start = state.iteration
        state, per_iteration = jax.lax.scan(
            self._iteration, state, None, length=self.config.iterations_per_chunk
        )
        returns, lengths, episodes, losses, finite = per_iteration
        bad = jnp.logical_not(finite)
        first_bad = jnp.where(jnp.any(bad), start + jnp.argmax(bad), -1)
        metrics = ChunkMetrics(
            episode_return_sum=returns.sum(),
            episode_length_sum=lengths.sum(),
            episodes=episodes.sum(),
            learning_rate=jnp.asarray(self.schedule(state.updates), jnp.float32),
            first_nonfinite_iteration=first_bad.astype(jnp.int32),
            losses=jax.tree.map(jnp.mean, losses),
        )
        return state, metrics

    def _iteration(self, state: R2D2TrainState, _: None) -> tuple[R2D2TrainState, tuple]:
        r = self.config.r2d2
        state, steps = self._rollout(state)
        record, episode_return, episode_length = steps
        done = jnp.logical_or(record.terminated, record.truncated)
        episode_stats = (
            jnp.sum(jnp.where(done, episode_return, 0.0)),
            jnp.sum(jnp.where(done, episode_length, 0)),
            jnp.sum(done),
        )
        # Shift the window by `period` steps: [B, L - period] old + [B, period] new.
        new = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), record)
        window = jax.tree.map(
            lambda w, n: jnp.concatenate([w[:, r.period :], n], axis=1), state.window, new
        )
        full = (state.iteration + 1) * r.period >= self.sequence_length
        valid = jnp.broadcast_to(full, (self.config.env.num_envs,))
        buffer = insert(state.replay, _sequence_item(window), valid, r.priority_exponent)
        state = state.replace(window=window, replay=buffer)

        ready = jnp.sum(buffer.size) >= r.min_replay_size
        key, update_key = jax.random.split(state.key)
        learn = LearnState(
            state.params, state.target_params, state.opt_state, state.replay, state.updates
        )
        learn, metrics = jax.lax.scan(
            lambda carry, k: learner_update(self.learner, self.config, carry, k, ready),
            learn,
            jax.random.split(update_key, updates_per_iteration(self.config)),
        )
        params, target_params, opt_state, buffer, updates = learn
        losses = {
            "loss": metrics.loss,
            "q_mean": metrics.q_mean,
            "td_abs": metrics.td_abs,
            "grad_norm": metrics.grad_norm,
        }
        losses = jax.tree.map(lambda x: jnp.where(ready, jnp.mean(x), 0.0), losses)
        losses["replay_fill"] = jnp.sum(buffer.size) / r.replay_capacity
        finite = jnp.logical_or(jnp.logical_not(ready), jnp.all(metrics.finite))
        state = state.replace(
            params=params,
            target_params=target_params,
            opt_state=opt_state,
            replay=buffer,
            updates=updates,
            key=key,
            iteration=state.iteration + 1,
        )
        return state, (*episode_stats, losses, finite)

    def _rollout(self, state: R2D2TrainState) -> tuple[R2D2TrainState, tuple]:
        params = state.params
        r = self.config.r2d2
        eps = jnp.asarray(epsilons(self.config.env.num_envs, r.epsilon_base, r.epsilon_alpha))

        def step(state: R2D2TrainState, _: None) -> tuple[R2D2TrainState, tuple]:
            key, act_key = jax.random.split(state.key)
            observation = state.timestep.observation
            carry, action, _ = self.agent.act(
                params,
                state.carry,
                observation,
                state.prev_action,
                state.prev_reward,
                state.is_first,
                eps,
                act_key,
            )
            env_state, timestep = self.env.step(state.env_state, action)
            record = Sequences(
                observation=observation,
                next_observation=timestep.info["final_observation"],
                is_first=state.is_first,
                prev_action=state.prev_action,
                prev_reward=state.prev_reward,
                action=action,
                reward=timestep.reward.astype(jnp.float32),
                terminated=timestep.terminated,
                truncated=timestep.truncated,
                start_carry=state.carry,
            )
            state = state.replace(
                env_state=env_state,
                timestep=timestep,
                is_first=timestep.done,
                carry=carry,
                prev_action=action,
                prev_reward=timestep.reward.astype(jnp.float32),
                key=key,
            )
            stats = (timestep.info["episode_return"], timestep.info["episode_length"])
            return state, (record, *stats)

        return jax.lax.scan(step, state, None, length=r.period)


def _available_bytes(device: jax.Device) -> int | None:
    """Free memory of `device` (host memory for CPU devices); None when unknown."""
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - backends without memory statistics raise various errors
        stats = None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None


def check_replay_memory(replay_bytes: int, mesh: Mesh, available: int | None = None) -> None:
    """Refuse a replay that does not fit: ConfigError with bytes needed and available.

    On accelerators each device holds one shard (replay_bytes / D) and is checked alone; CPU
    devices share the host's memory, so the whole replay is checked against it.
    """
    device = mesh.devices.flat[0]
    cpu = device.platform == "cpu"
    needed = replay_bytes if cpu else -(-replay_bytes // mesh.size)
    if available is None:
        available = _available_bytes(device)
    if available is not None and needed > available:
        where = "host memory (CPU devices)" if cpu else f"{device.platform} device {device.id}"
        raise ConfigError(
            f"the replay needs {needed:,} bytes ({needed / 2**30:.2f} GiB"
            f"{'' if cpu else ' per device'}) but only {available:,} bytes "
            f"({available / 2**30:.2f} GiB) are available on {where}; lower "
            f"r2d2.replay_capacity or the sequence length"
        )


def make_r2d2_trainer(
    config: TrainConfig, devices: Sequence[jax.Device] | None = None
) -> R2D2FusedTrainer:
    """Assemble env, agent, learner, replay layout and shardings for an R2D2 `config`."""
    r = config.r2d2
    mesh = make_mesh(config.env.num_envs, devices)
    shards = mesh.size
    for name, value in [
        ("r2d2.batch_size", r.batch_size),
        ("r2d2.replay_capacity", r.replay_capacity),
    ]:
        if value % shards:
            raise ConfigError(f"{name}={value} must divide by the number of devices ({shards})")
    env = make_env(config, config.env.num_envs)
    agent = make_r2d2_agent(config, env)
    total_updates = num_chunks(config) * config.iterations_per_chunk
    total_updates *= updates_per_iteration(config)
    learner, schedule = make_r2d2_learner(config, agent, total_updates)
    sharded = NamedSharding(mesh, PartitionSpec("envs"))
    replicated = NamedSharding(mesh, PartitionSpec())
    pick = lambda is_batched: sharded if is_batched else replicated
    env_part = jax.tree.map(pick, env_batch_axes(config))
    # A prefix of the state's tree (one sharding per field), known before any trace.
    state_sharding = R2D2TrainState(
        params=replicated,
        target_params=replicated,
        opt_state=replicated,
        env_state=env_part[0],
        timestep=env_part[1],
        is_first=sharded,
        carry=sharded,
        prev_action=sharded,
        prev_reward=sharded,
        window=sharded,
        replay=sharded,
        key=replicated,
        iteration=replicated,
        updates=replicated,
    )
    trainer = R2D2FusedTrainer(config, env, agent, learner, schedule, mesh, state_sharding)
    # The init's trace, shared with `train`'s eval_shape and compile (same jit, same key shape).
    abstract = jax.eval_shape(trainer.init, jax.random.PRNGKey(0))
    check_replay_memory(replay.nbytes(abstract.replay), mesh)
    return trainer


def evaluate_greedy(
    config: TrainConfig,
    params: Any,
    episodes: int,
    seed: int = 0,
    obs_stats: RunningStats | None = None,
) -> Any:
    """One greedy-Q episode in each of `episodes` envs; returns accelrl.evaluate.EvalResult."""
    from accelrl.evaluate import eval_env, run_episodes

    env = eval_env(config, episodes, obs_stats)
    agent = make_r2d2_agent(config, env)
    greedy = jnp.zeros((episodes,), jnp.float32)
    key = jax.random.PRNGKey(0)  # unused at epsilon 0

    def policy(state: tuple, timestep: TimeStep, is_first: jax.Array) -> tuple[tuple, jax.Array]:
        carry, prev_action = state  # the previous reward is the timestep's own
        reward = timestep.reward.astype(jnp.float32)
        carry, action, _ = agent.act(
            params, carry, timestep.observation, prev_action, reward, is_first, greedy, key
        )
        return (carry, action), action

    initial = (agent.initial_carry(episodes), jnp.zeros((episodes,), jnp.int32))
    return run_episodes(env, policy, initial, episodes, seed)
