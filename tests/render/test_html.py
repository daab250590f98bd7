"""The HTML viewer: geom poses from MuJoCo per frame, and a page headless Chromium draws.

About 5 s (two Chromium launches with SwiftShader WebGL).
"""

import json
import re

import numpy as np
import pytest
from render_helpers import POLE_XML, chromium, dump_dom, screenshot

from accelrl.render import write_render
from accelrl.render.html import trajectory_scene

SHAPES_XML = """
<mujoco>
  <asset><mesh name="tetra" vertex="0 0 0  1 0 0  0 1 0  0 0 1"/></asset>
  <worldbody>
    <geom type="plane" size="0 0 1"/>
    <geom type="mesh" mesh="tetra" pos="3 3 0"/>
    <geom type="box" size="1 1 1" group="3"/>
    <body name="ball" pos="0 0 1">
      <freejoint/>
      <geom type="sphere" size="0.1" pos="0 0 0"/>
      <geom type="capsule" size="0.05 0.2" pos="0.3 0 0"/>
      <geom type="ellipsoid" size="0.1 0.2 0.3" pos="0 0.3 0"/>
      <geom type="cylinder" size="0.1 0.2" pos="0 0 0.3"/>
      <geom type="box" size="0.1 0.2 0.3" pos="-0.3 0 0" rgba="1 0 0 1"/>
    </body>
  </worldbody>
</mujoco>
"""


def ball_trajectory(frames):
    """A free body moving up and spinning about z."""
    t = np.linspace(0.0, 1.0, frames)
    angle = 2.0 * t
    quat = np.stack([np.cos(angle / 2), 0 * t, 0 * t, np.sin(angle / 2)], axis=1)
    return np.concatenate([np.stack([t, 0 * t, 1 + t], axis=1), quat], axis=1)


def test_scene_has_the_drawable_geoms_at_their_mujoco_poses():
    episodes = [ball_trajectory(5), ball_trajectory(3)]
    with pytest.warns(UserWarning, match="mjGEOM_MESH"):
        scene = trajectory_scene(SHAPES_XML, episodes, dt=0.05)
    types = [g["type"] for g in scene["geoms"]]
    # group 3 is hidden in MuJoCo's viewers; the mesh is skipped with a warning
    assert types == ["plane", "sphere", "capsule", "ellipsoid", "cylinder", "box"]
    assert scene["geoms"][5]["rgba"] == [1, 0, 0, 1]
    assert scene["step"] == [[0, t] for t in range(5)] + [[1, t] for t in range(3)]
    qpos = np.concatenate(episodes)
    pos = np.array(scene["pos"]).reshape(len(qpos), 6, 3)
    quat = np.array(scene["quat"]).reshape(len(qpos), 6, 4)
    np.testing.assert_allclose(pos[:, 1], qpos[:, :3], atol=1e-4)  # the sphere is the body
    np.testing.assert_allclose(np.abs(np.sum(quat[:, 1] * qpos[:, 3:], axis=1)), 1, atol=1e-3)
    # the capsule sits 0.3 along the body's x axis, which turns with the body
    angle = 2.0 * np.linspace(0, 1, 5)
    offset = 0.3 * np.stack([np.cos(angle), np.sin(angle), 0 * angle], axis=1)
    np.testing.assert_allclose(pos[:5, 2], qpos[:5, :3] + offset, atol=1e-4)


def test_page_is_self_contained(tmp_path):
    path = tmp_path / "ball.html"
    with pytest.warns(UserWarning):
        write_render(path, SHAPES_XML, [ball_trajectory(4)], dt=0.05)
    page = path.read_text()
    assert not re.search(r"\b(src|href)\s*=|https?:|@import", page)
    data = re.search(r'<script id="trajectory" type="application/json">(.*?)</script>', page, re.S)
    assert len(json.loads(data.group(1))["pos"]) == 4


def test_chromium_draws_the_trajectory(tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip("Chromium is not installed (apt-get install chromium; .ci/run installs it)")
    page, png = tmp_path / "pole.html", tmp_path / "pole.png"
    qpos = np.stack([np.linspace(0, 0.5, 40), np.linspace(0.5, 2.0, 40)], axis=1)
    write_render(page, POLE_XML, [qpos], dt=0.02)
    label = re.search(r'<span id="label">(.*?)</span>', dump_dom(browser, page, tmp_path / "dom"))
    assert re.fullmatch(r"episode 1, step \d+ \(frame \d+/40\)", label.group(1)), label.group(1)
    screenshot(browser, page, png, tmp_path / "png", size=(640, 480))
    import imageio.v3 as iio

    canvas = iio.imread(png)[:440, :, :3].reshape(-1, 3).astype(int)  # above the 40 px bar
    background = np.array([28, 33, 41])  # the viewer's clear colour
    drawn = np.abs(canvas - background).sum(axis=1) > 30
    assert drawn.mean() > 0.2, f"only {drawn.mean():.1%} of the canvas differs from the background"
    assert len(np.unique(canvas, axis=0)) > 100  # shaded geometry, not a flat fill
