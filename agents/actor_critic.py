"""Actor-critic agent: acting on batches and unrolling over trajectories.

The agent takes plain sizes (observation shape, number of actions, choices per action component
or action bounds), owns the network, and exposes pure, jittable functions of a flax params
pytree. It is hashable, so it can be a static argument of jit.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from agents.distributions import Categorical, ClippedGaussian, MultiCategorical, TanhGaussian
from agents.networks import ActorCritic, Carry
from agents.torsos import Torso


@dataclasses.dataclass(frozen=True)
class DiscreteActions:
    """`num_actions` integer actions 0..n-1."""

    num_actions: int

    def __post_init__(self) -> None:
        if self.num_actions < 1:
            raise ValueError(f"num_actions must be >= 1, got {self.num_actions}")


@dataclasses.dataclass(frozen=True)
class MultiDiscreteActions:
    """An integer vector action: component i in 0..nvec[i]-1 (gymnasium's MultiDiscrete)."""

    nvec: tuple[int, ...]

    def __post_init__(self) -> None:
        nvec = tuple(int(n) for n in np.ravel(self.nvec))
        if not nvec or min(nvec) < 1:
            raise ValueError(f"nvec must be non-empty with every entry >= 1, got {nvec}")
        object.__setattr__(self, "nvec", nvec)


def _box_bounds(actions: Any) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """`actions.low` and `.high` as float tuples, checked: non-empty, equal sizes, low < high."""
    low = tuple(float(v) for v in np.ravel(actions.low))
    high = tuple(float(v) for v in np.ravel(actions.high))
    if len(low) != len(high) or not low:
        raise ValueError(f"low and high must be non-empty and of equal size: {low}, {high}")
    if not all(a < b for a, b in zip(low, high, strict=True)):
        raise ValueError(f"bounds must have low < high: {low}, {high}")
    object.__setattr__(actions, "low", low)
    object.__setattr__(actions, "high", high)
    return low, high


@dataclasses.dataclass(frozen=True)
class BoundedActions:
    """Continuous actions in the box `[low, high]` (finite, low < high); stored as float tuples."""

    low: tuple[float, ...]
    high: tuple[float, ...]

    def __post_init__(self) -> None:
        low, high = _box_bounds(self)
        if not all(math.isfinite(v) for v in low + high):
            raise ValueError(f"bounds must be finite with low < high: {low}, {high}")


@dataclasses.dataclass(frozen=True)
class UnboundedActions:
    """Continuous actions in a box with at least one infinite bound (low < high), e.g.
    gymnasium's Box(-inf, inf): a Gaussian policy, its samples clipped to the finite bounds."""

    low: tuple[float, ...]
    high: tuple[float, ...]

    def __post_init__(self) -> None:
        low, high = _box_bounds(self)
        if all(math.isfinite(v) for v in low + high):
            raise ValueError(f"every bound is finite (use BoundedActions): {low}, {high}")


Actions = DiscreteActions | MultiDiscreteActions | BoundedActions | UnboundedActions
"""An agent's action space."""


def box_actions(low: Any, high: Any) -> BoundedActions | UnboundedActions:
    """The actions of a box: bounded where every bound is finite, else unbounded."""
    finite = bool(np.all(np.isfinite(low)) and np.all(np.isfinite(high)))
    return BoundedActions(low, high) if finite else UnboundedActions(low, high)


class ActOutput(NamedTuple):
    """One acting step for a batch of B environments."""

    action: chex.Array  # raw action [B, ...], stored for learning
    env_action: chex.Array  # what the environment receives [B, ...]
    log_prob: chex.Array  # [B] log-probability of `action` under the acting policy
    value: chex.Array  # [B]


class UnrollOutput(NamedTuple):
    """Network outputs over a time-major trajectory."""

    dist_params: Any  # [T, B, ...] pytree, see ActorCritic
    values: chex.Array  # [T, B] V(observation[t])
    next_values: chex.Array  # [T, B] V(next_observation[t]) with the carry after observation[t]


@dataclasses.dataclass(frozen=True)
class ActorCriticAgent:
    """Actor-critic with a Categorical, MultiCategorical, TanhGaussian or ClippedGaussian
    policy (by `actions`) and an optional LSTM core."""

    obs_shape: tuple[int, ...]
    actions: Actions
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    lstm_size: int | None = None
    torso: Torso = "mlp"
    network: ActorCritic = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "obs_shape", tuple(int(d) for d in self.obs_shape))
        object.__setattr__(self, "hidden_sizes", tuple(int(h) for h in self.hidden_sizes))
        discrete = isinstance(self.actions, DiscreteActions | MultiDiscreteActions)
        if isinstance(self.actions, DiscreteActions):
            action_dim = self.actions.num_actions
        elif isinstance(self.actions, MultiDiscreteActions):
            action_dim = sum(self.actions.nvec)
        else:
            action_dim = len(self.actions.low)
        network = ActorCritic(
            action_dim=action_dim,
            discrete=discrete,
            hidden_sizes=self.hidden_sizes,
            activation=self.activation,
            lstm_size=self.lstm_size,
            torso=self.torso,
        )
        object.__setattr__(self, "network", network)

    def init(self, key: chex.PRNGKey) -> Any:
        """Initial params pytree."""
        obs = jnp.zeros((1, 1, *self.obs_shape), jnp.float32)
        is_first = jnp.ones((1, 1), bool)
        return self.network.init(key, self.initial_carry(1), obs, is_first)

    def initial_carry(self, batch_size: int) -> Carry:
        """Zero recurrent state for `batch_size` environments (`()` without an LSTM)."""
        return self.network.initial_carry(batch_size)

    def distribution(
        self, dist_params: Any
    ) -> Categorical | MultiCategorical | TanhGaussian | ClippedGaussian:
        """Policy distribution from network outputs of any leading shape."""
        if isinstance(self.actions, DiscreteActions):
            return Categorical(dist_params)
        if isinstance(self.actions, MultiDiscreteActions):
            return MultiCategorical.from_flat(dist_params, self.actions.nvec)
        loc, log_scale = dist_params
        low = jnp.asarray(self.actions.low, jnp.float32)
        high = jnp.asarray(self.actions.high, jnp.float32)
        if isinstance(self.actions, UnboundedActions):
            return ClippedGaussian(loc, log_scale, low, high)
        return TanhGaussian(loc, log_scale, low, high)

    def act(
        self,
        params: Any,
        carry: Carry,
        obs: chex.Array,
        is_first: chex.Array,
        key: chex.PRNGKey,
        deterministic: bool = False,
    ) -> tuple[Carry, ActOutput]:
        """One step for a batch: samples (or takes the mode when `deterministic`)."""
        chex.assert_shape(obs, (None, *self.obs_shape))
        carry, outputs, _ = self.network.apply(params, carry, obs[None], is_first[None])
        dist_params, value = jax.tree.map(lambda x: x[0], outputs)
        dist = self.distribution(dist_params)
        action = dist.mode() if deterministic else dist.sample(key)
        out = ActOutput(action, dist.to_env(action), dist.log_prob(action), value)
        return carry, out

    def unroll(
        self,
        params: Any,
        carry0: Carry,
        observation: chex.Array,
        next_observation: chex.Array,
        is_first: chex.Array,
    ) -> UnrollOutput:
        """Network outputs over `[T, B]` time-major inputs, starting from `carry0`.

        V(next_observation[t]) comes from the carry after step t: with an LSTM, one more core
        step from each of those carries, all `T * B` at once after the scan, whose carry is
        discarded. `next_values` are bootstrap targets and carry no gradient (so no backward
        pass is spent on them).
        """
        chex.assert_shape(observation, (None, None, *self.obs_shape))
        chex.assert_equal_shape([observation, next_observation])
        chex.assert_shape(is_first, observation.shape[:2])
        t, b = is_first.shape
        _, (dist_params, values), carries = self.network.apply(
            params, carry0, observation, is_first
        )
        # the T * B next observations as one time step, each after its own carry
        flat = lambda x: x.reshape(1, t * b, *x.shape[2:])
        carries = jax.tree.map(lambda c: c.reshape(t * b, -1), carries)
        not_first = jnp.zeros((1, t * b), bool)
        _, (_, next_values), _ = self.network.apply(
            params, carries, flat(next_observation), not_first
        )
        next_values = jax.lax.stop_gradient(next_values.reshape(t, b))
        return UnrollOutput(dist_params, values, next_values)
