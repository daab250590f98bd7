"""The fused (Anakin) training step: env stepping, acting and V-trace learning in one jit.

`make_fused_trainer(config)` returns a `FusedTrainer` whose `run_chunk(state)` runs
`iterations_per_chunk` iterations of [roll out T steps on B envs -> V-trace update] with no
host round trip. It is compiled once with the train state donated and, on several devices,
with the env axis sharded over a 1-D mesh: the same program then runs split across devices and
XLA averages the gradients (the batch mean becomes an all-reduce), so results match one device.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from accelrl.config import ConfigError, TrainConfig
from accelrl.envs import Box, Discrete, Environment, TimeStep, make_training_env
from accelrl.torsos import with_torso
from agents import (
    Actions,
    ActorCriticAgent,
    DiscreteActions,
    Trajectory,
    VTraceConfig,
    box_actions,
    make_optimizer,
)
from agents.learner import UpdateMetrics, VTraceLearner
from agents.torsos import Torso
from physics.xla_cpu import NETWORK_COMPILE


class TrainState(struct.PyTreeNode):
    """Everything needed to resume a run exactly."""

    params: Any
    opt_state: Any
    env_state: Any
    timestep: TimeStep  # the latest, batched; its observation is the next to act on
    is_first: jax.Array  # [B] the observation starts an episode (resets a recurrent core)
    carry: Any  # recurrent state of the acting network, [B, ...]
    key: jax.Array
    iteration: jax.Array  # completed iterations (int32)


class ChunkMetrics(NamedTuple):
    """What every fused trainer reports per chunk, reduced on the device (one small transfer).

    `losses` are chunk means logged as `losses/<name>`; their names depend on the algorithm.
    """

    episode_return_sum: jax.Array
    episode_length_sum: jax.Array
    episodes: jax.Array
    learning_rate: jax.Array
    first_nonfinite_iteration: jax.Array  # -1 when every update was finite
    losses: dict[str, jax.Array]


class _Transition(NamedTuple):
    observation: jax.Array
    next_observation: jax.Array
    is_first: jax.Array
    action: jax.Array
    behaviour_log_prob: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array


def make_agent(config: TrainConfig, env: Environment) -> ActorCriticAgent:
    """The actor-critic for `env`'s spaces, shaped by `config.agent`."""
    space = env.action_space
    if isinstance(space, Discrete):
        actions = DiscreteActions(space.num_values)
    elif isinstance(space, Box) and len(space.shape) == 1:
        actions = box_actions(space.low, space.high)
    else:
        raise ConfigError(f"env {config.env.name!r}: unsupported action space {space}")
    return actor_critic(config, tuple(env.observation_space.shape), actions)


def actor_critic(
    config: TrainConfig, obs_shape: tuple[int, ...], actions: Actions
) -> ActorCriticAgent:
    """The actor-critic `config.agent` describes, for these observations and actions."""
    a = config.agent

    def make(torso: Torso) -> ActorCriticAgent:
        return ActorCriticAgent(
            obs_shape=obs_shape,
            actions=actions,
            hidden_sizes=tuple(a.hidden_sizes),
            activation=a.activation,
            lstm_size=a.lstm_size,
            torso=torso,
        )

    return with_torso(make, a.torso, "agent.torso")


def vtrace_config(config: TrainConfig) -> VTraceConfig:
    a = config.agent
    return VTraceConfig(
        discount=a.discount,
        lambda_=a.trace_lambda,
        clip_rho=a.clip_rho,
        clip_pg_rho=a.clip_pg_rho,
        baseline_cost=a.baseline_cost,
        entropy_cost=a.entropy_cost,
        normalize_advantages=a.normalize_advantages,
        ppo_clip=a.ppo_clip,
    )


def training_key(key: jax.Array) -> jax.Array:
    """The seed `key`'s 64 bits as a Philox-4x32 key on a single-device jax (else `key`).

    Every random draw of the training step (actions, minibatch order, env resets) derives from
    it. On XLA:CPU each threefry call site compiles to a rolled loop; Philox is straight-line
    code that compiles several times faster (the step has about ten sites). The initial state
    keeps the seed's threefry: its program is compiled without optimisation, where the rolled
    loop is the cheaper one.
    With several devices the sharded programs keep threefry: jax 0.10's partitioner cannot
    lower Philox's `mulhi`. Choosing by the process's device count (not the mesh) keeps one
    stream for every mesh of a process, so 4 devices still reproduce 1.
    """
    if jax.device_count() > 1:
        return key
    try:
        return jax.random.wrap_key_data(jax.random.key_data(key), impl="philox4x32")
    except ValueError:  # a jax without Philox keys
        return key


