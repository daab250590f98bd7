"""Called eagerly, physics' API (and load_mjcf's own computations) runs one compiled program
per function, not one per operation; inside the caller's jit it traces inline and gives the
same result. Derivatives through it keep float32 products: test_precision.py."""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import physics
from tests.physics.gym_assets import gym_asset

LOWERED = "/jax/core/compile/jaxpr_to_mlir_module_duration"  # one per program built


def programs_built(fn: Callable[[], object]) -> int:
    """How many programs JAX lowers while running ``fn`` (cache hits excluded)."""
    events = []

    def listener(event: str, duration: float, **_: object) -> None:
        if event == LOWERED:
            events.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        jax.block_until_ready(fn())
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    return len(events)


def test_eager_calls_are_one_program_each_and_match_the_jitted_step():
    loaded = []  # load_mjcf: about a dozen programs (was ~250, its work run op by op)
    assert programs_built(lambda: loaded.append(physics.load_mjcf(gym_asset("hopper")))) <= 25
    sys = loaded[0]
    ctrl = jnp.full((sys.nu,), 0.3)
    assert programs_built(lambda: physics.init(sys)) == 1
    state = physics.init(sys)
    assert programs_built(lambda: physics.step(sys, state, ctrl, n_substeps=3)) == 1
    assert programs_built(lambda: physics.forward(sys, state, ctrl)) == 1
    assert programs_built(lambda: physics.forward_kinematics(sys, state.q)) == 1
    # a second model of the same structure reuses the programs (the System is an argument)
    other = physics.load_mjcf(gym_asset("hopper"))
    assert programs_built(lambda: physics.init(other)) == 0

    eager = physics.step(sys, state, ctrl, n_substeps=3)
    inline = jax.jit(lambda s: physics.step(sys, s, ctrl, n_substeps=3))(state)
    np.testing.assert_allclose(eager.q, inline.q, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(eager.qd, inline.qd, rtol=1e-5, atol=1e-5)


def test_eager_calls_keep_no_link_to_the_callers_numpy_arrays(x64):
    # XLA:CPU may read a numpy argument in place when the computation runs, after the call
    # returned: a State from MuJoCo's d.qpos (float64, so under x64 passed as it is) took the
    # positions of the mj_step that followed in a few calls in a hundred. A computation queued
    # first makes init's run late every time.
    mujoco = pytest.importorskip("mujoco")
    path = gym_asset("hopper")
    m = mujoco.MjModel.from_xml_path(path)
    busy = jax.jit(lambda x: jnp.linalg.matrix_power(x, 8))
    sys, big = physics.load_mjcf(path), jnp.eye(1500) * 0.5
    jax.block_until_ready(busy(big))
    for i in range(3):
        d = mujoco.MjData(m)
        d.qpos[:], d.qvel[:] = 0.01 * i, 0.2
        expected = jax.block_until_ready(physics.init(sys, d.qpos.copy(), d.qvel.copy()))
        busy(big)  # not waited for: init's computation queues behind it
        state = physics.init(sys, d.qpos, d.qvel)
        mujoco.mj_step(m, d, nstep=5)
        np.testing.assert_array_equal(state.q, expected.q)
        np.testing.assert_array_equal(state.qd, expected.qd)
