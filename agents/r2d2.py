"""R2D2: recurrent Q-learning from replayed sequences (Kapturowski et al., 2019).

Pure functions of flax params on plain arrays, shared by the fused loop and the actor bridge:

- `R2D2Network`: MLP or convolutional torso (agents/torsos.py) -> [torso, one-hot previous
  action, previous reward] -> LSTM -> dueling heads. `recurrent=False` is the ablation with
  every path for memory removed: the LSTM becomes a dense layer of the same width, and the
  previous action/reward inputs are dropped (a feed-forward agent could otherwise carry
  information in its own actions).
- `R2D2Agent`: `init`, `initial_carry`, `step`, epsilon-greedy `act`, `unroll` over `[T, B]`.
- `r2d2_loss`: burn-in from the stored recurrent state with no gradient through it, n-step
  double-Q targets with value rescaling (rlax's transformed n-step Q-learning with the signed
  hyperbolic pair), termination stops bootstrapping, truncation bootstraps from the final
  observation; returns the per-sequence priorities eta*max|td| + (1-eta)*mean|td|.
- `R2D2Learner.update`: one optimiser step on a batch of sequences and the periodic copy of
  the online parameters into the target network.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax
from jax.flatten_util import ravel_pytree

from agents.networks import MLP, _dense, lstm_over_time
from agents.torsos import Torso, is_mlp, torso_features

Carry = Any  # the flax LSTM (c, h) tuple of [B, lstm_size]


class R2D2Network(nn.Module):
    """Q-values over `[T, B]` inputs; the carry is zeroed where `is_first`. Only the LSTM
    runs step by step (`lstm_over_time`); one step (acting) is T = 1."""

    num_actions: int
    torso_sizes: Sequence[int] = (512,)
    lstm_size: int = 512
    head_size: int = 512
    recurrent: bool = True
    torso: Torso = "mlp"  # or a convolutional one (uint8 pixels scaled inside) or the user's

    def initial_carry(self, batch_size: int) -> Carry:
        zeros = jnp.zeros((batch_size, self.lstm_size), jnp.float32)
        return (zeros, zeros)

    @nn.compact
    def __call__(
        self,
        carry: Carry,
        obs: chex.Array,
        prev_action: chex.Array,
        prev_reward: chex.Array,
        is_first: chex.Array,
    ) -> tuple[Carry, chex.Array, Carry]:
        """`(final carry, q [T, B, A], carry after each step [T, B, lstm_size] pair)`."""
        t, batch = is_first.shape
        chex.assert_shape([prev_action, prev_reward], (t, batch))
        flat_obs = obs.reshape(t * batch, *obs.shape[2:])
        if is_mlp(self.torso):
            flat = flat_obs.reshape(t * batch, -1).astype(jnp.float32)
            x = MLP(self.torso_sizes, "relu", name="torso")(flat)
        else:
            x = torso_features(self.torso, flat_obs)
        x = x.reshape(t, batch, -1)
        if self.recurrent:
            keep = jnp.logical_not(is_first).astype(jnp.float32)[..., None]
            one_hot = jax.nn.one_hot(prev_action, self.num_actions, dtype=jnp.float32) * keep
            reward = prev_reward.astype(jnp.float32)[..., None] * keep
            x = jnp.concatenate([x, one_hot, reward], axis=-1)
            cell = nn.OptimizedLSTMCell(self.lstm_size, name="lstm")
            final, x, carries = lstm_over_time(cell, carry, x, is_first)
        else:
            # no memory: the carry only passes through, zeroed from each episode's start on
            alive = jnp.cumprod(jnp.logical_not(is_first), axis=0)[..., None]
            carries = jax.tree.map(lambda c: c[None] * alive.astype(c.dtype), carry)
            final = jax.tree.map(lambda c: c[-1], carries)
            x = nn.relu(_dense(self.lstm_size, np.sqrt(2.0), name="core")(x))
        value = _dense(self.head_size, np.sqrt(2.0), name="value_hidden")(x)
        value = _dense(1, 1.0, name="value")(nn.relu(value))
        advantage = _dense(self.head_size, np.sqrt(2.0), name="advantage_hidden")(x)
        advantage = _dense(self.num_actions, 1.0, name="advantage")(nn.relu(advantage))
        q = value + advantage - advantage.mean(axis=-1, keepdims=True)
        return final, q, carries


@dataclasses.dataclass(frozen=True)
class R2D2Agent:
    """Recurrent dueling Q-network over plain sizes; hashable (a static jit argument)."""

    obs_shape: tuple[int, ...]
    num_actions: int
    torso_sizes: Sequence[int] = (512,)
    lstm_size: int = 512
    head_size: int = 512
    recurrent: bool = True
    torso: Torso = "mlp"
    network: R2D2Network = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "obs_shape", tuple(int(d) for d in self.obs_shape))
        object.__setattr__(self, "torso_sizes", tuple(int(h) for h in self.torso_sizes))
        network = R2D2Network(
            self.num_actions,
            self.torso_sizes,
            self.lstm_size,
            self.head_size,
            self.recurrent,
            self.torso,
        )
        object.__setattr__(self, "network", network)

    def init(self, key: chex.PRNGKey) -> Any:
        """Initial params pytree."""
        zeros = jnp.zeros((1, 1), jnp.float32)
        obs = jnp.zeros((1, 1, *self.obs_shape), jnp.float32)
        first = jnp.ones((1, 1), bool)
        return self.network.init(
            key, self.initial_carry(1), obs, zeros.astype(jnp.int32), zeros, first
        )

    def initial_carry(self, batch_size: int) -> Carry:
        return self.network.initial_carry(batch_size)

    def step(
        self,
        params: Any,
        carry: Carry,
        obs: chex.Array,
        prev_action: chex.Array,
        prev_reward: chex.Array,
        is_first: chex.Array,
    ) -> tuple[Carry, chex.Array]:
        """One core step for a batch: `(carry, q [B, A])`."""
        one = lambda x: x[None]
        inputs = (one(obs), one(prev_action), one(prev_reward), one(is_first))
        carry, q, _ = self.network.apply(params, carry, *inputs)
        return carry, q[0]

    def act(
        self,
        params: Any,
        carry: Carry,
        obs: chex.Array,
        prev_action: chex.Array,
        prev_reward: chex.Array,
        is_first: chex.Array,
        epsilon: chex.Array,
        key: chex.PRNGKey,
    ) -> tuple[Carry, chex.Array, chex.Array]:
        """Epsilon-greedy actions (per-env `epsilon` [B]; 0 is greedy): `(carry, action, q)`."""
        carry, q = self.step(params, carry, obs, prev_action, prev_reward, is_first)
        explore_key, action_key = jax.random.split(key)
        batch = q.shape[0]
        random_action = jax.random.randint(action_key, (batch,), 0, self.num_actions)
        explore = jax.random.uniform(explore_key, (batch,)) < epsilon
        action = jnp.where(explore, random_action, jnp.argmax(q, axis=-1)).astype(jnp.int32)
        return carry, action, q

    def unroll(
        self,
        params: Any,
        carry: Carry,
        obs: chex.Array,
        prev_action: chex.Array,
        prev_reward: chex.Array,
        is_first: chex.Array,
    ) -> tuple[Carry, chex.Array, Carry]:
        """Over `[T, B]` inputs: `(final carry, q [T, B, A], carry after each step)`."""
        return self.network.apply(params, carry, obs, prev_action, prev_reward, is_first)


def epsilons(num_envs: int, base: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """Ape-X per-actor exploration: eps_i = base^(1 + alpha * i / (N - 1)), i = 0..N-1."""
    if num_envs == 1:
        return np.asarray([base], np.float32)
    i = np.arange(num_envs, dtype=np.float64)
    return (base ** (1.0 + alpha * i / (num_envs - 1))).astype(np.float32)


class Sequences(NamedTuple):
    """Stored sequences, batch-major `[S, L, ...]` (L = burn-in + trace length).

    Step t is the transition observation[t] --action[t]--> next_observation[t] (the final
    observation when the episode ended there), with reward[t]; prev_action/prev_reward are the
    network's extra inputs at t (ignored where is_first). `start_carry` is the recurrent state
    the actor had before observation[0].
    """

    observation: chex.Array
    next_observation: chex.Array
    is_first: chex.Array
    prev_action: chex.Array
    prev_reward: chex.Array
    action: chex.Array
    reward: chex.Array
    terminated: chex.Array
    truncated: chex.Array
    start_carry: Carry  # [S, lstm_size] pair


@dataclasses.dataclass(frozen=True)
class R2D2LossConfig:
    """Hyperparameters of the R2D2 loss (accelrl.config.R2D2Config documents the defaults)."""

    discount: float = 0.997
    n_step: int = 5
    burn_in: int = 40
    priority_eta: float = 0.9
    value_rescaling_eps: float = 1e-3


class LossOutput(NamedTuple):
    priorities: chex.Array  # [S] eta * max|td| + (1 - eta) * mean|td| over the trained part
    q_mean: chex.Array
    td_abs: chex.Array


def signed_hyperbolic_pair(eps: float) -> rlax.TxPair:
    """h(x) = sign(x)(sqrt(|x|+1)-1) + eps*x and its inverse."""
    return rlax.TxPair(
        functools.partial(rlax.signed_hyperbolic, eps=eps),
        functools.partial(rlax.signed_parabolic, eps=eps),
    )


def td_errors(
    q: chex.Array,
    action: chex.Array,
    next_q_target: chex.Array,
    next_q_online: chex.Array,
    reward: chex.Array,
    terminated: chex.Array,
    truncated: chex.Array,
    config: R2D2LossConfig,
) -> chex.Array:
    """Transformed n-step double-Q TD errors of one sequence, all inputs `[T, ...]`.

    `next_q_*[t]` are the Q-values of next_observation[t] (the final observation where the
    episode ended). An episode end stops the n-step sum (discount 0); a truncation adds the
    discounted bootstrap value of its final observation to its reward, so the target there is
    r + gamma * Q_target(final, argmax Q_online(final)), and a termination adds nothing.
    """
    tx = signed_hyperbolic_pair(config.value_rescaling_eps)
    greedy = jnp.argmax(next_q_online, axis=-1).astype(jnp.int32)
    bootstrap = tx.apply_inv(rlax.batched_index(next_q_target, greedy))
    done = jnp.logical_or(terminated, truncated)
    reward = reward + jnp.where(truncated, config.discount * bootstrap, 0.0)
    discount = jnp.where(done, 0.0, config.discount).astype(jnp.float32)
    # rlax pads with default-typed zeros: float64 under jax_enable_x64, and the loss with it
    td = rlax.transformed_n_step_q_learning(
        q,
        action.astype(jnp.int32),
        next_q_target,
        greedy,
        reward.astype(jnp.float32),
        discount,
        config.n_step,
        stop_target_gradients=True,
        tx_pair=tx,
    )
    return td.astype(q.dtype)


def r2d2_loss(
    agent: R2D2Agent,
    params: Any,
    target_params: Any,
    batch: Sequences,
    weights: chex.Array,
    config: R2D2LossConfig,
) -> tuple[chex.Array, LossOutput]:
    """Importance-weighted mean of 0.5 * td^2 over the sequences' trained (post burn-in) steps."""
    tm = lambda x: jnp.swapaxes(x, 0, 1)  # [S, L, ...] -> [L, S, ...]
    obs, next_obs = tm(batch.observation), tm(batch.next_observation)
    first, prev_a, prev_r = tm(batch.is_first), tm(batch.prev_action), tm(batch.prev_reward)
    action, reward = tm(batch.action), tm(batch.reward)
    b = config.burn_in
    inputs = lambda s: (obs[s], prev_a[s], prev_r[s], first[s])
    burn, train = slice(0, b), slice(b, None)

    carry = batch.start_carry
    if b > 0:
        carry, _, _ = agent.unroll(params, carry, *inputs(burn))
        carry = jax.lax.stop_gradient(carry)
    _, q, carries = agent.unroll(params, carry, *inputs(train))
    _, _, target_carries = agent.unroll(target_params, batch.start_carry, *inputs(slice(None)))
    target_carries = jax.tree.map(lambda c: c[b:], target_carries)

    # Q of next_observation[t]: one more core step from the carry after step t, with action[t]
    # and reward[t] as the previous ones, batched over [T * S] (no scan needed).
    t, s = action[train].shape

    def next_q(p: Any, carries: Carry) -> chex.Array:
        flat = lambda x: x.reshape(t * s, *x.shape[2:])
        _, out = agent.step(
            p,
            jax.tree.map(flat, carries),
            flat(next_obs[train]),
            flat(action[train]),
            flat(reward[train]),
            jnp.zeros((t * s,), bool),
        )
        return out.reshape(t, s, -1)

    next_q_online = next_q(jax.lax.stop_gradient(params), jax.lax.stop_gradient(carries))
    next_q_target = next_q(target_params, target_carries)

    td = jax.vmap(lambda *xs: td_errors(*xs, config), in_axes=1, out_axes=1)(
        q,
        action[train],
        next_q_target,
        next_q_online,
        reward[train],
        tm(batch.terminated)[train],
        tm(batch.truncated)[train],
    )  # [T, S]
    loss = jnp.mean(weights * jnp.mean(0.5 * jnp.square(td), axis=0))
    abs_td = jax.lax.stop_gradient(jnp.abs(td))
    eta = config.priority_eta
    priorities = eta * abs_td.max(axis=0) + (1.0 - eta) * abs_td.mean(axis=0)
    return loss, LossOutput(priorities, jnp.mean(q), jnp.mean(abs_td))


