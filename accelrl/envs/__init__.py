"""Functional JAX environments, wrappers and the environment registry."""

from accelrl.envs.base import Environment, TimeStep
from accelrl.envs.registry import make, make_training_env, register, registered_names
from accelrl.envs.spaces import Box, Discrete
from accelrl.envs.wrappers import (
    ActionRepeat,
    AutoReset,
    EpisodeStatistics,
    NormalizeObservation,
    RunningStats,
    TimeLimit,
    Vectorize,
    Wrapper,
)

__all__ = [
    "ActionRepeat",
    "AutoReset",
    "Box",
    "Discrete",
    "Environment",
    "EpisodeStatistics",
    "NormalizeObservation",
    "RunningStats",
    "TimeLimit",
    "TimeStep",
    "Vectorize",
    "Wrapper",
    "make",
    "make_training_env",
    "register",
    "registered_names",
]
