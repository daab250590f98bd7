"""4 CPU devices give the parameters of 1 device for the same global batch.

XLA's host device count must be set before JAX starts, so the comparison runs in a child
process (this file run as a script) with XLA_FLAGS=--xla_force_host_platform_device_count=4.
"""

import os
import subprocess
import sys

OVERRIDES = [
    "env.num_envs=8",
    "env.normalize_observation=true",  # shared statistics stay replicated across devices
    "agent.unroll_length=16",
    "agent.num_minibatches=2",
    "agent.num_epochs=2",
    "iterations_per_chunk=3",
]


def test_four_devices_match_one():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    result = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "devices=4 match" in result.stdout


def _compare() -> None:
    import jax
    import numpy as np

    from accelrl.config import apply_overrides
    from accelrl.fused import make_fused_trainer
    from configs import load_preset

    assert jax.device_count() == 4, jax.devices()
    config = apply_overrides(load_preset("cartpole_vtrace"), OVERRIDES)
    states = []
    for devices in (jax.devices()[:1], jax.devices()):
        trainer = make_fused_trainer(config, devices=devices)
        state = trainer.init(jax.random.PRNGKey(0))
        state, _ = trainer.compile_chunk(state)(state)
        if len(devices) == 4:  # the env axis really is split across the devices
            shards = state.timestep.observation.addressable_shards
            assert len(shards) == 4 and shards[0].data.shape[0] == 2
        states.append(jax.device_get(state))
    one, four = states
    for a, b in zip(jax.tree.leaves(one.params), jax.tree.leaves(four.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(one.env_state.stats.mean, four.env_state.stats.mean, rtol=1e-5)
    print("devices=4 match")


if __name__ == "__main__":
    _compare()