def init_state(
    env: Environment, agent: ActorCriticAgent, learner: VTraceLearner, key: jax.Array
) -> TrainState:
    """A fresh train state from a seed key: new parameters, envs just reset."""
    param_key, env_key, key = jax.random.split(key, 3)
    params = agent.init(param_key)
    env_state, timestep = env.reset(env_key)
    num_envs = timestep.reward.shape[0]
    return TrainState(
        params=params,
        opt_state=learner.init(params),
        env_state=env_state,
        timestep=timestep,
        is_first=jnp.ones((num_envs,), bool),
        carry=agent.initial_carry(num_envs),
        key=training_key(key),
        iteration=jnp.zeros((), jnp.int32),
    )


def steps_per_iteration(config: TrainConfig) -> int:
    """Environment steps per iteration, counting action repeats."""
    per_env = config.r2d2.period if config.algorithm == "r2d2" else config.agent.unroll_length
    return config.env.num_envs * per_env * config.env.action_repeat


def num_chunks(config: TrainConfig) -> int:
    """Chunks that cover total_env_steps (rounded up to whole chunks)."""
    per_chunk = steps_per_iteration(config) * config.iterations_per_chunk
    return math.ceil(config.total_env_steps / per_chunk)


# XLA options for programs that run once (the initial state): on XLA:CPU they halve its
# compile time (no LLVM optimisation; the older fusion emitters, cheaper per fusion, which
# physics/xla_cpu.py also selects for the process unless XLA_FLAGS asks otherwise).
RUN_ONCE_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}


def run_once(jitted: Any, *args: Any) -> Any:
    """`jitted(*args)` for a program that runs once: compiled for compile speed, not run speed.

    Under a trace (e.g. `jax.eval_shape`) nothing compiles and the call is traced as usual.
    """
    if any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves(args)):
        return jitted(*args)
    try:
        compiled = jitted.lower(*args).compile(compiler_options=RUN_ONCE_OPTIONS)
    except jax.errors.JaxRuntimeError as error:  # an XLA without one of these options
        if "compile option" not in str(error):
            raise
        return jitted(*args)
    return compiled(*args)


def compile_chunk(
    run_chunk: Any, mesh: Mesh, state_sharding: Any, state: Any, env: Environment
) -> Any:
    """AOT-compile a trainer's `run_chunk(state) -> (state, metrics)` with the state donated,
    laid out by `state_sharding`, and the metrics replicated (`chunk_compiler_options(env)`)."""
    jitted = jax.jit(
        run_chunk,
        in_shardings=(state_sharding,),
        out_shardings=(state_sharding, NamedSharding(mesh, PartitionSpec())),
        donate_argnums=0,
        compiler_options=chunk_compiler_options(env),
    )
    return jitted.lower(state).compile()


def chunk_compiler_options(env: Environment) -> dict[str, bool] | None:
    """XLA options for a training chunk that steps `env` (wrapped or not).

    A chunk whose env runs no physics is a network with a small env around it, compiled as one
    (`NETWORK_COMPILE`: on the 2-core CPU, CartPole's V-trace chunk trains 161k env steps/s
    instead of 93k, Catch's 248k instead of 196k, CartPole's R2D2 6.0k instead of 5.1k, each
    compiling 0.4-1.1 s longer). One that runs physics keeps the process's settings: Ant's chunk
    ran as fast with either and compiled 2.3 s longer with the network's."""
    return None if env.unwrapped.steps_physics else NETWORK_COMPILE


