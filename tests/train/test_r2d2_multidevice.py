"""R2D2 on 2 CPU devices: envs and replay shards split across them, learning runs on both.

XLA's host device count must be set before JAX starts, so the check runs in a child process
(this file run as a script) with XLA_FLAGS=--xla_force_host_platform_device_count=2.
"""

import os
import subprocess
import sys

OVERRIDES = [
    "env.num_envs=4",
    "r2d2.torso_sizes=[16]",
    "r2d2.lstm_size=16",
    "r2d2.head_size=16",
    "r2d2.burn_in=2",
    "r2d2.trace_length=6",
    "r2d2.period=4",
    "r2d2.batch_size=8",
    "r2d2.replay_capacity=64",
    "r2d2.min_replay_size=8",
    "r2d2.replay_ratio=2",
    "iterations_per_chunk=6",
]


def test_two_devices_shard_envs_and_replay():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    result = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "devices=2 ok" in result.stdout


def _check() -> None:
    import jax
    import numpy as np

    from accelrl.config import apply_overrides
    from accelrl.fused import make_fused_trainer
    from configs import load_preset

    assert jax.device_count() == 2, jax.devices()
    config = apply_overrides(load_preset("cartpole_r2d2"), OVERRIDES)
    trainer = make_fused_trainer(config)
    state = trainer.init(jax.random.PRNGKey(0))
    state, metrics = trainer.compile_chunk(state)(state)
    for leaf in (state.replay.tree, state.replay.items.observation, state.window.observation):
        shards = leaf.addressable_shards
        assert (
            len({s.device for s in shards}) == 2 and shards[0].data.shape[0] == leaf.shape[0] // 2
        )
    # Each shard holds its own devices' envs' sequences: 2 envs x 5 full windows.
    np.testing.assert_array_equal(np.asarray(state.replay.size), [10, 10])
    assert int(state.updates) == 4  # min fill (8) reached at iteration 2 of 6
    assert np.isfinite(float(metrics.losses["loss"]))
    print("devices=2 ok")


if __name__ == "__main__":
    _check()
