"""Locomotion environments on our physics (MuJoCo/Brax task definitions, our own models).

Each env is a `LocomotionEnv`: `mjcf_xml` is its model (loadable by MuJoCo for rendering) and
`qpos(state)` the MuJoCo qpos of an env state; `info["metrics"]` holds the reward terms.
"""

from accelrl.envs.locomotion.ant import Ant
from accelrl.envs.locomotion.base import LocomotionEnv, LocomotionState
from accelrl.envs.locomotion.halfcheetah import HalfCheetah
from accelrl.envs.locomotion.hopper import Hopper
from accelrl.envs.locomotion.humanoid import Humanoid
from accelrl.envs.locomotion.humanoidstandup import HumanoidStandup
from accelrl.envs.locomotion.inverted_double_pendulum import InvertedDoublePendulum
from accelrl.envs.locomotion.inverted_pendulum import InvertedPendulum
from accelrl.envs.locomotion.pusher import Pusher
from accelrl.envs.locomotion.reacher import Reacher
from accelrl.envs.locomotion.swimmer import Swimmer
from accelrl.envs.locomotion.walker2d import Walker2d

ENVS = {
    "ant": Ant,
    "halfcheetah": HalfCheetah,
    "hopper": Hopper,
    "walker2d": Walker2d,
    "humanoid": Humanoid,
    "humanoidstandup": HumanoidStandup,
    "reacher": Reacher,
    "pusher": Pusher,
    "swimmer": Swimmer,
    "inverted_pendulum": InvertedPendulum,
    "inverted_double_pendulum": InvertedDoublePendulum,
}

__all__ = [
    "ENVS",
    "Ant",
    "HalfCheetah",
    "Hopper",
    "Humanoid",
    "HumanoidStandup",
    "InvertedDoublePendulum",
    "InvertedPendulum",
    "LocomotionEnv",
    "LocomotionState",
    "Pusher",
    "Reacher",
    "Swimmer",
    "Walker2d",
]
