"""V-trace targets and the IMPALA actor-critic loss on time-major trajectories.

Episode ends inside an unroll are handled explicitly: termination stops bootstrapping
(discount 0), truncation bootstraps from the value of the final observation, and in both cases
the trace is cut so that no target mixes two episodes. This is why `next_values` (values of the
observation each action led to, before auto-reset) is passed alongside `values`.

`vtrace_targets` computes the targets of a trajectory under given parameters (the importance
weights correct the lag between acting and learning parameters); `vtrace_loss` takes them as
fixed inputs and weighs their `q_advantages` by the clipped importance weight of the
parameters it differentiates. The learner computes targets at every minibatch step, under the
parameters of that step, which makes the loss IMPALA's.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import rlax

from agents.actor_critic import ActorCriticAgent
from agents.distributions import TanhGaussian
from agents.networks import Carry


@dataclasses.dataclass(frozen=True)
class VTraceConfig:
    """Hyperparameters of the V-trace loss."""

    discount: float = 0.99
    """Per-step discount gamma; multiplied by 0 at termination."""
    lambda_: float = 1.0
    """Trace mixing parameter: c_t = lambda * min(1, rho_t); 1 is the IMPALA setting."""
    clip_rho: float = 1.0
    """rho-bar: clip of the importance weight in the TD errors (sets the value fixed point)."""
    clip_pg_rho: float = 1.0
    """Clip of the importance weight multiplying the policy-gradient advantage."""
    baseline_cost: float = 0.5
    """Weight of the value loss in the total loss."""
    entropy_cost: float = 0.01
    """Weight of the entropy bonus (subtracted from the total loss)."""
    normalize_advantages: bool = False
    """Standardise the pg advantages over the (mini)batch, as PPO implementations do; makes the
    policy step independent of the reward scale (helps continuous control)."""
    ppo_clip: float = 0.0
    """When > 0, the policy term is PPO's clipped surrogate on the V-trace advantages (APPO):
    with r = pi / mu, minimise -min(r A, clip(r, 1 - ppo_clip, 1 + ppo_clip) A). A trust region
    for several epochs on one batch, where IMPALA's term keeps pushing a policy that has already
    moved. 0 keeps IMPALA's -min(clip_pg_rho, r) A log pi."""


class Trajectory(NamedTuple):
    """Time-major `[T, B, ...]` rollout of B environments, as collected by the actor."""

    observation: chex.Array  # [T, B, ...]
    next_observation: chex.Array  # [T, B, ...] obs the action led to (final one if done)
    is_first: chex.Array  # [T, B] bool, observation[t] starts an episode
    action: chex.Array  # [T, B, ...] raw actions
    behaviour_log_prob: chex.Array  # [T, B]
    reward: chex.Array  # [T, B]
    terminated: chex.Array  # [T, B] bool
    truncated: chex.Array  # [T, B] bool
    initial_carry: Carry  # carry before observation[0]


class VTraceReturns(NamedTuple):
    vs: chex.Array  # [T, B] value targets
    pg_advantages: chex.Array  # [T, B] clipped rho x q_advantages (IMPALA's pg advantage)
    q_advantages: chex.Array  # [T, B] r + gamma q_next - V(x), before the importance weight


class LossMetrics(NamedTuple):
    policy_loss: chex.Array
    value_loss: chex.Array  # 0.5 * mean squared error, before baseline_cost
    entropy: chex.Array
    mean_rho: chex.Array
    rho_clip_fraction: chex.Array  # fraction of steps with rho > clip_rho
    mean_value: chex.Array


def _vtrace_returns_1d(
    values: chex.Array,
    next_values: chex.Array,
    rewards: chex.Array,
    terminated: chex.Array,
    truncated: chex.Array,
    rhos: chex.Array,
    cfg: VTraceConfig,
) -> VTraceReturns:
    terminated = terminated.astype(jnp.float32)
    done = jnp.maximum(terminated, truncated.astype(jnp.float32))
    discounts = cfg.discount * (1.0 - terminated)
    lambdas = cfg.lambda_ * (1.0 - done)
    errors = rlax.vtrace(values, next_values, rewards, discounts, rhos, lambdas, cfg.clip_rho)
    vs = errors + values
    # Bootstrap of the pg target: the mixed return of the next step inside the episode, the
    # value of the final observation at an episode end and at the end of the unroll.
    vs_tp1 = jnp.concatenate([vs[1:], next_values[-1:]])
    q_next = lambdas * vs_tp1 + (1.0 - lambdas) * next_values
    pg_rhos = jnp.minimum(cfg.clip_pg_rho, rhos)
    q_advantages = rewards + discounts * q_next - values
    return jax.lax.stop_gradient(VTraceReturns(vs, pg_rhos * q_advantages, q_advantages))


