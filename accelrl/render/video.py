"""Frames of a qpos trajectory through MuJoCo's OpenGL renderer, written as GIF or MP4.

The scene is set from each frame's qpos with `mj_forward` (so it shows exactly the model the
physics loaded) and drawn by a camera that tracks the root body from the side.
"""

from __future__ import annotations

import copy
from pathlib import Path

import mujoco
import numpy as np

from accelrl.render.gl import gl_context


def load_model(source: str | mujoco.MjModel, nq: int) -> mujoco.MjModel:
    """MuJoCo's model of `source` (MJCF text, or a model: copied, as rendering changes its
    visual settings), checked to have `nq` position coordinates."""
    if isinstance(source, str):
        model = mujoco.MjModel.from_xml_string(source)
    else:
        model = copy.deepcopy(source)
    if model.nq != nq:
        raise ValueError(f"trajectory has {nq} coordinates per frame, the model has nq={model.nq}")
    return model


def tracking_camera(model: mujoco.MjModel, data: mujoco.MjData) -> mujoco.MjvCamera:
    """A camera following the first body under the world from the side, far enough back to
    frame every moving geom as posed in `data`."""
    moving = model.geom_bodyid > 0
    root = data.subtree_com[1] if model.nbody > 1 else np.zeros(3)
    reach = np.linalg.norm(data.geom_xpos[moving] - root, axis=1) + model.geom_rbound[moving]
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    camera.trackbodyid = min(1, model.nbody - 1)
    camera.distance = 3.0 * max(float(reach.max(initial=0.0)), 0.3)
    camera.azimuth, camera.elevation = 90.0, -20.0
    return camera


def render_frames(
    source: str | mujoco.MjModel, qpos: np.ndarray, width: int = 320, height: int = 240
) -> np.ndarray:
    """RGB frames [T, height, width, 3] (uint8) of the model at each row of `qpos` [T, nq]."""
    qpos = np.asarray(qpos, np.float64)
    if qpos.ndim != 2 or len(qpos) == 0:
        raise ValueError(f"qpos must be [T>0, nq], got shape {qpos.shape}")
    model = load_model(source, qpos.shape[1])
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
    model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    data = mujoco.MjData(model)
    context = gl_context(width, height)
    try:
        scene = mujoco.MjvScene(model, maxgeom=10_000)
        render_context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, render_context)
        viewport = mujoco.MjrRect(0, 0, width, height)
        # Shadows and reflections cost 10x the rest with Mesa's software driver.
        scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
        scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
        data.qpos[:] = qpos[0]
        mujoco.mj_forward(model, data)
        camera, option = tracking_camera(model, data), mujoco.MjvOption()
        frames = np.empty((len(qpos), height, width, 3), np.uint8)
        for t, q in enumerate(qpos):
            data.qpos[:] = q
            mujoco.mj_forward(model, data)
            mujoco.mjv_updateScene(
                model, data, option, None, camera, mujoco.mjtCatBit.mjCAT_ALL, scene
            )
            mujoco.mjr_render(viewport, scene, render_context)
            mujoco.mjr_readPixels(frames[t], None, viewport, render_context)
        render_context.free()
    finally:
        context.free()
    return frames[:, ::-1]  # OpenGL rows run bottom-up


def write_video(path: Path, frames: np.ndarray, fps: float) -> None:
    """Writes `frames` [T, H, W, 3] as a looping GIF or an H.264 MP4, by `path`'s suffix."""
    import imageio.v3 as iio

    suffix = Path(path).suffix.lower()
    if suffix == ".gif":
        # GIF delays are whole hundredths of a second; browsers slow anything under 0.02 s.
        delay_ms = max(20, 10 * round(100 / fps))
        iio.imwrite(path, frames, extension=".gif", duration=delay_ms, loop=0)
    elif suffix == ".mp4":
        iio.imwrite(path, frames, plugin="FFMPEG", fps=fps, codec="libx264", macro_block_size=1)
    else:
        raise ValueError(f"{path}: video suffix must be .gif or .mp4")
