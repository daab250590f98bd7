"""A self-contained HTML page that replays a qpos trajectory in 3D (WebGL, no network).

MuJoCo's `mj_forward` gives every geom's world pose at every frame; the page gets the geom
shapes and those poses as JSON inside the bundled viewer (`viewer.html`), which draws them
with a few hundred lines of plain WebGL.
"""

from __future__ import annotations

import html
import json
import warnings
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import mujoco
import numpy as np

from accelrl.render.video import load_model, tracking_camera

_GEOM = mujoco.mjtGeom
SHAPES = {
    int(_GEOM.mjGEOM_PLANE): "plane",
    int(_GEOM.mjGEOM_SPHERE): "sphere",
    int(_GEOM.mjGEOM_CAPSULE): "capsule",
    int(_GEOM.mjGEOM_ELLIPSOID): "ellipsoid",
    int(_GEOM.mjGEOM_CYLINDER): "cylinder",
    int(_GEOM.mjGEOM_BOX): "box",
    int(_GEOM.mjGEOM_MESH): "mesh",
    int(_GEOM.mjGEOM_HFIELD): "mesh",  # drawn as the triangles of its surface
}
_MESH, _HFIELD = int(_GEOM.mjGEOM_MESH), int(_GEOM.mjGEOM_HFIELD)
VISIBLE_GROUPS = 3  # MuJoCo's viewers show geom groups 0, 1 and 2 by default
DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)  # a geom with this colour and a material takes the material's


def _drawn_geoms(model: mujoco.MjModel) -> list[int]:
    """Geoms a MuJoCo viewer would show, of the shapes the page can draw (others: warning)."""
    shown = [
        g
        for g in range(model.ngeom)
        if model.geom_group[g] < VISIBLE_GROUPS and model.geom_rgba[g][3] > 0
    ]
    types = {int(model.geom_type[g]) for g in shown}
    skipped = sorted(_GEOM(t).name for t in types - SHAPES.keys())
    if skipped:
        warnings.warn(f"the HTML viewer does not draw geoms of type {skipped}", stacklevel=3)
    return [g for g in shown if int(model.geom_type[g]) in SHAPES]


def _mesh_triangles(model: mujoco.MjModel, mesh: int) -> dict[str, list]:
    """A mesh as flat-shaded triangles, in its geom's frame (MuJoCo's mesh_vert are centred
    and turned to the geom's frame)."""
    vert = model.mesh_vert[
        model.mesh_vertadr[mesh] : model.mesh_vertadr[mesh] + model.mesh_vertnum[mesh]
    ]
    face = model.mesh_face[
        model.mesh_faceadr[mesh] : model.mesh_faceadr[mesh] + model.mesh_facenum[mesh]
    ]
    return _triangles(vert[face])


def _hfield_triangles(model: mujoco.MjModel, hfield: int) -> dict[str, list]:
    """A height field's surface as flat-shaded triangles in its geom's frame: two per grid
    cell, split along the diagonal MuJoCo collides with."""
    nrow, ncol = int(model.hfield_nrow[hfield]), int(model.hfield_ncol[hfield])
    sx, sy, top, _ = model.hfield_size[hfield]
    start = model.hfield_adr[hfield]
    z = model.hfield_data[start : start + nrow * ncol].reshape(nrow, ncol) * top
    x, y = np.linspace(-sx, sx, ncol), np.linspace(-sy, sy, nrow)
    grid = np.stack(np.broadcast_arrays(x[None, :], y[:, None], z), axis=-1)  # [nrow, ncol, 3]
    a, b, c, d = grid[1:, :-1], grid[:-1, :-1], grid[1:, 1:], grid[:-1, 1:]
    corners = np.concatenate([np.stack([a, b, c], -2), np.stack([b, d, c], -2)])
    return _triangles(corners.reshape(-1, 3, 3))


def _triangles(corners: np.ndarray) -> dict[str, list]:
    """Triangles [n, 3, 3] (counter-clockwise seen from outside) as the viewer draws them:
    each with its own three vertices and its normal (flat shading)."""
    normal = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-12)
    return {
        "pos": np.round(corners.ravel(), 5).tolist(),
        "nrm": np.round(np.repeat(normal, 3, axis=0).ravel(), 3).tolist(),
    }


def _surface(model: mujoco.MjModel, g: int) -> tuple[int, int] | None:
    """(type, mesh or hfield id) of a geom the viewer draws as triangles, else None."""
    t = int(model.geom_type[g])
    return (t, int(model.geom_dataid[g])) if t in (_MESH, _HFIELD) else None


def _rgba(model: mujoco.MjModel, g: int) -> list[float]:
    rgba, material = model.geom_rgba[g], model.geom_matid[g]
    if material >= 0 and np.allclose(rgba, DEFAULT_RGBA):
        rgba = model.mat_rgba[material]
    return [round(float(x), 3) for x in rgba]


def trajectory_scene(
    source: str | mujoco.MjModel, episodes: Sequence[np.ndarray], dt: float
) -> dict:
    """The viewer's JSON: geom shapes, per-frame geom poses and camera target, frame labels.

    `episodes` are qpos trajectories [T_i, nq] played one after another; `dt` is the time
    between frames in seconds.
    """
    if not episodes or any(len(q) == 0 for q in episodes):
        raise ValueError("need at least one episode, each with at least one frame")
    model = load_model(source, np.shape(episodes[0])[1])
    data = mujoco.MjData(model)
    geoms = _drawn_geoms(model)
    pos, quat, target, labels = [], [], [], []
    quaternion = np.empty(4)
    for e, qpos in enumerate(episodes):
        for t, q in enumerate(np.asarray(qpos, np.float64)):
            data.qpos[:] = q
            mujoco.mj_forward(model, data)
            frame_quat = []
            for g in geoms:
                mujoco.mju_mat2Quat(quaternion, data.geom_xmat[g])
                frame_quat.extend(quaternion)
            pos.append(np.round(data.geom_xpos[geoms].ravel(), 4).tolist())
            quat.append(np.round(frame_quat, 4).tolist())
            target.append(np.round(data.subtree_com[min(1, model.nbody - 1)], 4).tolist())
            labels.append([e, t])
    data.qpos[:] = episodes[0][0]
    mujoco.mj_forward(model, data)
    surfaces = sorted({s for g in geoms if (s := _surface(model, g))})
    return {
        "dt": float(dt),
        "distance": float(tracking_camera(model, data).distance),
        "geoms": [
            {
                "type": SHAPES[int(model.geom_type[g])],
                "size": [round(float(x), 4) for x in model.geom_size[g]],
                "rgba": _rgba(model, g),
                **({"mesh": surfaces.index(_surface(model, g))} if _surface(model, g) else {}),
            }
            for g in geoms
        ],
        "meshes": [
            _mesh_triangles(model, k) if t == _MESH else _hfield_triangles(model, k)
            for t, k in surfaces
        ],
        "pos": pos,
        "quat": quat,
        "target": target,
        "step": labels,
    }


def write_html(
    path: Path, source: str | mujoco.MjModel, episodes: Sequence[np.ndarray], dt: float
) -> None:
    """Writes the viewer page for `episodes` (see `trajectory_scene`) to `path`."""
    scene = json.dumps(trajectory_scene(source, episodes, dt), separators=(",", ":"))
    template = resources.files("accelrl.render").joinpath("viewer.html").read_text("utf-8")
    page = template.replace("__TITLE__", html.escape(f"accelrl: {Path(path).stem}")).replace(
        "__TRAJECTORY__", scene.replace("</", "<\\/")
    )
    Path(path).write_text(page, encoding="utf-8")
