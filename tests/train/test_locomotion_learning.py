"""Locomotion presets learn on our physics in the fused V-trace step, within CI-sized budgets.

The check is the mean return of the episodes that ended during the last chunk of training
(stochastic policy) against what the initial policy gets in the first chunk: about 8-10 on
InvertedPendulum (it falls within 0.2 s) and about -44 on Reacher (distance plus control cost
over 50 steps). Episodes are capped (200 and 50 steps) so that finished episodes are not only
the failures. An evaluation pass is skipped on purpose: it would compile the physics again.
"""

import pytest

from accelrl.config import apply_overrides
from accelrl.train import train
from configs import load_preset
from configs._locomotion import accelerator_available, pick


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
        ("inverted_pendulum_vtrace", ["total_env_steps=150000", "env.max_steps=200"], 60.0),
        ("reacher_vtrace", ["total_env_steps=150000", "env.max_steps=50"], -36.0),
    ],
)
def test_locomotion_learns(tmp_path, preset, overrides, threshold):
    config = apply_overrides(
        load_preset(preset), [*overrides, "eval_episodes=0", "checkpoint_every_chunks=1000"]
    )
    result = train(config, tmp_path)
    assert result.recent_return is not None and result.recent_return >= threshold, result
