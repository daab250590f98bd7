"""Headless OpenGL for MuJoCo's renderer: pick a working backend, or say what to install.

MuJoCo renders offscreen through EGL (GPU or Mesa's software driver) or OSMesa. The backend
named by MUJOCO_GL is used as is; when it is unset, each candidate is tried once in a child
process (a backend that fails to load can leave PyOpenGL bound to it, so trying it here would
rule out the next one) and the first that makes a context is used for the rest of the process.
"""

from __future__ import annotations

import functools
import importlib
import os
import subprocess
import sys
from typing import Any

CANDIDATES = ("egl", "osmesa")
BACKENDS = (*CANDIDATES, "glfw")  # glfw needs a display
INSTALL_HINT = (
    "install EGL with Mesa's software driver (Debian/Ubuntu: apt-get install libegl1 "
    "libegl-mesa0 libgl1-mesa-dri) or OSMesa (apt-get install libosmesa6), or set MUJOCO_GL "
    "to a backend that works here (egl, osmesa, glfw with a display)"
)
_PROBE = "from mujoco.{0} import GLContext; c = GLContext(8, 8); c.make_current(); c.free()"


class RenderBackendError(RuntimeError):
    """No OpenGL backend MuJoCo can render with is available."""


def _probe(backend: str) -> str | None:
    """None when `backend` makes a context in a fresh interpreter, else the reason it does not."""
    env = {**os.environ, "MUJOCO_GL": backend, "PYOPENGL_PLATFORM": backend}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE.format(backend)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        return "timed out making a context"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit code {done.returncode}"


@functools.cache
def backend() -> str:
    """The OpenGL backend to render with: MUJOCO_GL if set, else the first candidate that works."""
    chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
    if chosen:
        if chosen not in BACKENDS:
            raise RenderBackendError(f"MUJOCO_GL={chosen!r}: rendering supports {BACKENDS}")
        return chosen
    failures = []
    for candidate in CANDIDATES:
        reason = _probe(candidate)
        if reason is None:
            return candidate
        failures.append(f"{candidate}: {reason}")
    raise RenderBackendError(
        "no headless OpenGL backend works (" + "; ".join(failures) + "): " + INSTALL_HINT
    )


def gl_context(width: int, height: int) -> Any:
    """A current OpenGL context of the chosen backend, for MuJoCo's offscreen renderer."""
    name = backend()
    platform = os.environ.get("PYOPENGL_PLATFORM")
    if name in ("egl", "osmesa") and platform not in (None, name):
        raise RenderBackendError(
            f"PYOPENGL_PLATFORM={platform} but MuJoCo renders with {name}: unset one or make "
            "them agree"
        )
    try:
        module = importlib.import_module(f"mujoco.{name}")
        context = module.GLContext(width, height)
        context.make_current()
    except Exception as error:  # any loader or driver failure: name the backend and the fix
        raise RenderBackendError(
            f"OpenGL backend {name!r} failed ({type(error).__name__}: {error}): {INSTALL_HINT}"
        ) from error
    return context
