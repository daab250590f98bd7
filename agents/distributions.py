"""Action distributions for policy-gradient agents.

The distributions are NamedTuples of arrays, so they are pytrees that can be built inside jit,
batched over any leading dimensions, and rebuilt from network outputs at learning time.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

LOG_SCALE_MIN = -5.0
LOG_SCALE_MAX = 2.0
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class Categorical(NamedTuple):
    """Categorical distribution over `n` actions with unnormalised `logits [..., n]`."""

    logits: chex.Array

    def sample(self, key: chex.PRNGKey) -> chex.Array:
        """Samples int32 actions `[...]`."""
        return jax.random.categorical(key, self.logits).astype(jnp.int32)

    def log_prob(self, a: chex.Array) -> chex.Array:
        """Log-probability `[...]` of int actions `a [...]`."""
        log_p = jax.nn.log_softmax(self.logits)
        # A one-hot dot rather than a gather: elementwise work that XLA fuses with the softmax,
        # where a gather (and the scatter of its gradient) are kernels of their own.
        one_hot = jax.nn.one_hot(a, log_p.shape[-1], dtype=log_p.dtype)
        return jnp.sum(one_hot * log_p, axis=-1)

    def entropy(self) -> chex.Array:
        """Exact entropy `[...]`."""
        log_p = jax.nn.log_softmax(self.logits)
        return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)

    def mode(self) -> chex.Array:
        """Most likely action, int32 `[...]`."""
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)

    def to_env(self, a: chex.Array) -> chex.Array:
        """The env takes the sampled index unchanged."""
        return a


# Logit of the padding entries of MultiCategorical: finite, so that exp(logit) * logit is 0
# in the entropy (with -inf it would be nan), and far below any real logit.
_PAD_LOGIT = -1e9


class MultiCategorical(NamedTuple):
    """Independent categoricals, one per action component (gymnasium's MultiDiscrete):
    `logits [..., k, m]`, component i's n_i <= m choices first and the rest `_PAD_LOGIT`.

    An action is `[..., k]` int32; its log-probability and entropy are the sums over the
    components, as for a factorised policy in SB3 and CleanRL.
    """

    logits: chex.Array

    @classmethod
    def from_flat(cls, flat: chex.Array, nvec: tuple[int, ...]) -> MultiCategorical:
        """From network outputs `[..., sum(nvec)]`, the components' logits one after another."""
        m = max(nvec)
        starts = [sum(nvec[:i]) for i in range(len(nvec))]
        index = jnp.asarray(
            [[s + min(j, n - 1) for j in range(m)] for s, n in zip(starts, nvec, strict=True)]
        )
        valid = jnp.asarray([[j < n for j in range(m)] for n in nvec])
        return cls(jnp.where(valid, flat[..., index], _PAD_LOGIT))

    def sample(self, key: chex.PRNGKey) -> chex.Array:
        """Samples int32 actions `[..., k]`."""
        return jax.random.categorical(key, self.logits).astype(jnp.int32)

    def log_prob(self, a: chex.Array) -> chex.Array:
        """Log-probability `[...]` of int actions `a [..., k]`."""
        return jnp.sum(Categorical(self.logits).log_prob(a), axis=-1)

    def entropy(self) -> chex.Array:
        """Exact entropy `[...]`."""
        return jnp.sum(Categorical(self.logits).entropy(), axis=-1)

    def mode(self) -> chex.Array:
        """Most likely action, int32 `[..., k]`."""
        return Categorical(self.logits).mode()

    def to_env(self, a: chex.Array) -> chex.Array:
        """The env takes the sampled indices unchanged."""
        return a


def _log_one_minus_tanh_sq(u: chex.Array) -> chex.Array:
    """log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), stable for large |u|."""
    return 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))


class _DiagonalGaussian(NamedTuple):
    """Fields, scale clipping, sampling and mode of the two Gaussian policies below: `loc`
    and `log_scale` `[..., d]`, the box `[low, high]`. `log_scale` is clipped to
    [LOG_SCALE_MIN, LOG_SCALE_MAX] so that the density stays finite."""

    loc: chex.Array
    log_scale: chex.Array
    low: chex.Array
    high: chex.Array

    @property
    def _log_scale(self) -> chex.Array:
        return jnp.clip(self.log_scale, LOG_SCALE_MIN, LOG_SCALE_MAX)

    def _gaussian_log_prob(self, u: chex.Array) -> chex.Array:
        z = (u - self.loc) * jnp.exp(-self._log_scale)
        return jnp.sum(-0.5 * jnp.square(z) - self._log_scale - _HALF_LOG_2PI, axis=-1)

    def _gaussian_entropy(self) -> chex.Array:
        return jnp.sum(self._log_scale + 0.5 + _HALF_LOG_2PI, axis=-1)

    def sample(self, key: chex.PRNGKey) -> chex.Array:
        """Reparameterised raw sample `u [..., d]` (differentiable w.r.t. loc and log_scale)."""
        noise = jax.random.normal(key, jnp.shape(self.loc), jnp.float32)
        return self.loc + jnp.exp(self._log_scale) * noise

    def mode(self) -> chex.Array:
        """Raw mode `loc`; `to_env(mode())` is the deterministic action."""
        return self.loc


class TanhGaussian(_DiagonalGaussian):
    """Diagonal Gaussian over raw actions `u`, squashed by tanh into the box `[low, high]`.

    Learning works on the raw pre-squash sample `u` (stored in trajectories): its log-density is
    exact and finite, whereas inverting tanh on a bounded action that saturated is not.
    `to_env` maps `u` to the bounded action `low + (tanh(u) + 1) / 2 * (high - low)`.
    """

    def _log_det_jacobian(self, u: chex.Array) -> chex.Array:
        """log |d to_env(u) / du| summed over the action dimension."""
        log_half_range = jnp.log(0.5 * (self.high - self.low))
        return jnp.sum(_log_one_minus_tanh_sq(u) + log_half_range, axis=-1)

    def log_prob(self, u: chex.Array) -> chex.Array:
        """Log-density `[...]` of the bounded action `to_env(u)`, given the raw sample `u`."""
        return self._gaussian_log_prob(u) - self._log_det_jacobian(u)

    def entropy(self, key: chex.PRNGKey) -> chex.Array:
        """Single-sample estimate `[...]` of the entropy of the bounded action.

        H(to_env(u)) = H(u) + E[log |det J(u)|]: the Gaussian term is exact, the expectation
        is estimated at one reparameterised sample, so the estimate is unbiased and has a
        gradient (no closed form exists for the squashed distribution).
        """
        return self._gaussian_entropy() + self._log_det_jacobian(self.sample(key))

    def to_env(self, u: chex.Array) -> chex.Array:
        """Bounded action in `[low, high]` for raw `u`."""
        return self.low + 0.5 * (jnp.tanh(u) + 1.0) * (self.high - self.low)


class ClippedGaussian(_DiagonalGaussian):
    """Diagonal Gaussian over actions `[..., d]` of a box with an infinite bound: the env
    takes the sample clipped to `[low, high]` (a no-op on infinite sides), as SB3's
    DiagGaussian policy and CleanRL's ClipAction do; learning uses the unclipped sample."""

    def log_prob(self, a: chex.Array) -> chex.Array:
        """Log-density `[...]` of the unclipped sample `a`."""
        return self._gaussian_log_prob(a)

    def entropy(self) -> chex.Array:
        """Exact entropy `[...]` of the Gaussian."""
        return self._gaussian_entropy()

    def to_env(self, a: chex.Array) -> chex.Array:
        """`a` clipped to the box's finite bounds."""
        return jnp.clip(a, self.low, self.high)
