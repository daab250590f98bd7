"""Recorded evaluation episodes rendered through MuJoCo's renderer to GIF and MP4.

The env is a small MJCF model inside the full wrapper stack, so the recorded qpos reaches the
base state through every wrapper. About 10 s on 2 CPU cores (software GL).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from render_helpers import FallingPole

from accelrl.envs import (
    AutoReset,
    EpisodeStatistics,
    NormalizeObservation,
    TimeLimit,
    Vectorize,
)
from accelrl.evaluate import qpos_recorder, record_episodes
from accelrl.render import gl, write_render

iio = pytest.importorskip("imageio.v3")
STEPS = 16  # steps per episode (0.02 s each)


def pole_stack(num_envs):
    env = TimeLimit(FallingPole(), STEPS)
    return NormalizeObservation(Vectorize(AutoReset(EpisodeStatistics(env)), num_envs))


def zero_policy(state, timestep, is_first):
    return state, jnp.zeros((timestep.observation.shape[0], 1))


@pytest.fixture(scope="module")
def episodes():
    env = pole_stack(num_envs=3)
    result, trajectories = record_episodes(env, zero_policy, (), 3, qpos_recorder(env, 2), seed=4)
    reset_state, _ = env.reset(jax.random.PRNGKey(4))
    return result, trajectories, np.asarray(env.unwrapped_state(reset_state).q)


def test_records_the_first_episodes_from_reset(episodes):
    result, trajectories, reset_q = episodes
    assert result.episodes == 3 and result.mean_length == STEPS
    assert [t.shape for t in trajectories] == [(STEPS, 2), (STEPS, 2)]
    for k, trajectory in enumerate(trajectories):
        np.testing.assert_allclose(trajectory[0], reset_q[k])
        assert np.all(np.diff(trajectory[:, 1]) > 0)  # the tilted pole keeps falling over


def test_gif_frames_show_the_motion(episodes, tmp_path):
    _, trajectories, _ = episodes
    path = tmp_path / "pole.gif"
    write_render(path, FallingPole.mjcf_xml, trajectories, FallingPole.dt)
    frames = iio.imread(path, index=None)
    # 50 steps/s: every 2nd frame is kept (25 fps), both episodes in turn.
    per_episode = STEPS // 2
    assert frames.shape == (2 * per_episode, 240, 320, 3)
    assert frames[0].std() > 10  # a scene, not a blank image
    changes = np.abs(np.diff(frames[:per_episode].astype(int), axis=0)).mean(axis=(1, 2, 3))
    assert changes.min() > 0.05  # every frame of the fall moves pixels
    assert np.abs(frames[0].astype(int) - frames[per_episode - 1]).mean() > 2


def test_mp4_is_readable(episodes, tmp_path):
    pytest.importorskip("imageio_ffmpeg", reason="MP4 needs imageio-ffmpeg (render extra)")
    _, trajectories, _ = episodes
    path = tmp_path / "pole.mp4"
    write_render(path, FallingPole.mjcf_xml, trajectories[:1], dt=0.01)
    # Played as 100 steps/s: every 4th frame is kept (25 fps), so 16 steps give 4 frames.
    frames = iio.imread(path, plugin="FFMPEG", index=None)
    assert frames.shape == (4, 240, 320, 3) and frames.std() > 10
    assert iio.immeta(path, plugin="FFMPEG")["fps"] == pytest.approx(25)


def test_missing_backend_names_what_to_install(monkeypatch):
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.setattr(gl, "CANDIDATES", ("no_such_backend",))
    with pytest.raises(gl.RenderBackendError, match="no_such_backend.*apt-get install libegl1"):
        gl.backend.__wrapped__()


def test_unknown_mujoco_gl_is_refused(monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "vulkan")
    with pytest.raises(gl.RenderBackendError, match="MUJOCO_GL='vulkan'"):
        gl.backend.__wrapped__()
