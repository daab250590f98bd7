"""The fused trainer's agent for the action spaces an env (ours or the user's) declares."""

from dataclasses import dataclass

import numpy as np
import pytest

from accelrl.config import ConfigError
from accelrl.envs import Box, Discrete
from accelrl.fused import make_agent
from agents import BoundedActions, DiscreteActions, UnboundedActions
from configs import load_preset


@dataclass
class Spaces:
    """All make_agent reads of an env."""

    action_space: Box | Discrete
    observation_space: Box = Box((3,))


@pytest.mark.parametrize(
    "space, kind",
    [
        (Discrete(4), DiscreteActions),
        (Box((2,), -1.0, 1.0), BoundedActions),
        (Box((2,)), UnboundedActions),  # Box(-inf, inf): a Gaussian, clipped to nothing
        (Box((2,), np.array([0.0, -1.0]), np.array([np.inf, 1.0])), UnboundedActions),
    ],
)
def test_each_action_space_gets_its_policy(space, kind):
    agent = make_agent(load_preset("pendulum_vtrace"), Spaces(space))
    assert isinstance(agent.actions, kind) and agent.obs_shape == (3,)


def test_a_box_of_matrix_actions_is_refused_by_name():
    with pytest.raises(ConfigError, match="unsupported action space"):
        make_agent(load_preset("pendulum_vtrace"), Spaces(Box((2, 2), -1.0, 1.0)))
