"""physics.linalg: the written-out Cholesky solve against the library's, and which one runs."""

import dataclasses

import jax
import jax.extend as jex
import jax.numpy as jnp
import numpy as np
import pytest

import physics
from physics import constraints as con
from physics import linalg
from tests.physics.gym_assets import gym_asset


def _spd(rng: np.random.Generator, batch: int, n: int) -> np.ndarray:
    a = rng.normal(size=(batch, n, n))
    # a condition number of ~1e3, as Ant's mass matrix has
    return (a @ a.transpose(0, 2, 1) + 0.01 * n * np.eye(n)).astype(np.float32)


@pytest.mark.parametrize("n", [1, 2, 5, 14, 23])
@pytest.mark.parametrize("rhs", [(), (3,)])
def test_unrolled_and_library_solve_as_numpy(n, rhs):
    rng = np.random.default_rng(n)
    a = _spd(rng, 4, n)
    b = rng.normal(size=(4, n, *rhs)).astype(np.float32)
    want = np.linalg.solve(a.astype(np.float64), b.astype(np.float64).reshape(4, n, -1))
    for solve in (linalg._unrolled, linalg._library):
        x = np.asarray(jax.vmap(solve)(a, b)).reshape(want.shape)
        np.testing.assert_allclose(x, want, rtol=2e-3, atol=2e-3 * np.abs(want).max())


def test_an_indefinite_matrix_gives_nan_on_both_paths():
    a = jnp.array([[1.0, 2.0], [2.0, 1.0]])
    for solve in (linalg._unrolled, linalg._library):
        assert np.all(np.isnan(solve(a, jnp.ones(2))))


def test_derivatives_match_the_library_for_symmetric_tangents():
    rng = np.random.default_rng(0)
    a, da = _spd(rng, 1, 14)[0], rng.normal(size=(14, 14)).astype(np.float32)
    da = da + da.T  # a stays symmetric: the written-out factor reads the lower triangle only
    b = rng.normal(size=14).astype(np.float32)
    tangents = [
        jax.jvp(lambda a, solve=solve: solve(a, b), (a,), (da,))[1]
        for solve in (linalg._unrolled, linalg._library)
    ]
    np.testing.assert_allclose(*tangents, rtol=1e-3, atol=1e-5)
    grads = [
        jax.grad(lambda b, solve=solve: solve(a, b) @ b)(b)
        for solve in (linalg._unrolled, linalg._library)
    ]
    np.testing.assert_allclose(*grads, rtol=1e-3, atol=1e-5)


def _ops(fn, *args) -> str:
    return jax.jit(fn).lower(*args).as_text()


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the CPU's choice")
def test_the_cpu_takes_the_written_out_primal_solve_only_over_large_batches():
    rng = np.random.default_rng(1)
    for batch, written_out in ((8, False), (linalg.CPU_UNROLL_MIN_BATCH, True)):
        a, b = _spd(rng, batch, 14), rng.normal(size=(batch, 14)).astype(np.float32)
        text = _ops(jax.vmap(linalg.cho_solve_primal), a, b)
        assert ("lapack" not in text) == written_out, batch
        np.testing.assert_allclose(
            jax.vmap(linalg.cho_solve_primal)(a, b),
            jax.vmap(linalg._library)(a, b),
            rtol=2e-3,
            atol=1e-4,
        )
        # the differentiable solve keeps LAPACK on the CPU whatever the batch
        assert "lapack" in _ops(jax.vmap(linalg.cho_solve), a, b)
    # a matrix shared by the batch (unbatched argument) and nested vmaps take the same rule
    a, b = _spd(rng, 1, 14)[0], rng.normal(size=(2, 300, 14)).astype(np.float32)
    x = jax.vmap(jax.vmap(linalg.cho_solve_primal, (None, 0)), (None, 0))(a, b)
    np.testing.assert_allclose(x, np.linalg.solve(a, b[..., None])[..., 0], rtol=2e-3, atol=1e-4)


def _count(jaxpr: jex.core.Jaxpr, primitive: str) -> int:
    """Equations of `primitive` in `jaxpr` and the jaxprs nested in its equations."""
    n = sum(eqn.primitive.name == primitive for eqn in jaxpr.eqns)
    return n + sum(_count(sub, primitive) for sub in jex.core.subjaxprs(jaxpr))


def test_ant_steps_alike_with_either_hessian_form_and_over_few_and_many_worlds():
    """Ant falling onto its feet (contacts and joint limits active) steps to the same states
    with either form of J^T D J (load_mjcf(hessian_form=...) reaches the constraint solver;
    an unknown form is refused at load time), and with the Newton solve written out over many
    worlds or the library's over few. One test, so that the reference program (the default
    form over 8 worlds) compiles once."""
    systems = {
        form: dataclasses.replace(
            physics.load_mjcf(gym_asset("ant"), max_contacts=8, newton_steps=4, hessian_form=form),
            integrator="Euler",
        )
        for form in con.HESSIAN_FORMS
    }
    sys_ = systems["broadcast"]
    many = linalg.CPU_UNROLL_MIN_BATCH
    key_q, key_u = jax.random.split(jax.random.PRNGKey(0))
    q = sys_.qpos0 + 0.1 * jax.random.normal(key_q, (many, sys_.nq))
    lo, hi = sys_.actuator_ctrlrange[:, 0], sys_.actuator_ctrlrange[:, 1]
    ctrl = jax.random.uniform(key_u, (many, sys_.nu), minval=lo, maxval=hi)

    def stepper(s):
        return jax.vmap(lambda state, u: physics.step(s, state, u, n_substeps=5))

    dots = {
        f: _count(jax.make_jaxpr(stepper(s))(*_few(s, q, ctrl)).jaxpr, "dot_general")
        for f, s in systems.items()
    }
    assert dots["matmul"] > dots["broadcast"], dots  # the form reached the solver
    few = {f: (jax.jit(stepper(s)), *_few(s, q, ctrl)) for f, s in systems.items()}
    step_many = jax.jit(stepper(sys_))
    states_many = _init_batch(sys_, q)
    for _ in range(12):  # the ant falls onto its feet: contacts and joint limits are active
        states_many = step_many(states_many, ctrl)
        for f, (step, state, u) in few.items():
            few[f] = (step, step(state, u), u)
    reference = few["broadcast"][1]
    for other in (few["matmul"][1], jax.tree.map(lambda x: x[:8], states_many)):
        np.testing.assert_allclose(other.q, reference.q, atol=1e-5)
        np.testing.assert_allclose(other.qd, reference.qd, atol=1e-4)
    assert np.all(np.isfinite(states_many.qd))
    in_contact = np.abs(reference.cfrc_ext).sum(axis=(1, 2)) > 0
    assert in_contact.sum() >= 6, "the worlds compared are not in contact"
    with pytest.raises(ValueError, match="hessian_form must be one of"):
        physics.load_mjcf(gym_asset("ant"), hessian_form="dense")


_init_batch = jax.jit(jax.vmap(physics.init, in_axes=(None, 0)))
"""Initial states of a batch of configurations, one compiled program per System and batch."""


def _few(sys_: physics.System, q: jax.Array, ctrl: jax.Array) -> tuple:
    """Initial states and controls of the first 8 worlds."""
    return _init_batch(sys_, q[:8]), ctrl[:8]