@dataclass(frozen=True)
class FusedTrainer:
    """Builds the train state and runs chunks of fused iterations."""

    config: TrainConfig
    env: Environment
    agent: ActorCriticAgent
    learner: VTraceLearner
    schedule: Any
    mesh: Mesh
    state_sharding: Any

    @property
    def steps_per_chunk(self) -> int:
        return steps_per_iteration(self.config) * self.config.iterations_per_chunk

    @functools.cached_property
    def _jitted_init(self) -> Any:
        # One jit object, so that `jax.eval_shape(trainer.init, key)` and the compile that
        # follows share one trace.
        init = functools.partial(init_state, self.env, self.agent, self.learner)
        return jax.jit(init, out_shardings=self.state_sharding)

    def init(self, key: jax.Array) -> TrainState:
        """A fresh train state, placed on the mesh."""
        return run_once(self._jitted_init, key)

    def compile_chunk(self, state: TrainState) -> Any:
        """AOT-compile `run_chunk` for `state`'s shapes (donating the state)."""
        return compile_chunk(self.run_chunk, self.mesh, self.state_sharding, state, self.env)

    def run_chunk(self, state: TrainState) -> tuple[TrainState, ChunkMetrics]:
        """`iterations_per_chunk` fused iterations; pure, for jit."""
        k = self.config.iterations_per_chunk
        zero = jnp.zeros((), jnp.float32)
        totals = ChunkMetrics(
            episode_return_sum=zero,
            episode_length_sum=jnp.zeros((), jnp.int32),
            episodes=jnp.zeros((), jnp.int32),
            learning_rate=zero,
            first_nonfinite_iteration=jnp.full((), -1, jnp.int32),
            losses={name: zero for name in UpdateMetrics._fields if name != "finite"},
        )
        (state, totals), _ = jax.lax.scan(self._iteration, (state, totals), None, length=k)
        metrics = totals._replace(
            learning_rate=jnp.asarray(self.schedule(self._update_count(state.iteration)), float),
            losses={name: total / k for name, total in totals.losses.items()},
        )
        return state, metrics

    def _update_count(self, iteration: jax.Array) -> jax.Array:
        a = self.config.agent
        return iteration * a.num_epochs * a.num_minibatches

    def _iteration(
        self, carry: tuple[TrainState, ChunkMetrics], _: None
    ) -> tuple[tuple[TrainState, ChunkMetrics], None]:
        """One rollout and update; adds its statistics to the chunk's running totals (sums
        in the loop carry: a smaller program than per-iteration outputs reduced afterwards)."""
        state, totals = carry
        initial_carry = state.carry
        # One split per iteration for all its randomness (each PRNG call site costs compile time).
        keys = jax.random.split(state.key, self.config.agent.unroll_length + 2)
        key, update_key, act_keys = keys[0], keys[1], keys[2:]
        state, transitions = self._rollout(state, act_keys)
        traj = Trajectory(
            observation=transitions.observation,
            next_observation=transitions.next_observation,
            is_first=transitions.is_first,
            action=transitions.action,
            behaviour_log_prob=transitions.behaviour_log_prob,
            reward=transitions.reward * self.config.agent.reward_scale,
            terminated=transitions.terminated,
            truncated=transitions.truncated,
            initial_carry=initial_carry,
        )
        params, opt_state, update = self.learner.update(
            state.params, state.opt_state, traj, update_key
        )
        done = jnp.logical_or(transitions.terminated, transitions.truncated)
        first_bad = totals.first_nonfinite_iteration
        totals = totals._replace(
            episode_return_sum=totals.episode_return_sum
            + jnp.sum(jnp.where(done, transitions.episode_return, 0.0)),
            episode_length_sum=totals.episode_length_sum
            + jnp.sum(jnp.where(done, transitions.episode_length, 0), dtype=jnp.int32),
            episodes=totals.episodes + jnp.sum(done, dtype=jnp.int32),
            first_nonfinite_iteration=jnp.where(
                (first_bad < 0) & ~update.finite, state.iteration, first_bad
            ),
            losses={name: total + getattr(update, name) for name, total in totals.losses.items()},
        )
        state = state.replace(
            params=params, opt_state=opt_state, key=key, iteration=state.iteration + 1
        )
        return (state, totals), None

    def _rollout(self, state: TrainState, act_keys: jax.Array) -> tuple[TrainState, _Transition]:
        params = state.params

        def step(state: TrainState, act_key: jax.Array) -> tuple[TrainState, _Transition]:
            carry, out = self.agent.act(
                params, state.carry, state.timestep.observation, state.is_first, act_key
            )
            env_state, timestep = self.env.step(state.env_state, out.env_action)
            transition = _Transition(
                observation=state.timestep.observation,
                next_observation=timestep.info["final_observation"],
                is_first=state.is_first,
                action=out.action,
                behaviour_log_prob=out.log_prob,
                reward=timestep.reward,
                terminated=timestep.terminated,
                truncated=timestep.truncated,
                episode_return=timestep.info["episode_return"],
                episode_length=timestep.info["episode_length"],
            )
            state = state.replace(
                env_state=env_state,
                timestep=timestep,
                is_first=timestep.done,
                carry=carry,
            )
            return state, transition

        return jax.lax.scan(step, state, act_keys)


