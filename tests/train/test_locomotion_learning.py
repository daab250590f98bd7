"""Locomotion presets learn on our physics in the fused V-trace step, within CI-sized budgets.

The check: training stops at its target return (`target_return`: the latest 100 episodes of the
stochastic policy average it) within the budget. What the initial policy gets: about 8-10 on
InvertedPendulum (it falls within 0.2 s) and about -44 on Reacher (distance plus control cost
over 50 steps). The networks are smaller than the presets' (64x64) to keep the budget
CI-sized. Episodes are capped (200 and 50 steps) so that finished episodes are not only the
failures. An evaluation pass is skipped on purpose: it would compile the physics again.
"""

import pytest

from accelrl.config import apply_overrides
from accelrl.train import train
from configs import load_preset
from configs._locomotion import pick
from physics.xla_cpu import accelerator_available


def test_presets_pick_batch_sizes_by_device(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert not accelerator_available() and pick(cpu=64, accelerator=4096) == 64
    assert load_preset("ant_vtrace").env.num_envs == 64
    monkeypatch.setenv("JAX_PLATFORMS", "cuda,cpu")
    assert accelerator_available() and load_preset("ant_vtrace").env.num_envs == 4096


@pytest.mark.slow
@pytest.mark.parametrize(
    "preset, overrides, threshold",
    [
        # random policy ~6-10; measured 75-91 over the last chunks (80k steps, ~35 s on 2 cores)
        (
            "inverted_pendulum_vtrace",
            ["total_env_steps=80000", "env.max_steps=200", "agent.num_epochs=2"],
            50.0,
        ),
        # the same task as Brax defines it, on Brax's own physics (generalized pipeline)
        (
            "inverted_pendulum_vtrace",
            [
                "env.name=brax:inverted_pendulum",
                "total_env_steps=80000",
                "env.max_steps=200",
                "agent.num_epochs=2",
            ],
            50.0,
        ),
        # random policy ~-46; measured -10 to -23 after 120k steps (~40 s on 2 cores). The
        # preset's 3e-4 suits its 2M-step schedule (1e-3 diverges there); over a schedule
        # 1/16 as long, 1e-3 decaying to 0 learns faster (3e-4 reaches only ~-36).
        ("reacher_vtrace", ["total_env_steps=120000", "agent.learning_rate=1e-3"], -32.0),
    ],
)
def test_locomotion_learns(tmp_path, preset, overrides, threshold):
    config = apply_overrides(
        load_preset(preset),
        [
            *overrides,
            "agent.hidden_sizes=[64,64]",
            "eval_episodes=0",
            "checkpoint_every_seconds=1e9",
            f"target_return={threshold}",
        ],
    )
    result = train(config, tmp_path)
    assert result.target_reached, result
