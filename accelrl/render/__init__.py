"""Renders of MJCF-model trajectories: GIF/MP4 through MuJoCo's renderer, or an HTML viewer.

An environment is renderable when its unwrapped instance has `mjcf_xml` (MJCF text MuJoCo can
load), `qpos(state)` (MuJoCo's qpos for one env state) and `dt` (seconds per env step, for
playback in real time), as the locomotion envs do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from accelrl.config import ConfigError
from accelrl.render import gl
from accelrl.render.gl import RenderBackendError

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
_PROTOCOL = "`mjcf_xml`, `qpos(state)` and `dt`"


def check_target(path: Path) -> None:
    """Raises ConfigError unless `path` ends in a suffix we can write."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise ConfigError(f"cannot render to {path}: the file name must end in {SUFFIXES}")


def renderable(env: Any, name: str) -> Any:
    """The unwrapped env if it describes itself as an MJCF model, else ConfigError."""
    base = env.unwrapped
    has_model = isinstance(getattr(base, "mjcf_xml", None), str)
    has_dt = isinstance(getattr(base, "dt", None), (int, float))
    if not (has_model and has_dt and callable(getattr(base, "qpos", None))):
        raise ConfigError(
            f"environment {name!r} cannot be rendered: only MJCF-model environments (with "
            f"{_PROTOCOL}, e.g. the locomotion envs) can"
        )
    return base


def write_render(path: Path, mjcf_xml: str, episodes: Sequence[np.ndarray], dt: float) -> None:
    """Writes qpos trajectories `episodes` ([T_i, nq] each, played in turn) to `path`:
    a GIF or MP4 through MuJoCo's renderer, or a self-contained HTML viewer."""
    check_target(path)
    if Path(path).suffix.lower() == ".html":
        from accelrl.render.html import write_html

        write_html(path, mjcf_xml, episodes, dt)
        return
    from accelrl.render.video import render_frames, write_video

    stride = max(1, math.ceil(1.0 / (dt * VIDEO_FPS)))
    qpos = np.concatenate([np.asarray(q)[::stride] for q in episodes])
    write_video(path, render_frames(mjcf_xml, qpos), fps=1.0 / (dt * stride))