def env_batch_axes(config: TrainConfig) -> Any:
    """Per env-state leaf: True where the leading axis is the env axis.

    Found by comparing the state's shapes at two batch sizes, so wrappers that keep shared
    (unbatched) statistics, like observation normalisation, are recognised without special cases.
    """

    def shapes(num_envs: int) -> Any:
        env = make_env(config, num_envs)
        return jax.eval_shape(env.reset, jax.random.PRNGKey(0))

    one, two = shapes(config.env.num_envs), shapes(2 * config.env.num_envs)
    return jax.tree.map(lambda a, b: a.shape[:1] != b.shape[:1], one, two)


def make_env(config: TrainConfig, num_envs: int) -> Environment:
    """The training env stack of `config` with `num_envs` envs; an env name that is neither
    registered nor an importable entry point is a ConfigError."""
    e = config.env
    try:
        return make_training_env(
            e.name,
            num_envs,
            max_steps=e.max_steps,
            action_repeat=e.action_repeat,
            normalize_observation=e.normalize_observation,
        )
    except ValueError as error:
        raise ConfigError(f"env.name: {error}") from None


def make_mesh(num_envs: int, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh named "envs" over `devices` (default: every device of every host)."""
    devices = np.asarray(jax.devices() if devices is None else devices)
    if num_envs % devices.size:
        raise ConfigError(
            f"env.num_envs={num_envs} must divide by the number of devices ({devices.size})"
        )
    return Mesh(devices, ("envs",))


def make_fused_trainer(
    config: TrainConfig, devices: Sequence[jax.Device] | None = None
) -> FusedTrainer:
    """Assemble env, agent, optimiser and shardings for `config` on `devices` (default all)."""
    if config.algorithm == "r2d2":  # its own state and step (replay), same host contract
        from accelrl.fused_r2d2 import make_r2d2_trainer

        return make_r2d2_trainer(config, devices)
    a = config.agent
    mesh = make_mesh(config.env.num_envs, devices)
    per_device = config.env.num_envs // mesh.size
    if per_device % a.num_minibatches:
        raise ConfigError(
            f"envs per device ({per_device}) must divide by agent.num_minibatches "
            f"({a.num_minibatches})"
        )
    env = make_env(config, config.env.num_envs)
    agent = make_agent(config, env)
    total_iterations = num_chunks(config) * config.iterations_per_chunk
    optimizer, schedule = make_optimizer(
        learning_rate=a.learning_rate,
        max_grad_norm=a.max_grad_norm,
        schedule=a.lr_schedule,
        total_updates=total_iterations * a.num_epochs * a.num_minibatches,
    )
    learner = VTraceLearner(
        agent, optimizer, vtrace_config(config), a.num_epochs, a.num_minibatches
    )

    sharded = NamedSharding(mesh, PartitionSpec("envs"))
    replicated = NamedSharding(mesh, PartitionSpec())
    pick = lambda is_batched: sharded if is_batched else replicated
    env_part = jax.tree.map(pick, env_batch_axes(config))
    # A prefix of the state's tree (one sharding per field): no trace of the init needed.
    state_sharding = TrainState(
        params=replicated,
        opt_state=replicated,
        env_state=env_part[0],
        timestep=env_part[1],
        is_first=sharded,
        carry=sharded,
        key=replicated,
        iteration=replicated,
    )
    return FusedTrainer(config, env, agent, learner, schedule, mesh, state_sharding)
