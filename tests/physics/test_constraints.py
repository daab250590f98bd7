"""Soft-constraint formulas against numpy/MuJoCo, and the fixed-step solver against MuJoCo."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from physics import collision as col
from physics import constraints as con

solve = jax.jit(con.solve, static_argnames=("iterations", "hessian_form"))


def _np_impedance(pos, solimp):
    dmin, dmax, width, mid, power = solimp
    x = abs(pos) / width
    if x >= 1:
        return dmax
    if x <= mid:
        y = x**power / mid ** (power - 1)
    else:
        y = 1 - (1 - x) ** power / (1 - mid) ** (power - 1)
    return dmin + y * (dmax - dmin)


SOLIMPS = [con.DEFAULT_SOLIMP, (0.5, 0.99, 0.01, 0.3, 3.0), (0.2, 0.8, 0.05, 0.7, 1.0)]


@pytest.mark.parametrize("solimp", SOLIMPS)
def test_impedance_matches_formula(solimp):
    pos = np.linspace(-0.06, 0.06, 241)
    ours = np.asarray(con.impedance(jnp.asarray(pos, jnp.float32), jnp.asarray(solimp)))
    ref = np.array([_np_impedance(p, solimp) for p in pos])
    np.testing.assert_allclose(ours, ref, atol=1e-6)
    grad = jax.vmap(jax.grad(lambda p: con.impedance(p, jnp.asarray(solimp))))(jnp.asarray(pos))
    assert np.all(np.isfinite(grad))


def test_reference_acceleration_matches_formula():
    pos, vel = np.array([-0.01, -0.0004, 0.002]), np.array([0.3, -1.0, 0.0])
    solimp = np.array(con.DEFAULT_SOLIMP)
    d = np.array([_np_impedance(p, solimp) for p in pos])
    for solref, dt in [((0.02, 1.0), 0.002), ((0.005, 0.5), 0.01), ((-1000.0, -50.0), 0.01)]:
        ours = con.reference_acceleration(pos, vel, d, jnp.asarray(solref), solimp, dt)
        tc, dr = solref
        dmax = solimp[1]
        if tc > 0:
            tc = max(tc, 2 * dt)
            k, b = 1 / (dmax**2 * tc**2 * dr**2), 2 / (dmax * tc)
        else:
            k, b = -tc / dmax**2, -dr / dmax
        np.testing.assert_allclose(ours, -b * vel - k * d * pos, rtol=1e-5)
    r = con.regularizer(jnp.array([0.5, 4.0]), jnp.array([0.95, 0.9]))
    np.testing.assert_allclose(r, [0.05 / 0.95 * 0.5, 0.1 / 0.9 * 4.0], rtol=1e-6)


# A sphere on x/y/z slide joints (its translational Jacobian is the identity) and a limited
# slide joint: every constraint Jacobian is built here from the contact frame alone.
MODEL = """
<mujoco><option timestep="0.002" impratio="{impratio}"/><worldbody>
  <geom type="plane" size="1 1 .1" friction="{friction}"/>
  <body pos="0 0 0.1">
    <joint type="slide" axis="1 0 0"/><joint type="slide" axis="0 1 0"/>
    <joint type="slide" axis="0 0 1"/>
    <geom type="sphere" size="0.1" mass="{mass}" friction="{friction}"/>
  </body>
  <body pos="1 0 1">
    <joint type="slide" axis="0 0 1" limited="true" range="-0.1 0.1"/>
    <geom type="sphere" size="0.05" mass="2" contype="0" conaffinity="0"/>
  </body>
