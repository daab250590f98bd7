"""R2D2 learning shared by the fused trainer and the bridge learner.

The agent built from the config, the learner and its optimiser, the replay with one shard per
device, and one learner update (sample from every shard, importance weights, gradient step,
priorities written back) as a pure function for jit. The fused step calls `learner_update`
inside its scan; the bridge learner jits it on its own and feeds the replay from actors.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from accelrl import replay
from accelrl.config import TrainConfig
from accelrl.torsos import with_torso
from agents import make_optimizer
from agents.r2d2 import (
    R2D2Agent,
    R2D2Learner,
    R2D2LossConfig,
    R2D2Metrics,
    Sequences,
    keep_if,
)
from agents.torsos import Torso


class LearnState(NamedTuple):
    """What a learner update reads and writes."""

    params: Any
    target_params: Any
    opt_state: Any
    replay: replay.ReplayState  # leading shard axis [D, ...] on every leaf
    updates: jax.Array  # learner updates applied (int32; masked ones not counted)


def make_r2d2_agent(config: TrainConfig, obs_shape: tuple[int, ...], num_actions: int) -> R2D2Agent:
    """The Q-network for these observations and actions, shaped by `config.r2d2`."""
    r = config.r2d2

    def make(torso: Torso) -> R2D2Agent:
        return R2D2Agent(
            obs_shape=tuple(obs_shape),
            num_actions=num_actions,
            torso_sizes=tuple(r.torso_sizes),
            lstm_size=r.lstm_size,
            head_size=r.head_size,
            recurrent=r.recurrent,
            torso=torso,
        )

    return with_torso(make, r.torso, "r2d2.torso")


def loss_config(config: TrainConfig) -> R2D2LossConfig:
    r = config.r2d2
    return R2D2LossConfig(
        discount=r.discount,
        n_step=r.n_step,
        burn_in=r.burn_in,
        priority_eta=r.priority_eta,
        value_rescaling_eps=r.value_rescaling_eps,
    )


def make_r2d2_learner(
    config: TrainConfig, agent: R2D2Agent, total_updates: int
) -> tuple[R2D2Learner, Any]:
    """The learner and its learning-rate schedule (update count -> rate)."""
    r = config.r2d2
    optimizer, schedule = make_optimizer(
        learning_rate=r.learning_rate,
        max_grad_norm=r.max_grad_norm,
        schedule=r.lr_schedule,
        total_updates=max(total_updates, 1),
        adam_eps=r.adam_eps,
    )
    return R2D2Learner(agent, optimizer, loss_config(config), r.target_update_period), schedule


def zero_sequences(
    agent: R2D2Agent, obs_dtype: Any, shape: tuple[int, ...], carry_shape: tuple[int, ...]
) -> Sequences:
    """Zero `Sequences` with leading axes `shape` on every step field and `carry_shape` on the
    recurrent state (e.g. [B, L] and [B, L] for a window of every step's carry, [L] and () for
    one replay item)."""
    zeros = lambda dtype, *rest: jnp.zeros((*shape, *rest), dtype)
    carry = jax.tree.map(
        lambda c: jnp.zeros((*carry_shape, *c.shape[1:]), c.dtype), agent.initial_carry(1)
    )
    return Sequences(
        observation=zeros(obs_dtype, *agent.obs_shape),
        next_observation=zeros(obs_dtype, *agent.obs_shape),
        is_first=zeros(bool),
        prev_action=zeros(jnp.int32),
        prev_reward=zeros(jnp.float32),
        action=zeros(jnp.int32),
        reward=zeros(jnp.float32),
        terminated=zeros(bool),
        truncated=zeros(bool),
        start_carry=carry,
    )


def init_replay(example_item: Any, capacity: int, shards: int) -> replay.ReplayState:
    """An empty replay of `capacity` items in total, split into `shards` equal shards.

    One program even when called eagerly (the bridge learner does): op by op, the broadcast
    to the shard axis copied the whole replay, so starting needed twice its memory (an R2D2
    Pong replay of 13.6 GB was killed for lack of memory on a 24 GB host)."""

    def build(example: Any) -> replay.ReplayState:
        shard = replay.init(example, capacity // shards)
        return jax.tree.map(lambda x: jnp.broadcast_to(x, (shards, *x.shape)), shard)

    return jax.jit(build)(example_item)


def insert(
    buffer: replay.ReplayState, items: Any, valid: jax.Array, alpha: float
) -> replay.ReplayState:
    """Insert `items` [N, ...] (`valid` [N]; N divides by the shards D): the d-th block of
    N / D goes into shard d."""
    shards = jax.tree.leaves(buffer)[0].shape[0]
    by_shard = lambda x: x.reshape(shards, x.shape[0] // shards, *x.shape[1:])
    insert_shard = jax.vmap(replay.insert, in_axes=(0, 0, 0, None))
    return insert_shard(buffer, jax.tree.map(by_shard, items), by_shard(valid), alpha)


def learner_update(
    learner: R2D2Learner,
    config: TrainConfig,
    state: LearnState,
    key: jax.Array,
    ready: jax.Array,
) -> tuple[LearnState, R2D2Metrics]:
    """One update: `batch_size / D` sequences from each shard, importance weights
    (N P(i))^-beta / max with the global P(i) = P_shard(i) / D, a gradient step, priorities
    written back. Nothing changes where `ready` is false or the step was not finite."""
    r = config.r2d2
    buffer = state.replay
    shards = jax.tree.leaves(buffer)[0].shape[0]
    per_shard = r.batch_size // shards
    sample = jax.vmap(replay.sample, in_axes=(0, 0, None))
    index, probability, items = sample(buffer, jax.random.split(key, shards), per_shard)
    batch = jax.tree.map(lambda x: x.reshape(r.batch_size, *x.shape[2:]), items)
    probability = probability.reshape(r.batch_size) / shards
    stored = jnp.maximum(jnp.sum(buffer.size), 1).astype(jnp.float32)
    weights = jnp.where(
        probability > 0,
        (stored * jnp.maximum(probability, 1e-30)) ** -r.importance_exponent,
        0.0,
    )
    weights = weights / jnp.maximum(jnp.max(weights), 1e-30)
    new_params, new_target, new_opt, priorities, metrics = learner.update(
        state.params, state.target_params, state.opt_state, state.updates, batch, weights
    )
    apply = jnp.logical_and(ready, metrics.finite)
    set_priorities = jax.vmap(replay.update_priorities, in_axes=(0, 0, 0, None))
    new_buffer = set_priorities(
        buffer, index, priorities.reshape(shards, per_shard), r.priority_exponent
    )
    # Only the priorities changed in the replay: select those, never the stored items.
    tree, max_priority = keep_if(
        apply,
        (new_buffer.tree, new_buffer.max_priority),
        (buffer.tree, buffer.max_priority),
    )
    buffer = buffer._replace(tree=tree, max_priority=max_priority)
    params, target, opt_state, updates = keep_if(
        apply,
        (new_params, new_target, new_opt, state.updates + 1),
        (state.params, state.target_params, state.opt_state, state.updates),
    )
    return LearnState(params, target, opt_state, buffer, updates), metrics
