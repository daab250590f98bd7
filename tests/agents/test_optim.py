"""make_optimizer: schedules, warmup, gradient clipping and errors."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agents import make_optimizer


@pytest.mark.parametrize(
    "schedule,expected",
    [
        ("constant", [0.0, 0.5, 1.0, 1.0, 1.0, 1.0]),
        ("linear", [0.0, 0.5, 1.0, 2 / 3, 1 / 3, 0.0]),
        ("cosine", [0.0, 0.5, 1.0, 0.75, 0.25, 0.0]),
    ],
)
def test_schedules_with_warmup(schedule, expected):
    _, lr = make_optimizer(1.0, 1.0, schedule=schedule, total_updates=5, warmup_updates=2)
    np.testing.assert_allclose([float(lr(i)) for i in range(6)], expected, atol=1e-6)


def test_updates_are_adam_on_clipped_gradients():
    def run(opt):
        params = {"w": jnp.array([1.0, -2.0])}
        state = opt.init(params)
        out = []
        for g in ([30.0, -40.0], [0.3, 0.1]):  # norms 50 (clipped to 1) and ~0.32 (kept)
            updates, state = opt.update({"w": jnp.array(g)}, state, params)
            out.append(updates["w"])
        return np.stack(out)

    opt, _ = make_optimizer(0.1, max_grad_norm=1.0, total_updates=10)
    expected = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(0.1, eps=1e-5))
    np.testing.assert_allclose(run(opt), run(expected), rtol=1e-5)
    assert not np.allclose(run(opt), run(optax.adam(0.1, eps=1e-5)), rtol=1e-3)


def test_invalid_arguments_raise():
    with pytest.raises(ValueError, match="'exponential'"):
        make_optimizer(1e-3, 0.5, schedule="exponential", total_updates=10)
    with pytest.raises(ValueError, match="warmup_updates"):
        make_optimizer(1e-3, 0.5, total_updates=10, warmup_updates=10)
