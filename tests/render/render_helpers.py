"""A small MJCF environment (a cart with a falling pole) for render tests, and headless
Chromium for the HTML viewer."""

import shutil
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from accelrl.envs import Box, Environment, TimeStep
from accelrl.envs.base import first_timestep

POLE_XML = """
<mujoco model="falling_pole">
  <worldbody>
    <light pos="0 0 3"/>
    <geom name="floor" type="plane" size="3 3 0.1" rgba="0.8 0.9 0.8 1"/>
    <body name="cart" pos="0 0 0.3">
      <joint name="slider" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.15 0.08 0.05" rgba="0.9 0.6 0.2 1"/>
      <body name="pole">
        <joint name="hinge" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.6" size="0.03" rgba="0.2 0.5 0.9 1"/>
        <geom type="sphere" pos="0 0 0.6" size="0.07" rgba="0.9 0.2 0.2 1"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="slider" gear="20" ctrlrange="-1 1"/></actuator>
</mujoco>
"""


@struct.dataclass
class PoleState:
    q: jax.Array  # MuJoCo's qpos: cart position, pole angle
    qd: jax.Array


class FallingPole(Environment):
    """The pole starts tilted by a random angle and falls over (a point-mass pendulum on a
    cart integrated in closed form, not our physics: the tests are about recording and
    drawing, and this compiles in a second); the action pushes the cart.

    Renderable like the locomotion envs: `mjcf_xml`, `qpos(state)` and `dt`.
    """

    mjcf_xml = POLE_XML
    dt = 0.02

    def reset(self, key: jax.Array) -> tuple[PoleState, TimeStep]:
        tilt = jax.random.uniform(key, (), minval=0.5, maxval=1.0)
        state = PoleState(jnp.array([0.0, tilt]), jnp.zeros(2))
        return state, first_timestep(self._observation(state))

    def step(self, state: PoleState, action: jax.Array) -> tuple[PoleState, TimeStep]:
        push = jnp.clip(action[0], -1.0, 1.0)
        qdd = jnp.stack([push, 9.81 / 0.6 * jnp.sin(state.q[1])])
        qd = state.qd + self.dt * qdd
        state = PoleState(state.q + self.dt * qd, qd)
        zero = jnp.zeros((), bool)
        return state, TimeStep(self._observation(state), jnp.float32(1.0), zero, zero, {})

    def qpos(self, state: PoleState) -> jax.Array:
        return state.q

    @staticmethod
    def _observation(state: PoleState) -> jax.Array:
        return jnp.concatenate([state.q, state.qd]).astype(jnp.float32)

    @property
    def observation_space(self) -> Box:
        return Box(shape=(4,), low=-np.inf, high=np.inf)

    @property
    def action_space(self) -> Box:
        return Box(shape=(1,), low=-1.0, high=1.0)


CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--enable-unsafe-swiftshader",  # WebGL on the CPU (SwiftShader) without a GPU
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]


def chromium() -> str | None:
    """Path of a Chromium/Chrome binary, if one is installed."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    return None


def _open(browser: str, page: Path, profile: Path, size: tuple[int, int], *args: str) -> str:
    """Runs headless `browser` on `page` with a fresh profile for 2 s of page time."""
    done = subprocess.run(
        [
            browser,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={size[0]},{size[1]}",
            "--virtual-time-budget=2000",
            *args,
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout


def screenshot(browser: str, page: Path, png: Path, profile: Path, size=(640, 480)) -> None:
    """Saves a screenshot of `page` to `png`."""
    _open(browser, page, profile, size, f"--screenshot={png}")


def dump_dom(browser: str, page: Path, profile: Path, size=(640, 480)) -> str:
    """The page's DOM (as HTML) after its scripts ran."""
    return _open(browser, page, profile, size, "--dump-dom")