</worldbody></mujoco>
"""

STATES = {
    # name: (qpos, qvel, friction, mass, impratio)
    "resting": ([0.0, 0.0, -0.002, 0.0], [0.0, 0.0, 0.0, 0.0], 1.0, 1.0, 1.0),
    "sliding": ([0.1, 0.0, -0.01, 0.15], [0.3, -0.2, -0.1, 0.5], 1.0, 1.0, 1.0),
    "shallow": ([0.0, 0.2, -0.0004, -0.1003], [2.0, 0.5, 0.05, -0.2], 0.5, 3.0, 1.0),
    "impratio": ([0.0, 0.0, -0.003, -0.2], [0.05, 0.02, -0.3, 0.0], 0.8, 1.0, 4.0),
    "airborne": ([0.0, 0.0, 0.05, 0.0], [0.1, 0.0, -0.1, 1.0], 1.0, 1.0, 1.0),
}


def _ours(m, d):
    """Constraint rows and forces from our functions; MuJoCo supplies M, qacc_smooth, poses."""
    dt, solref, solimp = m.opt.timestep, jnp.asarray(con.DEFAULT_SOLREF), con.DEFAULT_SOLIMP
    qpos, qvel = jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32)
    # contact: plane geom 0 vs sphere geom 1
    c = col.collide(
        0,
        2,
        *(
            jnp.asarray(a, jnp.float32)
            for a in (
                d.geom_xpos[0],
                d.geom_xmat[0].reshape(3, 3),
                m.geom_size[0],
                d.geom_xpos[1],
                d.geom_xmat[1].reshape(3, 3),
                m.geom_size[1],
            )
        ),
    )
    mu = float(max(m.geom_friction[0, 0], m.geom_friction[1, 0]))
    jac_rel = jnp.zeros((3, m.nv)).at[:, :3].set(jnp.eye(3))  # sphere body minus world
    rows = c.frame[0] @ jac_rel  # normal, tangent 1, tangent 2
    Jc = con.pyramid_jacobian(rows[0], rows[1:], jnp.full(2, mu))
    diag_c = con.pyramid_diag_approx(m.body_invweight0[1, 0], mu, m.opt.impratio)
    # upper and lower limit of the 4th dof: pos = distance to the limit, J = -/+ 1
    lo, hi = m.jnt_range[3]
    Jl = jnp.zeros((2, m.nv)).at[0, 3].set(-1.0).at[1, 3].set(1.0)
    pos_l = jnp.stack([hi - qpos[3], qpos[3] - lo])
    J = jnp.concatenate([Jl, Jc])
    pos = jnp.concatenate([pos_l, jnp.broadcast_to(c.dist[0], (4,))])
    diag = jnp.concatenate([jnp.full(2, m.dof_invweight0[3]), diag_c])
    mask = pos < 0.0  # margin 0
    aref, R = con.soft_rows(pos, J @ qvel, diag, solref, jnp.asarray(solimp), dt)
    M = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, M)
    res = solve(
        jnp.asarray(M, jnp.float32), jnp.asarray(d.qacc_smooth, jnp.float32), J, aref, R, mask
    )
    return res, J, aref, R, mask, mu


@pytest.mark.parametrize("name", list(STATES))
def test_solver_matches_mujoco(name):
    qpos, qvel, friction, mass, impratio = STATES[name]
    m = mujoco.MjModel.from_xml_string(
        MODEL.format(friction=friction, mass=mass, impratio=impratio)
    )
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    res, J, aref, R, mask, mu = _ours(m, d)
    nefc = d.nefc
    assert int(mask.sum()) == nefc
    # rows MuJoCo made (limit first, then the contact's 4 pyramid edges) match ours
    np.testing.assert_allclose(J[mask], d.efc_J.reshape(nefc, m.nv), atol=1e-6)
    np.testing.assert_allclose(aref[mask], d.efc_aref, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(R[mask], d.efc_R, rtol=1e-5)
    scale = max(1.0, np.abs(d.qfrc_constraint).max())
    np.testing.assert_allclose(res.efc_force[mask], d.efc_force, atol=1e-4 * scale)
    np.testing.assert_allclose(res.qfrc_constraint, d.qfrc_constraint, atol=1e-4 * scale)
    np.testing.assert_allclose(res.qacc, d.qacc, atol=1e-4 * scale)
    if nefc >= 4:
        f = con.pyramid_force(res.efc_force[-4:], jnp.full(2, mu))
        assert f[0] >= 0 and np.hypot(f[1], f[2]) <= mu * f[0] * (1 + 1e-5)


def _sliding():
    """MuJoCo model and data of the sliding state, our rows of it, and the mass matrix."""
    m = mujoco.MjModel.from_xml_string(MODEL.format(friction=1.0, mass=1.0, impratio=1.0))
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = STATES["sliding"][:2]
    mujoco.mj_forward(m, d)
    M = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, M)
    return m, d, _ours(m, d), M


def test_solver_gradients_finite():
    _, d, (_, J, aref, R, mask, _), M = _sliding()

    def loss(qacc_smooth, aref):
        return jnp.sum(solve(jnp.asarray(M, jnp.float32), qacc_smooth, J, aref, R, mask).qacc ** 2)

    g = jax.grad(loss, argnums=(0, 1))(jnp.asarray(d.qacc_smooth, jnp.float32), aref)
    assert all(np.all(np.isfinite(x)) for x in g)


def test_a_hessian_that_rounding_made_indefinite_still_gives_a_finite_solve():
    """float32 rounding can leave H = M + J^T D J without a Cholesky factor (seen with deep
    contacts on an ill-conditioned mass matrix, under another compiler's rounding): here M's
    weak direction rounded to a negative eigenvalue. The Newton step falls back to a Jacobi
    direction there, and the line search still lowers the cost, so the solve stays finite."""
    M = jnp.asarray([[1.0, 1.0], [1.0, 1.0 - 2.0**-19]], jnp.float32)  # eigenvalue -1e-6
    assert not np.isfinite(np.asarray(jax.scipy.linalg.cho_factor(M)[0])).all()
    J = jnp.asarray([[1.0, 0.0]], jnp.float32)
    res = solve(M, jnp.asarray([1.0, -1.0]), J, jnp.ones(1), jnp.ones(1), jnp.ones(1, bool))
    assert all(np.isfinite(np.asarray(x)).all() for x in res), res


def test_unit_rows_match_dense_rows():
    """Joint-limit rows given as unit rows (dof, sign) give the dense-row solution."""
    m, d, (dense, J, aref, R, mask, _), M = _sliding()
    unit = (np.array([3, 3]), np.array([-1.0, 1.0]))  # J[:2] = -e3, +e3
    np.testing.assert_array_equal(con.unit_matrix(unit, m.nv), J[:2])
    res = con.solve(
        jnp.asarray(M, jnp.float32),
        jnp.asarray(d.qacc_smooth, jnp.float32),
        J[2:],
        aref,
        R,
        mask,
        unit_rows=unit,
    )
    for a, b in zip(res, dense, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


SCENE = """
<mujoco><option timestep="0.005"/><worldbody><geom type="plane" size="5 5 .1"/>
  <body pos="0 0 0.3" euler="10 20 30"><freejoint/>
    <geom type="box" size="0.1 0.15 0.2" mass="2"/></body>
  <body pos="0.6 0 0.3" euler="0 80 0"><freejoint/><geom type="capsule" size="0.05 0.3"/>
    <body pos="0 0 0.35"><joint type="hinge" axis="0 1 0" limited="true" range="-30 30"/>
      <geom type="capsule" size="0.05 0.2" fromto="0 0 0 0 0 0.4"/>
      <body pos="0 0 0.4"><joint type="hinge" axis="1 0 0" limited="true" range="-10 10"/>
        <geom type="sphere" size="0.08"/></body></body></body>
</worldbody></mujoco>
"""


@pytest.mark.parametrize("hessian_form", con.HESSIAN_FORMS)
def test_solver_on_mujoco_rows_converges_in_fixed_iterations(hessian_form):
    """Given MuJoCo's own rows (free bodies, a box with 4 contacts, a chain at its limits),
    the default fixed Newton count reproduces qfrc_constraint to float32 accuracy, with either
    form of J^T D J."""
    m = mujoco.MjModel.from_xml_string(SCENE)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    checked = 0
    for step in range(400):
        mujoco.mj_step(m, d)
        if step % 100 != 99:
            continue
        d.qvel[:] += rng.normal(size=m.nv) * 0.5  # kick so that friction slides and sticks
        mujoco.mj_forward(m, d)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M)
        res = solve(
            *(
                jnp.asarray(a, jnp.float32)
                for a in (M, d.qacc_smooth, d.efc_J.reshape(d.nefc, m.nv), d.efc_aref, d.efc_R)
            ),
            jnp.ones(d.nefc, bool),
            hessian_form=hessian_form,
        )
        scale = np.abs(d.qfrc_constraint).max()
        assert d.nefc >= 12 and scale > 50
        np.testing.assert_allclose(res.qfrc_constraint, d.qfrc_constraint, atol=2e-5 * scale)
        checked += 1
    assert checked == 4


def test_an_unknown_hessian_form_is_refused():
    _, d, (_, J, aref, R, mask, _), M = _sliding()
    with pytest.raises(ValueError, match="hessian_form must be one of"):
        con.solve(jnp.asarray(M), jnp.asarray(d.qacc_smooth), J, aref, R, mask, hessian_form="x")


def test_invweight0_matches_mujoco():
    """body/dof_invweight0 (A_ii of contacts and limits) from M and com Jacobians at qpos0."""
    m = mujoco.MjModel.from_xml_string(SCENE)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)  # at qpos0, where MuJoCo's mj_setConst evaluates them
    M = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, M)
    jacp, jacr = np.zeros((m.nbody, 3, m.nv)), np.zeros((m.nbody, 3, m.nv))
    for b in range(m.nbody):
        mujoco.mj_jacBodyCom(m, d, jacp[b], jacr[b], b)
    ours = con.body_invweight0(jnp.asarray(M), jnp.asarray(jacp), jnp.asarray(jacr))
    np.testing.assert_allclose(ours, m.body_invweight0, rtol=1e-4, atol=1e-6)
    # free, free, hinge, hinge: the free joints' dofs average in groups of 3
    group = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 5])
    ours = con.dof_invweight0(jnp.asarray(M), jnp.asarray(group), 6)
    np.testing.assert_allclose(ours, m.dof_invweight0, rtol=1e-4)


def test_exact_line_search_finds_the_minimum_with_force_bounds():
    # 200 random 1-D problems mixing inequality rows ([0, inf)) and friction-loss rows ([-f, f]):
    # the returned step is where phi' crosses zero (phi' is piecewise linear, increasing).
    rng = np.random.default_rng(1)
    n, k = 200, 7
    jar, jd = rng.normal(size=(n, k)) * 5, rng.normal(size=(n, k)) * 3
    R = np.exp(rng.normal(size=(n, k)) * 2)
    f, friction = rng.uniform(0.01, 1, (n, k)), rng.random((n, k)) < 0.5
    lo, hi = np.where(friction, -f, 0.0), np.where(friction, f, np.inf)
    dMd = np.abs(rng.normal(size=n)) + 0.1

    def phi_prime(a, jar, jd, R, lo, hi, dMr, dMd):
        y = np.clip(jar + a * jd, -hi * R, -lo * R)
        return dMr + a * dMd + np.sum(y / R * jd)

    dMr = -np.abs(rng.normal(size=n)) * 5 - [
        phi_prime(0, *p, 0, 0) for p in zip(jar, jd, R, lo, hi, strict=True)
    ]
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731

    @jax.jit
    @jax.vmap
    def search(jar, jd, R, lo, hi, dMr, dMd):
        return con._line_search(con._Line(jar, jd, 1.0 / R, R, (lo, hi), dMr, dMd))

    alpha = np.asarray(search(*map(f32, (jar, jd, R, lo, hi, dMr, dMd))))
    for i, a in enumerate(alpha):
        args = (jar[i], jd[i], R[i], lo[i], hi[i], dMr[i], dMd[i])
        scale = np.abs(dMr[i]) + 1
        assert phi_prime(a * (1 - 1e-4) - 1e-6, *args) <= 1e-4 * scale
        assert phi_prime(a * (1 + 1e-4) + 1e-6, *args) >= -1e-4 * scale
