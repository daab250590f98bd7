"""The V-trace learner step: epochs of minibatch gradient steps on one batch of trajectories.

Shared by the fused loop and the actor bridge. Every minibatch step first computes its V-trace
targets under the current parameters (as IMPALA's learner does), then takes a gradient step
with them held fixed. Minibatches are strided slices of the env axis (env i goes to minibatch
i mod M), so a batch split evenly across devices splits into the same minibatches as on one
device; each epoch visits them in a fresh random order. All epochs x minibatches steps run as
one flat scan (one loop, a smaller program than nested ones). A step whose loss or gradients
are not finite leaves the parameters and optimiser state unchanged and is reported in
`UpdateMetrics.finite`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from agents.actor_critic import ActorCriticAgent
from agents.vtrace import Trajectory, VTraceConfig, vtrace_loss, vtrace_targets


class UpdateMetrics(NamedTuple):
    """Means over the minibatch steps of one update."""

    loss: jax.Array
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    grad_norm: jax.Array
    finite: jax.Array  # bool: every step had finite loss and gradients


def split_minibatches(traj: Trajectory, num_minibatches: int) -> Trajectory:
    """[T, B, ...] time-major fields -> [M, T, B/M, ...]; env i lands in minibatch i mod M."""

    def time_major(x: jax.Array) -> jax.Array:
        t, b = x.shape[:2]
        x = x.reshape(t, b // num_minibatches, num_minibatches, *x.shape[2:])
        return jnp.moveaxis(x, 2, 0)

    def batch_major(x: jax.Array) -> jax.Array:
        b = x.shape[0]
        x = x.reshape(b // num_minibatches, num_minibatches, *x.shape[1:])
        return jnp.moveaxis(x, 1, 0)

    carry = jax.tree.map(batch_major, traj.initial_carry)
    rest = jax.tree.map(time_major, traj._replace(initial_carry=()))
    return rest._replace(initial_carry=carry)


@dataclass(frozen=True)
class VTraceLearner:
    """V-trace updates with an optimiser over the flattened parameter vector.

    Flattening makes the optimiser, the finiteness check and the keep-or-skip select one
    array op each instead of one per parameter leaf: same maths, a much smaller program
    (compile time on CPU roughly halves).
    """

    agent: ActorCriticAgent
    optimizer: optax.GradientTransformation
    config: VTraceConfig
    num_epochs: int
    num_minibatches: int

    def init(self, params: Any) -> Any:
        """Optimiser state for `params`."""
        return self.optimizer.init(ravel_pytree(params)[0])

    def update(
        self, params: Any, opt_state: Any, traj: Trajectory, key: jax.Array
    ) -> tuple[Any, Any, UpdateMetrics]:
        """`num_epochs` passes of `num_minibatches` gradient steps on `traj` [T, B]."""
        minibatches = split_minibatches(traj, self.num_minibatches)
        flat_params, unravel = ravel_pytree(params)

        def minibatch_step(carry: tuple, xs: tuple) -> tuple[tuple, None]:
            flat_params, opt_state, totals = carry
            index, key = xs
            traj = jax.tree.map(lambda x: x[index], minibatches)
            targets = vtrace_targets(self.agent, unravel(flat_params), traj, self.config)
            loss_fn = lambda flat: vtrace_loss(
                self.agent, unravel(flat), traj, targets, self.config, key
            )
            (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(flat_params)
            # The gradient norm is finite exactly when every gradient is (and none is so large
            # that its square overflows, which clipping could not repair either).
            grad_norm = optax.global_norm(grads)
            finite = jnp.logical_and(jnp.isfinite(loss), jnp.isfinite(grad_norm))
            updates, new_opt_state = self.optimizer.update(grads, opt_state, flat_params)
            new_params = optax.apply_updates(flat_params, updates)
            keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(finite, n, o), new, old)
            totals = UpdateMetrics(
                loss=totals.loss + loss,
                policy_loss=totals.policy_loss + aux.policy_loss,
                value_loss=totals.value_loss + aux.value_loss,
                entropy=totals.entropy + aux.entropy,
                grad_norm=totals.grad_norm + grad_norm,
                finite=totals.finite & finite,
            )
            return (keep(new_params, flat_params), keep(new_opt_state, opt_state), totals), None

        # All randomness drawn up front: each PRNG call site inside the loop costs compile time.
        order_key, loss_key = jax.random.split(key)
        shape = (self.num_epochs, self.num_minibatches)
        order = jnp.argsort(jax.random.uniform(order_key, shape), axis=1).reshape(-1)
        loss_keys = jax.random.split(loss_key, order.shape)
        # Sums in the loop carry (a smaller program than per-step outputs reduced afterwards).
        zero = jnp.zeros((), jnp.float32)
        totals = UpdateMetrics(zero, zero, zero, zero, zero, finite=jnp.ones((), bool))
        (flat_params, opt_state, totals), _ = jax.lax.scan(
            minibatch_step, (flat_params, opt_state, totals), (order, loss_keys)
        )
        steps = order.shape[0]
        means = jax.tree.map(lambda total: total / steps, totals._replace(finite=()))
        return unravel(flat_params), opt_state, means._replace(finite=totals.finite)
