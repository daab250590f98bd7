"""Actor-critic network: MLP or convolutional torso, optional LSTM core, policy and value heads;
and `lstm_over_time`, the recurrence both agents scan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from agents.torsos import Torso, is_mlp, torso_features

ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "elu": nn.elu, "silu": nn.silu}

# The carry is `()` without an LSTM and the flax `(c, h)` tuple of `[B, lstm_size]` with one.
Carry = Any


def _reset_and_step(
    cell: nn.OptimizedLSTMCell, carry: Carry, inputs: tuple[chex.Array, chex.Array]
) -> tuple[Carry, tuple[chex.Array, Carry]]:
    """One LSTM step of the scan: the carry zeroed where an episode starts, then the cell."""
    x, is_first = inputs
    carry = jax.tree.map(lambda c: jnp.where(is_first[:, None], jnp.zeros_like(c), c), carry)
    carry, h = cell(carry, x)
    return carry, (h, carry)


def lstm_over_time(
    cell: nn.OptimizedLSTMCell, carry: Carry, x: chex.Array, is_first: chex.Array
) -> tuple[Carry, chex.Array, Carry]:
    """`cell` over time-major inputs `x [T, B, F]`, the carry zeroed where `is_first [T, B]`:
    `(final carry, outputs [T, B, H], carry after each step)`. Call it from a compact method
    that created `cell`: a flax scan whose parameters are the cell's own (one step's tree).

    Only the cell is in the loop: a network applies its torso and heads to all T * B steps
    at once around it (as SEED's BatchApply), so a convolutional torso runs as one batched
    convolution instead of T small ones (an R2D2 Atari update 25% faster on the CPU)."""
    scan = nn.scan(_reset_and_step, variable_broadcast="params", split_rngs={"params": False})
    final, (outputs, carries) = scan(cell, carry, (x, is_first))
    return final, outputs, carries


def _dense(features: int, scale: float, name: str | None = None) -> nn.Dense:
    return nn.Dense(
        features,
        kernel_init=nn.initializers.orthogonal(scale),
        bias_init=nn.initializers.zeros,
        name=name,
    )


class MLP(nn.Module):
    """Dense layers with orthogonal(sqrt 2) init and zero biases."""

    hidden_sizes: Sequence[int]
    activation: str

    @nn.compact
    def __call__(self, x: chex.Array) -> chex.Array:
        act = ACTIVATIONS[self.activation]
        for size in self.hidden_sizes:
            x = act(_dense(size, np.sqrt(2.0))(x))
        return x


class ActorCritic(nn.Module):
    """Policy and value over time-major `[T, B]` observations (one step, acting, is T = 1).

    Distribution parameters are the logits `[T, B, n]` when `discrete` (n summed over the
    components of a multi-discrete action), else the pair `(loc [T, B, d], log_scale
    [T, B, d])` of a TanhGaussian, with a state-independent `log_scale`
    parameter initialised to 0 (as in PPO). Without an LSTM and with `separate_value_torso`,
    actor and critic have their own MLPs (as in PureJaxRL); otherwise they share the torso
    (and the LSTM core, which follows it). Any other `torso` (a convolutional one or the
    user's own module, agents/torsos.py) is always shared by actor and critic;
    `hidden_sizes` and `activation` then go unused.
    """

    action_dim: int
    discrete: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    lstm_size: int | None = None
    separate_value_torso: bool = True
    torso: Torso = "mlp"

    def initial_carry(self, batch_size: int) -> Carry:
        """Zero carry for `batch_size` sequences; `()` without an LSTM."""
        if self.lstm_size is None:
            return ()
        zeros = jnp.zeros((batch_size, self.lstm_size), jnp.float32)
        return (zeros, zeros)

    @nn.compact
    def __call__(
        self, carry: Carry, obs: chex.Array, is_first: chex.Array
    ) -> tuple[Carry, tuple[Any, chex.Array], Carry]:
        """`(final carry, (dist_params [T, B, ...], value [T, B]), carry after each step)` for
        `obs [T, B, ...]`; the LSTM carry is zeroed where `is_first [T, B]`. Without an LSTM
        the carries are `()`; with one only the cell runs step by step (`lstm_over_time`)."""
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; one of {list(ACTIVATIONS)}")
        t, batch = is_first.shape
        chex.assert_shape(obs, (t, batch, ...))
        flat_obs = obs.reshape(t * batch, *obs.shape[2:])
        mlp = is_mlp(self.torso)
        if mlp:
            x = flat_obs.reshape(t * batch, -1).astype(jnp.float32)
        else:
            x = torso_features(self.torso, flat_obs)

        carries = ()
        if self.lstm_size is not None:
            if mlp:
                x = MLP(self.hidden_sizes, self.activation, name="torso")(x)
            cell = nn.OptimizedLSTMCell(self.lstm_size, name="lstm")
            carry, x, carries = lstm_over_time(cell, carry, x.reshape(t, batch, -1), is_first)
            x = x.reshape(t * batch, -1)
            actor_x = critic_x = x
        elif not mlp:
            actor_x = critic_x = x
        elif self.separate_value_torso:
            actor_x = MLP(self.hidden_sizes, self.activation, name="actor_torso")(x)
            critic_x = MLP(self.hidden_sizes, self.activation, name="critic_torso")(x)
        else:
            actor_x = critic_x = MLP(self.hidden_sizes, self.activation, name="torso")(x)

        policy = _dense(self.action_dim, 0.01, name="policy_head")(actor_x)
        policy = policy.reshape(t, batch, -1)
        if self.discrete:
            dist_params = policy
        else:
            log_scale = self.param(
                "log_scale", nn.initializers.zeros, (self.action_dim,), jnp.float32
            )
            dist_params = (policy, jnp.broadcast_to(log_scale, policy.shape))
        value = _dense(1, 1.0, name="value_head")(critic_x).reshape(t, batch)
        return carry, (dist_params, value), carries
