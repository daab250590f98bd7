"""Renders of MJCF-model trajectories: GIF/MP4 through MuJoCo's renderer, or an HTML viewer.

An environment is renderable when its unwrapped instance has its model as `mjcf_xml` (MJCF
text MuJoCo can load, as the locomotion envs have) or `mj_model` (a `mujoco.MjModel`, as Brax's
envs have), `qpos(state)` (MuJoCo's qpos for one env state) and `dt` (seconds per env step, for
playback in real time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from accelrl.config import ConfigError
from accelrl.render import gl
from accelrl.render.gl import RenderBackendError

if TYPE_CHECKING:
    import mujoco

VIDEO_SUFFIXES = (".gif", ".mp4")
SUFFIXES = (*VIDEO_SUFFIXES, ".html")
VIDEO_FPS = 30.0
"""Highest frame rate of videos: faster envs keep every k-th frame, so playback is real time."""

__all__ = [
    "SUFFIXES",
    "VIDEO_SUFFIXES",
    "RenderBackendError",
    "check_target",
    "gl",
    "renderable",
    "write_render",
]
_PROTOCOL = "`mjcf_xml` or `mj_model`, `qpos(state)` and `dt`"


def check_target(path: Path) -> None:
    """Raises ConfigError unless `path` ends in a suffix we can write."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise ConfigError(f"cannot render to {path}: the file name must end in {SUFFIXES}")


def model_of(env: Any) -> str | mujoco.MjModel | None:
    """The MuJoCo model an (unwrapped) env describes itself with, or None."""
    xml = getattr(env, "mjcf_xml", None)
    if isinstance(xml, str):
        return xml
    model = getattr(env, "mj_model", None)
    return model if type(model).__name__ == "MjModel" else None


def renderable(env: Any, name: str) -> Any:
    """The unwrapped env if it describes itself as a MuJoCo model, else ConfigError."""
    base = env.unwrapped
    has_model = model_of(base) is not None
    has_dt = isinstance(getattr(base, "dt", None), (int, float))
    if not (has_model and has_dt and callable(getattr(base, "qpos", None))):
        raise ConfigError(
            f"environment {name!r} cannot be rendered: only MuJoCo-model environments (with "
            f"{_PROTOCOL}, e.g. the locomotion envs and Brax's) can"
        )
    return base


def write_render(
    path: Path, model: str | mujoco.MjModel, episodes: Sequence[np.ndarray], dt: float
) -> None:
    """Writes qpos trajectories `episodes` ([T_i, nq] each, played in turn) of `model` (MJCF
    text or a MuJoCo model) to `path`: a GIF or MP4 through MuJoCo's renderer, or a
    self-contained HTML viewer."""
    check_target(path)
    if Path(path).suffix.lower() == ".html":
        from accelrl.render.html import write_html

        write_html(path, model, episodes, dt)
        return
    from accelrl.render.video import render_frames, write_video

    stride = max(1, math.ceil(1.0 / (dt * VIDEO_FPS)))
    qpos = np.concatenate([np.asarray(q)[::stride] for q in episodes])
    write_video(path, render_frames(model, qpos), fps=1.0 / (dt * stride))
