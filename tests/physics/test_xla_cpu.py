"""physics/xla_cpu.py adds its XLA:CPU flags on the CPU only and never over a user's value.

That they prevent the deadlock is shown by test_dynamics_vs_mujoco's batch-512 step.
"""

from physics.xla_cpu import CPU_XLA_FLAGS, add_cpu_xla_flags


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
