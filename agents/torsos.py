"""Observation torsos shared by the actor-critic and the R2D2 Q-network.

A torso is a built-in's name or a user's own flax module:

- `mlp`: flatten, then dense layers (vector observations).
- `nature_cnn`: the DQN torso (Mnih et al. 2015): conv 32x8x8/4, 64x4x4/2, 64x3x3/1 (VALID,
  relu), dense 512. For Atari 84x84x4 frames it yields 7x7x64 before the dense layer.
- `impala_cnn`: IMPALA's residual torso (Espeholt et al. 2018): three stacks of
  [conv 3x3, max-pool 3x3/2, two residual blocks] with 16, 32, 32 channels, relu, dense 256.
- a `flax.linen.Module` instance of the user's: it maps observations `[B, *obs_shape]`, as the
  env gives them (uint8 pixels unscaled), to features `[B, F]`. Like the convolutional
  torsos it is shared by actor and critic and followed by the LSTM core when there is one.

Pixel observations arrive as uint8 (they travel and are stored that way: 4x less memory in
replay and on the wire); the convolutional torsos scale uint8 inputs to [0, 1] themselves, so
callers never convert. Other dtypes are used as given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import chex
import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from agents.conv import conv_general_dilated

TORSOS = ("mlp", "nature_cnn", "impala_cnn")

Torso = str | nn.Module
"""A built-in torso's name (one of TORSOS) or a user's own module."""

Convolution = Callable[..., chex.Array]
"""A function with `lax.conv_general_dilated`'s signature (flax's `nn.Conv(conv_general_dilated=)`).
The torsos default to agents.conv's, whose kernel gradient XLA:CPU runs fast inside loops."""


def _pixels(obs: chex.Array) -> chex.Array:
    """float32 image batch [B, H, W, C]: uint8 scaled to [0, 1]; [B, H, W] gets a channel axis."""
    x = obs.astype(jnp.float32)
    if obs.dtype == jnp.uint8:
        x = x / 255.0
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4:
        raise ValueError(f"a convolutional torso needs [B, H, W(, C)] images, got {obs.shape}")
    return x


def _conv(
    conv: Convolution, features: int, kernel: int, stride: int = 1, padding: str = "VALID"
) -> nn.Conv:
    return nn.Conv(
        features,
        (kernel, kernel),
        (stride, stride),
        padding=padding,
        kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)),
        bias_init=nn.initializers.zeros,
        conv_general_dilated=conv,
    )


def _dense_relu(features: int, x: chex.Array) -> chex.Array:
    dense = nn.Dense(
        features,
        kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)),
        bias_init=nn.initializers.zeros,
        name="dense",
    )
    return nn.relu(dense(x))


class NatureCNN(nn.Module):
    """DQN's torso: three VALID convolutions and a dense layer, relu throughout."""

    dense_size: int = 512
    conv: Convolution = conv_general_dilated

    @nn.compact
    def __call__(self, obs: chex.Array) -> chex.Array:
        x = _pixels(obs)
        x = nn.relu(_conv(self.conv, 32, 8, 4)(x))
        x = nn.relu(_conv(self.conv, 64, 4, 2)(x))
        x = nn.relu(_conv(self.conv, 64, 3, 1)(x))
        return _dense_relu(self.dense_size, x.reshape(x.shape[0], -1))


class ResidualBlock(nn.Module):
    """x + conv(relu(conv(relu(x)))), channels unchanged."""

    conv: Convolution = conv_general_dilated

    @nn.compact
    def __call__(self, x: chex.Array) -> chex.Array:
        channels = x.shape[-1]
        y = _conv(self.conv, channels, 3, padding="SAME")(nn.relu(x))
        y = _conv(self.conv, channels, 3, padding="SAME")(nn.relu(y))
        return x + y


class ImpalaCNN(nn.Module):
    """IMPALA's deep residual torso."""

    channels: Sequence[int] = (16, 32, 32)
    dense_size: int = 256
    conv: Convolution = conv_general_dilated

    @nn.compact
    def __call__(self, obs: chex.Array) -> chex.Array:
        x = _pixels(obs)
        for features in self.channels:
            x = _conv(self.conv, features, 3, padding="SAME")(x)
            x = nn.max_pool(x, (3, 3), (2, 2), padding="SAME")
            x = ResidualBlock(self.conv)(x)
            x = ResidualBlock(self.conv)(x)
        return _dense_relu(self.dense_size, nn.relu(x).reshape(x.shape[0], -1))


def is_mlp(torso: Torso) -> bool:
    """Whether `torso` is the built-in MLP (which each network builds with its own sizes)."""
    return isinstance(torso, str) and torso == "mlp"


def torso_features(torso: Torso, obs: chex.Array) -> chex.Array:
    """float32 features `[B, F]` of a non-MLP torso for observations `[B, ...]` (an unknown
    torso name is a ValueError).

    Call it inside a compact method with the caller's `torso` field: the parameters go under
    "torso" (flax binds a Module-valued field as a submodule of that name). A torso that
    returns anything but one feature vector per observation is refused.
    """
    if isinstance(torso, nn.Module):
        module = torso
    elif torso == "nature_cnn":
        module = NatureCNN(name="torso")
    elif torso == "impala_cnn":
        module = ImpalaCNN(name="torso")
    else:
        raise ValueError(f"unknown torso {torso!r}; one of {TORSOS} or a flax Module")
    x = module(obs)
    shape = getattr(x, "shape", None)
    if shape is None or len(shape) != 2 or shape[0] != obs.shape[0]:
        got = f"shape {tuple(shape)}" if shape is not None else f"a {type(x).__name__}"
        raise ValueError(
            f"torso {type(module).__name__} returned {got} for "
            f"observations of shape {tuple(obs.shape)}; a torso must return [batch, features]"
        )
    return jnp.asarray(x, jnp.float32)
