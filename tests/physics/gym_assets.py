"""The MJCF models that gymnasium ships, read from the installed package (skips without it)."""

import os

import pytest

GYM_MODELS = [
    "ant",
    "half_cheetah",
    "hopper",
    "walker2d_v5",
    "humanoid",
    "reacher",
    "inverted_pendulum",
    "inverted_double_pendulum",
]


def gym_asset(name: str) -> str:
    """Path of gymnasium's `<name>.xml`."""
    gym = pytest.importorskip("gymnasium")
    return os.path.join(os.path.dirname(gym.__file__), "envs", "mujoco", "assets", name + ".xml")
