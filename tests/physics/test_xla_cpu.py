"""The XLA:CPU workaround of physics/xla_cpu.py: applied on the CPU, never over a user's value,
and a batched Ant step at batch 512 (which deadlocked without it) returns."""

import os
import subprocess
import sys

import pytest

from physics.xla_cpu import CPU_XLA_FLAGS, add_cpu_xla_flags


def test_flags_are_added_once_and_keep_the_users_choice(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    add_cpu_xla_flags(env)
    add_cpu_xla_flags(env)
    assert env["XLA_FLAGS"].split() == ["--xla_force_host_platform_device_count=4", *CPU_XLA_FLAGS]
    mine = {"XLA_FLAGS": "--xla_cpu_enable_concurrency_optimized_scheduler=true"}
    add_cpu_xla_flags(mine)
    assert mine["XLA_FLAGS"] == "--xla_cpu_enable_concurrency_optimized_scheduler=true"
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    untouched: dict[str, str] = {}
    add_cpu_xla_flags(untouched)
    assert untouched == {}


@pytest.mark.slow
def test_batched_ant_step_returns_at_batch_512():
    code = """
import jax, jax.numpy as jnp
import physics
from accelrl.envs.locomotion import ant
sys_ = ant.Ant().sys
states = jax.vmap(lambda _: physics.init(sys_))(jnp.arange(512))
step = jax.jit(jax.vmap(lambda s: physics.step(sys_, s, jnp.zeros(sys_.nu), 1)))
out = step(states)
assert bool(jnp.isfinite(out.q).all())
print("ok")
"""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]
