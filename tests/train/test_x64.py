"""Training where the user has turned on ``jax_enable_x64`` (for float64 physics, say, which
then runs in float64: tests/physics/test_float64.py): the learners stay float32, as without it.
Before, every scan carry that began float32 and came out float64 stopped the compile: a
default-typed param (log_scale), one_hot, integer sums, rlax's padding in the R2D2 targets."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from accelrl.config import apply_overrides
from accelrl.train import train
from configs import load_preset
from tests.train.test_r2d2_run import SMALL as R2D2_SMALL

RUNS = {
    # continuous actions on our physics (float64 under x64) and integer episode statistics
    "inverted_pendulum_vtrace": [
        "env.num_envs=4",
        "agent.unroll_length=8",
        "agent.num_minibatches=1",
        "agent.hidden_sizes=[16]",
        "iterations_per_chunk=2",
        "eval_episodes=1",
    ],
    # a recurrent Q-learner with its replay priorities
    "cartpole_r2d2": [*R2D2_SMALL, "iterations_per_chunk=4", "eval_episodes=1"],
}


@pytest.mark.parametrize("preset", list(RUNS))
def test_training_under_x64_keeps_float32_learners(x64, tmp_path, preset):
    config = apply_overrides(load_preset(preset), RUNS[preset])
    result = train(config, tmp_path, max_chunks=1)
    params = jax.tree.leaves(result.state.params)
    assert params and {p.dtype for p in params} == {jnp.dtype(jnp.float32)}
    assert all(np.isfinite(p).all() for p in params)
    assert result.env_steps > 0
