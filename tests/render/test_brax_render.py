"""Brax's envs render like ours: the MuJoCo model their System was built from, with the qpos of
their pipeline state (Brax is in the dev extra; the test skips without it)."""

import imageio.v3 as iio
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from accelrl.envs import make
from accelrl.render import model_of, renderable, write_render
from accelrl.render.html import trajectory_scene

pytest.importorskip("brax")
STEPS = 12


def test_a_brax_env_renders_to_gif_and_html(tmp_path):
    env = renderable(make("brax:inverted_pendulum"), "brax:inverted_pendulum")
    model = model_of(env)

    @jax.jit
    def rollout(key):  # the cart pushed one way: it moves and the pole falls
        state, _ = env.reset(key)

        def body(state, _):
            state, _ = env.step(state, jnp.ones(1))
            return state, env.qpos(state)

        return jax.lax.scan(body, state, None, length=STEPS)[1]

    qpos = np.asarray(rollout(jax.random.PRNGKey(0)))
    assert qpos.shape == (STEPS, model.nq) and np.ptp(qpos[:, 0]) > 0.01
    gif = tmp_path / "brax.gif"
    write_render(gif, model, [qpos], env.dt)
    frames = iio.imread(gif, index=None)
    assert frames.shape[0] == STEPS and frames[0].std() > 10
    assert np.abs(frames[0].astype(int) - frames[-1]).mean() > 0.5
    scene = trajectory_scene(model, [qpos], env.dt)
    assert {g["type"] for g in scene["geoms"]} >= {"capsule"} and len(scene["pos"]) == STEPS
