"""physics/xla_cpu.py adds its XLA:CPU flags on the CPU only, never over a user's value, and
only those the installed jaxlib knows.

That they prevent the deadlock is shown by test_dynamics_vs_mujoco's batch-512 step.
"""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from physics.xla_cpu import (
    CPU_XLA_FLAGS,
    NETWORK_COMPILE,
    add_cpu_xla_flags,
    cpu_xla_flags,
    network_compile,
    warn_level_zero,
)


def test_flags_are_added_once_and_keep_the_users_choice(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    add_cpu_xla_flags(env)
    add_cpu_xla_flags(env)
    assert env["XLA_FLAGS"].split() == ["--xla_force_host_platform_device_count=4", *CPU_XLA_FLAGS]
    mine = {"XLA_FLAGS": "--xla_cpu_use_fusion_emitters=true"}
    add_cpu_xla_flags(mine)
    assert mine["XLA_FLAGS"].split() == [
        "--xla_cpu_use_fusion_emitters=true",
        *(f for f in CPU_XLA_FLAGS if not f.startswith("--xla_cpu_use_fusion_emitters")),
    ]
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    untouched: dict[str, str] = {}
    add_cpu_xla_flags(untouched)
    assert untouched == {}


def test_networks_get_the_mlir_emitters_back_only_where_this_module_chose_the_older(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    older = "--xla_cpu_use_fusion_emitters=false"
    ours: dict[str, str] = {}
    added = add_cpu_xla_flags(ours)
    assert added == CPU_XLA_FLAGS == tuple(ours["XLA_FLAGS"].split())
    assert network_compile(added) == (
        {"xla_cpu_use_fusion_emitters": True} if older in added else None
    )
    users = {"XLA_FLAGS": older}  # the user's choice holds for every program
    assert network_compile(add_cpu_xla_flags(users)) is None
    assert network_compile(cpu_xla_flags("0.11.2")) is None  # one emitter: nothing to choose
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    assert network_compile(add_cpu_xla_flags({})) is None


def test_the_installed_xla_compiles_a_network_with_its_options():
    x = jnp.asarray(np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8))
    layer = jax.jit(lambda x: jnp.tanh(x @ x), compiler_options=NETWORK_COMPILE)
    np.testing.assert_allclose(layer(x), np.tanh(np.asarray(x) @ np.asarray(x)), atol=1e-5)


def test_flags_follow_the_jaxlib_version():
    assert cpu_xla_flags("0.10.2") == (
        "--xla_cpu_enable_concurrency_optimized_scheduler=false",
        "--xla_cpu_use_fusion_emitters=false",
    )
    # jaxlib 0.11's XLA aborts on the fusion-emitter switch ("Unknown flag in XLA_FLAGS")
    for version in ("0.11.2", "0.11.0.dev20261101", "1.0"):
        assert cpu_xla_flags(version) == ("--xla_cpu_enable_concurrency_optimized_scheduler=false",)


def test_the_installed_xla_accepts_the_flags():
    """A process that imports physics and computes on the CPU runs (XLA kills the process at
    its first computation over a flag it does not know)."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"} | {"JAX_PLATFORMS": "cpu"}
    code = (
        "import os, physics, jax.numpy as jnp; jnp.ones(2).block_until_ready(); "
        "print(os.environ['XLA_FLAGS'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == list(CPU_XLA_FLAGS)


def test_level_zero_is_warned_of_on_the_cpu(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    with pytest.warns(RuntimeWarning, match="miscompiles physics' constraint solver"):
        warn_level_zero({"JAX_DISABLE_MOST_OPTIMIZATIONS": "true"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_level_zero({"JAX_DISABLE_MOST_OPTIMIZATIONS": "0"})
        warn_level_zero({})
        monkeypatch.setenv("JAX_PLATFORMS", "cuda")
        warn_level_zero({"JAX_DISABLE_MOST_OPTIMIZATIONS": "1"})
