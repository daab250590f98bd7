"""Agents: distributions, networks, actor-critic acting and V-trace learning on plain arrays."""

from agents.actor_critic import (
    Actions,
    ActorCriticAgent,
    ActOutput,
    BoundedActions,
    DiscreteActions,
    MultiDiscreteActions,
    UnboundedActions,
    UnrollOutput,
    box_actions,
)
from agents.distributions import Categorical, ClippedGaussian, MultiCategorical, TanhGaussian
from agents.networks import ActorCritic
from agents.optim import make_optimizer
from agents.vtrace import (
    LossMetrics,
    Trajectory,
    VTraceConfig,
    VTraceReturns,
    vtrace_loss,
    vtrace_returns,
    vtrace_targets,
)

__all__ = [
    "Actions",
    "ActOutput",
    "ActorCritic",
    "ActorCriticAgent",
    "BoundedActions",
    "Categorical",
    "ClippedGaussian",
    "DiscreteActions",
    "LossMetrics",
    "MultiCategorical",
    "MultiDiscreteActions",
    "TanhGaussian",
    "Trajectory",
    "UnboundedActions",
    "UnrollOutput",
    "VTraceConfig",
    "VTraceReturns",
    "box_actions",
    "make_optimizer",
    "vtrace_loss",
    "vtrace_returns",
    "vtrace_targets",
]