def vtrace_returns(
    values: chex.Array,
    next_values: chex.Array,
    rewards: chex.Array,
    terminated: chex.Array,
    truncated: chex.Array,
    rhos: chex.Array,
    cfg: VTraceConfig,
) -> VTraceReturns:
    """V-trace targets `vs` and IMPALA policy-gradient advantages on `[T, B]` arrays.

    `values[t]` = V(observation[t]), `next_values[t]` = V(next_observation[t]), `rhos[t]` =
    pi(a_t|x_t) / mu(a_t|x_t). Outputs carry no gradient.
    """
    chex.assert_rank(values, 2)
    chex.assert_equal_shape([values, next_values, rewards, terminated, truncated, rhos])
    fn = jax.vmap(_vtrace_returns_1d, in_axes=(1, 1, 1, 1, 1, 1, None), out_axes=1)
    return fn(values, next_values, rewards, terminated, truncated, rhos, cfg)


def vtrace_targets(
    agent: ActorCriticAgent, params: Any, traj: Trajectory, cfg: VTraceConfig
) -> VTraceReturns:
    """V-trace value targets and policy-gradient advantages of `traj` under `params`.

    The importance weights compare `params`' policy with the behaviour policy that acted.
    Outputs carry no gradient.
    """
    out = agent.unroll(
        params, traj.initial_carry, traj.observation, traj.next_observation, traj.is_first
    )
    log_prob = agent.distribution(out.dist_params).log_prob(traj.action)
    chex.assert_equal_shape([log_prob, traj.behaviour_log_prob, traj.reward])
    rhos = jnp.exp(log_prob - traj.behaviour_log_prob)
    return vtrace_returns(
        out.values, out.next_values, traj.reward, traj.terminated, traj.truncated, rhos, cfg
    )


def vtrace_loss(
    agent: ActorCriticAgent,
    params: Any,
    traj: Trajectory,
    targets: VTraceReturns,
    cfg: VTraceConfig,
    key: chex.PRNGKey,
) -> tuple[chex.Array, LossMetrics]:
    """IMPALA loss: policy gradient with V-trace advantages, value regression, entropy bonus
    (with `cfg.ppo_clip`, PPO's clipped surrogate as the policy term).

    `targets` come from `vtrace_targets` on the same trajectory (possibly under earlier
    parameters); the policy gradient weighs their `q_advantages` by the clipped importance
    weight of `params`' policy. `key` feeds the sampled entropy estimate of a TanhGaussian
    policy (unused for the categorical ones). The rho metrics compare `params`' policy with the
    behaviour policy.
    """
    out = agent.unroll(
        params, traj.initial_carry, traj.observation, traj.next_observation, traj.is_first
    )
    dist = agent.distribution(out.dist_params)
    log_prob = dist.log_prob(traj.action)
    chex.assert_equal_shape([log_prob, traj.behaviour_log_prob, targets.vs, targets.q_advantages])
    ratio = jnp.exp(log_prob - traj.behaviour_log_prob)
    rhos = jax.lax.stop_gradient(ratio)
    entropy = jnp.mean(dist.entropy(key) if isinstance(dist, TanhGaussian) else dist.entropy())
    # PPO's ratio does the importance weighting itself; IMPALA's term weighs by clipped rho.
    pg_weight = 1.0 if cfg.ppo_clip > 0 else jnp.minimum(cfg.clip_pg_rho, rhos)
    advantages = pg_weight * targets.q_advantages
    if cfg.normalize_advantages:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    if cfg.ppo_clip > 0:
        clipped = jnp.clip(ratio, 1.0 - cfg.ppo_clip, 1.0 + cfg.ppo_clip)
        policy_loss = -jnp.mean(jnp.minimum(ratio * advantages, clipped * advantages))
    else:
        policy_loss = -jnp.mean(log_prob * advantages)
    value_loss = 0.5 * jnp.mean(jnp.square(targets.vs - out.values))
    loss = policy_loss + cfg.baseline_cost * value_loss - cfg.entropy_cost * entropy
    metrics = LossMetrics(
        policy_loss=policy_loss,
        value_loss=value_loss,
        entropy=entropy,
        mean_rho=jnp.mean(rhos),
        rho_clip_fraction=jnp.mean((rhos > cfg.clip_rho).astype(jnp.float32)),
        mean_value=jnp.mean(out.values),
    )
    return loss, metrics
