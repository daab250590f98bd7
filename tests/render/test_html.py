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
  <asset>
    <mesh name="tetra" vertex="0 0 0  1 0 0  0 1 0  0 0 1"/>
    <hfield name="ground" nrow="2" ncol="2" size="1 1 0.1 0.1"/>
  </asset>
  <worldbody>
    <geom type="plane" size="0 0 1"/>
    <geom type="mesh" mesh="tetra" pos="3 3 0"/>
    <geom type="hfield" hfield="ground" pos="-3 -3 0"/>
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
    scene = trajectory_scene(SHAPES_XML, episodes, dt=0.05)
    types = [g["type"] for g in scene["geoms"]]
    # group 3 is hidden in MuJoCo's viewers; the height field is drawn as its triangles
    assert types == ["plane", "mesh", "mesh", "sphere", "capsule", "ellipsoid", "cylinder", "box"]
    assert scene["geoms"][7]["rgba"] == [1, 0, 0, 1]
    assert scene["step"] == [[0, t] for t in range(5)] + [[1, t] for t in range(3)]
    # the tetrahedron: 4 flat-shaded triangles with unit normals, around its centre
    tetra, ground = (scene["meshes"][scene["geoms"][g]["mesh"]] for g in (1, 2))
    corners, normals = np.reshape(tetra["pos"], (4, 3, 3)), np.reshape(tetra["nrm"], (4, 3, 3))
    np.testing.assert_allclose(np.linalg.norm(normals, axis=-1), 1, atol=1e-3)
    np.testing.assert_allclose(corners.reshape(-1, 3).mean(axis=0), 0, atol=1e-4)
    # the 2 x 2 height field: one cell, two triangles facing up, over its 2 x 2 extent
    corners, normals = np.reshape(ground["pos"], (2, 3, 3)), np.reshape(ground["nrm"], (2, 3, 3))
    np.testing.assert_allclose(normals, np.tile([0.0, 0.0, 1.0], (2, 3, 1)), atol=1e-3)
    np.testing.assert_allclose(np.ptp(corners.reshape(-1, 3), axis=0), [2, 2, 0], atol=1e-4)
    qpos = np.concatenate(episodes)
    pos = np.array(scene["pos"]).reshape(len(qpos), 8, 3)
    quat = np.array(scene["quat"]).reshape(len(qpos), 8, 4)
    np.testing.assert_allclose(pos[:, 1], np.tile([3.25, 3.25, 0.25], (len(qpos), 1)), atol=1e-4)
    np.testing.assert_allclose(pos[:, 2], np.tile([-3, -3, 0], (len(qpos), 1)), atol=1e-4)
    np.testing.assert_allclose(pos[:, 3], qpos[:, :3], atol=1e-4)  # the sphere is the body
    np.testing.assert_allclose(np.abs(np.sum(quat[:, 3] * qpos[:, 3:], axis=1)), 1, atol=1e-3)
    # the capsule sits 0.3 along the body's x axis, which turns with the body
    angle = 2.0 * np.linspace(0, 1, 5)
    offset = 0.3 * np.stack([np.cos(angle), np.sin(angle), 0 * angle], axis=1)
    np.testing.assert_allclose(pos[:5, 4], qpos[:5, :3] + offset, atol=1e-4)


def test_page_is_self_contained(tmp_path):
    path = tmp_path / "ball.html"
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


def test_chromium_draws_a_mesh(tmp_path):
    """A mesh geom alone, filling the view: the page draws its triangles."""
    browser = chromium()
    if browser is None:
        pytest.skip("Chromium is not installed (apt-get install chromium; .ci/run installs it)")
    xml = """<mujoco><asset><mesh name="rock" vertex="-1 -1 -1  1 -1 -1  0 1 -1  0 0 1  .3 .2 .9"/>
      </asset><worldbody><body><freejoint/><geom type="mesh" mesh="rock" rgba="1 .5 0 1"/>
      </body></worldbody></mujoco>"""
    page, png = tmp_path / "rock.html", tmp_path / "rock.png"
    write_render(page, xml, [np.array([[0, 0, 0, 1, 0, 0, 0]] * 3)], dt=0.02)
    screenshot(browser, page, png, tmp_path / "png", size=(320, 240))
    import imageio.v3 as iio

    canvas = iio.imread(png)[:200, :, :3].reshape(-1, 3).astype(int)
    orange = (canvas[:, 0] > 2 * canvas[:, 2] + 40) & (canvas[:, 0] > 100)
    assert orange.mean() > 0.05, f"only {orange.mean():.1%} of the canvas shows the mesh"
    assert len(np.unique(canvas[orange], axis=0)) > 2  # shaded faces, not one flat fill
