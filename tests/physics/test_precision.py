"""Every matrix product of a physics step asks for float32 precision.

On GPUs JAX's default precision lets XLA multiply float32 in TF32 (10-bit mantissa); a product
traced without an explicit precision would run so there, and drift from MuJoCo. The check runs
on the traced program, so it holds on any backend.
"""

import jax
import jax.numpy as jnp
from jax.extend.core import ClosedJaxpr, Jaxpr

import physics
from tests.physics.gym_assets import gym_asset


def _dot_precisions(jaxpr: Jaxpr) -> list:
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            found.append(eqn.params["precision"])
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(sub, ClosedJaxpr):
                    found += _dot_precisions(sub.jaxpr)
                elif isinstance(sub, Jaxpr):
                    found += _dot_precisions(sub)
    return found


def test_step_and_its_gradient_multiply_in_float32():
    sys = physics.load_mjcf(gym_asset("ant"), max_contacts=8)
    state = physics.init(sys)
    ctrl = jnp.full((sys.nu,), 0.5)

    def loss(ctrl):
        return jnp.sum(physics.step(sys, state, ctrl, n_substeps=2).q)

    for fn in (loss, jax.grad(loss)):
        precisions = _dot_precisions(jax.make_jaxpr(fn)(ctrl).jaxpr)
        assert precisions, "no matrix products traced"
        loose = [p for p in precisions if p is None or jax.lax.Precision.HIGHEST not in p]
        assert not loose, f"{len(loose)} of {len(precisions)} products without float32 precision"