class R2D2Metrics(NamedTuple):
    loss: jax.Array
    q_mean: jax.Array
    td_abs: jax.Array
    grad_norm: jax.Array
    finite: jax.Array  # bool: loss and gradients were finite (else the step was skipped)


@dataclasses.dataclass(frozen=True)
class R2D2Learner:
    """One R2D2 gradient step; the optimiser runs on the flattened parameter vector."""

    agent: R2D2Agent
    optimizer: optax.GradientTransformation
    config: R2D2LossConfig
    target_update_period: int

    def init(self, params: Any) -> Any:
        """Optimiser state for `params`."""
        return self.optimizer.init(ravel_pytree(params)[0])

    def update(
        self,
        params: Any,
        target_params: Any,
        opt_state: Any,
        update_count: jax.Array,
        batch: Sequences,
        weights: jax.Array,
    ) -> tuple[Any, Any, Any, jax.Array, R2D2Metrics]:
        """Returns `(params, target_params, opt_state, priorities [S], metrics)`.

        `update_count` counts the updates done before this one; the target network takes the
        online parameters after every `target_update_period`-th update. A non-finite step
        leaves everything unchanged (and the priorities are then not meaningful).
        """
        flat, unravel = ravel_pytree(params)
        loss_fn = lambda f: r2d2_loss(
            self.agent, unravel(f), target_params, batch, weights, self.config
        )
        (loss, out), grads = jax.value_and_grad(loss_fn, has_aux=True)(flat)
        finite = jnp.logical_and(jnp.isfinite(loss), jnp.all(jnp.isfinite(grads)))
        updates, new_opt_state = self.optimizer.update(grads, opt_state, flat)
        new_flat = optax.apply_updates(flat, updates)
        keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(finite, n, o), new, old)
        new_flat, opt_state = keep(new_flat, flat), keep(new_opt_state, opt_state)
        params = unravel(new_flat)
        copy = jnp.logical_and(finite, (update_count + 1) % self.target_update_period == 0)
        target_params = keep_if(copy, params, target_params)
        metrics = R2D2Metrics(loss, out.q_mean, out.td_abs, jnp.linalg.norm(grads), finite)
        return params, target_params, opt_state, out.priorities, metrics


def keep_if(pred: jax.Array, new: Any, old: Any) -> Any:
    """Leafwise `where(pred, new, old)` for a scalar predicate."""
    return jax.tree.map(lambda n, o: jnp.where(pred, n, o), new, old)
