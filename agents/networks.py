"""Actor-critic network: MLP or convolutional torso, optional LSTM core, policy and value heads."""

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
    """Policy and value for one time step of a batch of observations.

    Distribution parameters are the logits `[B, n]` when `discrete`, else the pair
    `(loc [B, d], log_scale [B, d])` of a TanhGaussian, with a state-independent `log_scale`
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
    ) -> tuple[Carry, tuple[Any, chex.Array]]:
        """Returns `(carry, (dist_params, value [B]))`; the LSTM carry is zeroed where is_first."""
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; one of {list(ACTIVATIONS)}")
        batch = obs.shape[0]
        chex.assert_shape(is_first, (batch,))
        mlp = is_mlp(self.torso)
        x = obs.reshape(batch, -1).astype(jnp.float32) if mlp else torso_features(self.torso, obs)

        if self.lstm_size is not None:
            if mlp:
                x = MLP(self.hidden_sizes, self.activation, name="torso")(x)
            carry = jax.tree.map(
                lambda c: jnp.where(is_first[:, None], jnp.zeros_like(c), c), carry
            )
            carry, x = nn.OptimizedLSTMCell(self.lstm_size, name="lstm")(carry, x)
            actor_x = critic_x = x
        elif not mlp:
            actor_x = critic_x = x
        elif self.separate_value_torso:
            actor_x = MLP(self.hidden_sizes, self.activation, name="actor_torso")(x)
            critic_x = MLP(self.hidden_sizes, self.activation, name="critic_torso")(x)
        else:
            actor_x = critic_x = MLP(self.hidden_sizes, self.activation, name="torso")(x)

        policy = _dense(self.action_dim, 0.01, name="policy_head")(actor_x)
        if self.discrete:
            dist_params = policy
        else:
            log_scale = self.param(
                "log_scale", nn.initializers.zeros, (self.action_dim,), jnp.float32
            )
            dist_params = (policy, jnp.broadcast_to(log_scale, policy.shape))
        value = _dense(1, 1.0, name="value_head")(critic_x)[:, 0]
        return carry, (dist_params, value)
