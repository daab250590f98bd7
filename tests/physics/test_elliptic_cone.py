"""MuJoCo's elliptic friction cone (cone="elliptic"): the cone cost, and contacts vs MuJoCo."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco_parity import constraint_force_at

import physics
from physics import constraints as con


def _cones(rng: np.random.Generator, n: int) -> tuple:
    """Random jar, D (MuJoCo's: D_t = D_n f^2 / mu^2) and cones (impratio 1 or 10), every zone
    represented."""
    jar3 = jnp.asarray(rng.normal(size=(n, 3)))
    friction = jnp.asarray(rng.uniform(0.2, 1.5, n))
    mu = friction / np.sqrt(rng.choice([1.0, 10.0], n))
    d_n = jnp.asarray(rng.uniform(0.5, 3.0, n))
    D3 = jnp.stack([d_n, d_n * friction**2 / mu**2, d_n * friction**2 / mu**2], axis=-1)
    on = jnp.asarray(rng.random(n) < 0.8)  # some frictionless slots
    return jar3, D3, con.Cones(mu, jnp.stack([friction, friction], axis=-1), on)


def test_cone_forces_hessians_and_line_derivatives_are_the_costs(x64):
    """Forces are -d cost / d jar, Hessians its second derivative, and the line search's
    derivatives those of the cost along a direction (checked with autodiff, float64)."""
    rng = np.random.default_rng(0)
    jar3, D3, cones = _cones(rng, 200)
    one = lambda j, d, c: con.cone_cost(j[None], d[None], con.Cones(*(x[None] for x in c)))  # noqa: E731
    grad = jax.jit(jax.vmap(jax.grad(one)))(jar3, D3, cones)  # jitted: one compile, not
    hess = jax.jit(jax.vmap(jax.hessian(one)))(jar3, D3, cones)  # one per primitive
    np.testing.assert_allclose(con.cone_forces(jar3, D3, cones), -grad, atol=1e-12)
    np.testing.assert_allclose(con.cone_hessians(jar3, D3, cones), hess, atol=1e-10)
    _, _, n, t, top, bottom, middle = con._cone_geometry(jar3, cones)
    assert bool(jnp.any(top & cones.on) & jnp.any(bottom & cones.on) & jnp.any(middle))
    jd3 = jnp.asarray(rng.normal(size=jar3.shape))
    cone_line = con.ConeLine.of(jar3, jd3, D3, cones)
    phi = lambda a: con.cone_cost(jar3 + a * jd3, D3, cones)  # noqa: E731
    for a in (0.0, 0.37):
        g, h = cone_line.derivatives(a)
        np.testing.assert_allclose(g, jax.grad(phi)(a), rtol=1e-10)
        np.testing.assert_allclose(h, jax.grad(jax.grad(phi))(a), rtol=1e-10)
    # inside the cone (sticking) the force is any force within it; outside, on its surface
    force = con.cone_forces(jar3, D3, cones)
    slide = jnp.linalg.norm(force[:, 1:] / cones.friction, axis=-1)
    np.testing.assert_allclose(
        jnp.where(middle & cones.on, slide - force[:, 0], 0.0),
        0.0,
        atol=1e-9 * float(jnp.abs(force).max()),
    )


def test_cone_line_search_reaches_the_minimum_along_stiff_lines(x64):
    """With impratio 100 a cone's zone change makes phi' a hundred times stiffer. The line
    search still ends at the line's minimum (found here by 200 bisections of phi'), along
    directions scaled by 1 to 100. Newton steps alone, started on the stiff side, crept
    towards it and stopped short; alternating them with the chord's root missed on other
    lines."""
    slope = jax.jit(lambda line, a: line.derivatives(a)[0])
    search = jax.jit(con._line_search_cone)
    phi = jax.jit(
        lambda jar3, jd3, D3, cones, a: -a + 0.05 * a * a + con.cone_cost(jar3 + a * jd3, D3, cones)
    )
    rng = np.random.default_rng(1)
    misses = []
    for _ in range(120):
        jar3, D3, cones = _cones(rng, 6)
        cones = cones._replace(mu=cones.friction[:, 0] / 10.0)  # impratio 100
        D3 = D3.at[:, 1:].set(D3[:, :1] * cones.friction**2 / cones.mu[:, None] ** 2)
        jd3 = jnp.asarray(rng.normal(size=jar3.shape) * 10.0 ** rng.uniform(0.0, 2.0))
        rows = jnp.zeros(jar3.size)
        cone_line = con.ConeLine.of(jar3, jd3, D3, cones)
        line = con._Line(jar3.ravel(), jd3.ravel(), rows, rows + 1.0, None, -1.0, 0.1, cone_line)
        if not slope(line, 0.0) < 0.0:
            continue
        lo, hi = 0.0, 1.0
        while slope(line, hi) <= 0.0:
            hi *= 2.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if slope(line, mid) <= 0.0 else (lo, mid)
        best = float(phi(jar3, jd3, D3, cones, lo))
        found = float(phi(jar3, jd3, D3, cones, search(line)))
        misses.append((found - best) / (1.0 + abs(best)))
    assert len(misses) > 40 and max(misses) < 1e-9, max(misses)


def test_cone_breaks_are_where_the_zones_change(x64):
    """Along random lines every change of a cone's zone (inside, between, dual; a
    frictionless slot's normal row opening or closing) lies at one of its breakpoints."""
    rng = np.random.default_rng(2)
    jar3, D3, cones = _cones(rng, 300)
    jd3 = jnp.asarray(rng.normal(size=jar3.shape))
    breaks = np.asarray(con.ConeLine.of(jar3, jd3, D3, cones).breaks()).reshape(4, -1)
    grid = np.linspace(-3.0, 3.0, 3001)

    def zone(a: float) -> np.ndarray:
        _, _, _, _, top, bottom, _ = con._cone_geometry(jar3 + a * jd3, cones)
        closed = jar3[:, 0] + a * jd3[:, 0] < 0.0
        return np.where(cones.on, 2 * np.asarray(top) + np.asarray(bottom), closed)

    zones = np.stack([zone(a) for a in grid])
    changed = np.argwhere(zones[1:] != zones[:-1])
    assert len(changed) > 100
    for step, cone in changed:
        here = breaks[:, cone]
        assert np.any((here >= grid[step]) & (here <= grid[step + 1])), (cone, grid[step])


# A quadruped of our own (box trunk, two hinges and a ball foot per leg) dropped on its feet
# with MuJoCo's impratio 100, the elliptic cones' setting of Menagerie's quadrupeds.
LEG = """
      <body pos="{x} {y} 0">
        <joint type="hinge" axis="0 1 0" range="-1 1" damping="0.5"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.1" size="0.02"/>
        <body pos="0 0 -0.1">
          <joint type="hinge" axis="0 1 0" range="-2 0" damping="0.5"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.1" size="0.015"/>
          <geom type="sphere" pos="0 0 -0.1" size="0.02" friction="0.8"/>
        </body>
      </body>"""
QUADRUPED = (
    """
<mujoco>
  <option timestep="0.002" cone="elliptic" impratio="100"/>
  <default><geom contype="1" conaffinity="0"/></default>
  <worldbody>
    <geom type="plane" size="5 5 0.1" contype="0" conaffinity="1"/>
    <body pos="0 0 {height}"><freejoint/>
      <geom type="box" size="0.15 0.08 0.04" mass="5"/>"""
    + "".join(LEG.format(x=x, y=y) for x in (0.12, -0.12) for y in (0.08, -0.08))
    + """
    </body>
  </worldbody>
</mujoco>
"""
)


def test_quadruped_landing_with_impratio_100_steps_as_mujoco():
    """Landing, a foot's cone changes zone within a small part of the Newton step, where
    phi' turns a hundred times stiffer. Newton steps alone along the line stopped short
    there, and the solve needed 12 outer steps where MuJoCo's needs 3: the default steps then
    left velocities 2e-3 off (4e-2 at this landing's worst step). Here each step starts
    from MuJoCo's state and warm start, and gives MuJoCo's velocities."""

    @jax.jit
    def step_from(sys: physics.System, q: jax.Array, qd: jax.Array, warm: jax.Array) -> jax.Array:
        state = physics.init(sys, q, qd)._replace(qacc=warm.astype(q.dtype))
        return physics.step(sys, state, jnp.zeros(0)).qd

    xml = QUADRUPED.format(height=0.3)
    m, sys = mujoco.MjModel.from_xml_string(xml), physics.load_mjcf(xml)
    d = mujoco.MjData(m)
    d.qpos[7::2], d.qpos[8::2] = 0.5, -1.0
    gaps = []
    for _ in range(300):
        q, qd, warm = (np.array(x, np.float32) for x in (d.qpos, d.qvel, d.qacc_warmstart))
        mujoco.mj_step(m, d)
        gaps.append(float(np.abs(step_from(sys, q, qd, warm) - d.qvel).max()))
    assert d.ncon == 4  # standing on its feet
    assert max(gaps) < 1e-4, (int(np.argmax(gaps)), max(gaps))


SCENE = """
<mujoco>
  <option timestep="0.002" cone="elliptic" impratio="{impratio}"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1" friction="0.8"/>
    <body pos="0 0 0.3"><freejoint/><geom type="box" size="0.1 0.15 0.05" friction="0.6"/></body>
    <body pos="0.5 0 0.3"><freejoint/><geom type="sphere" size="0.1"/></body>
    <body pos="-0.5 0 0.3"><freejoint/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.05" condim="1"/></body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize("impratio", [1, 10])
def test_elliptic_contacts_match_mujoco(impratio):
    """A box, a ball and a frictionless capsule, dropped into the floor at random: the
    constraint forces at random states (every cone zone appears), then 300 steps of sliding
    and rolling. A large impratio makes the cone stiffer, so the random states get more
    Newton steps (a trajectory is warm-started and needs the default)."""
    xml = SCENE.format(impratio=impratio)
    m = mujoco.MjModel.from_xml_string(xml)
    sys = physics.load_mjcf(xml, newton_steps=30)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    states = set()
    for _ in range(8):
        for b in range(3):
            d.qpos[7 * b + 2] = 0.03 + 0.05 * rng.random()
            d.qpos[7 * b + 3 : 7 * b + 7] = rng.normal(size=4)
            d.qpos[7 * b + 3 : 7 * b + 7] /= np.linalg.norm(d.qpos[7 * b + 3 : 7 * b + 7])
        d.qvel[:] = rng.normal(size=m.nv)
        mujoco.mj_forward(m, d)
        states |= set(d.efc_state.tolist())
        expected = d.qfrc_constraint
        got = constraint_force_at(sys, d.qpos, d.qvel, np.zeros(0))
        np.testing.assert_allclose(got, expected, atol=2e-5 * np.abs(expected).max())
    assert mujoco.mjtConstraintState.mjCNSTRSTATE_CONE in states

    sys = physics.load_mjcf(xml)  # the default Newton steps
    mujoco.mj_resetData(m, d)
    d.qvel[[0, 6, 13]] = [2.0, 1.5, -1.0]
    state = physics.init(sys, d.qpos, d.qvel)
    step = jax.jit(physics.step, static_argnames="n_substeps")
    for _ in range(10):
        mujoco.mj_step(m, d, nstep=30)
        state = step(sys, state, jnp.zeros(0), n_substeps=30)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=2e-3)
    # the contact forces, as MuJoCo reports them (the box resting on the floor)
    world = np.asarray(physics.contact_forces(sys, state))
    box = np.flatnonzero((physics.contact_geoms(sys) == [0, 1]).all(axis=1))
    ours_total = world[box].sum(axis=0)
    mj_total = np.zeros(3)
    for i, c in enumerate(d.contact[: d.ncon]):
        if {c.geom1, c.geom2} == {0, 1}:
            local = np.zeros(6)
            mujoco.mj_contactForce(m, d, i, local)
            mj_total += c.frame.reshape(3, 3).T @ local[:3]
    np.testing.assert_allclose(ours_total, mj_total, rtol=2e-3, atol=1e-3)


# A finger pressing a spinner, as in dm_control's finger task: coplanar capsules whose axes
# cross, a hinge with friction loss, the elliptic cone.
FINGER = """
<mujoco>
  <option timestep="0.01" cone="elliptic"/>
  <worldbody>
    <body name="proximal" pos="-.2 0 .4" euler="0 -90 0">
      <joint name="proximal" type="hinge" axis="0 -1 0" damping="0.05" range="-110 110"/>
      <geom type="capsule" fromto="0 0 0 0 0 -.17" size=".03"/>
      <body name="distal" pos="0 0 -.18">
        <joint name="distal" type="hinge" axis="0 -1 0" damping="0.05" range="-110 110"/>
        <geom type="capsule" fromto="0 0 0 0 0 -.16" size=".028"/>
        <geom name="fingertip" type="capsule" fromto="0 0 -.13 0 0 -.161" size=".03"/>
      </body>
    </body>
    <body name="spinner" pos=".2 0 .4">
      <joint name="hinge" type="hinge" axis="0 -1 0" frictionloss=".1" damping=".5"/>
      <geom name="cap1" type="capsule" size=".04 .09" pos=".02 0 0"/>
      <geom name="cap2" type="capsule" size=".04 .09" pos="-.02 0 0"/>
    </body>
  </worldbody>
  <actuator>
    <motor joint="proximal" gear="3" ctrlrange="-1 1"/>
    <motor joint="distal" gear="3" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
"""


def test_finger_on_spinner_tracks_mujoco():
    sys, m = physics.load_mjcf(FINGER), mujoco.MjModel.from_xml_string(FINGER)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    step = jax.jit(physics.step, static_argnames="n_substeps")
    runs, cone_steps = 0, 0
    while runs < 3:
        q = rng.uniform(m.jnt_range[:, 0], m.jnt_range[:, 1])
        q[2] = rng.uniform(-np.pi, np.pi)
        mujoco.mj_resetData(m, d)
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        if d.ncon == 0 or min(c.dist for c in d.contact[: d.ncon]) < -0.005:
            continue  # start touching, not deep inside
        state = physics.init(sys, d.qpos, d.qvel)
        for _ in range(20):  # 100 driven steps
            ctrl = rng.uniform(-1, 1, m.nu)
            d.ctrl[:] = ctrl
            mujoco.mj_step(m, d, nstep=5)
            state = step(sys, state, jnp.asarray(ctrl), n_substeps=5)
            cone_steps += int(mujoco.mjtConstraintState.mjCNSTRSTATE_CONE in d.efc_state)
        np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
        np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)
        runs += 1
    assert cone_steps > 0  # the finger slid along the spinner


def test_gradient_through_elliptic_contacts_is_finite():
    xml = """<mujoco><option cone="elliptic"/><worldbody><geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.05"><freejoint/><geom type="box" size="0.1 0.15 0.05"/></body>
    </worldbody></mujoco>"""
    sys = physics.load_mjcf(xml)

    def loss(v):
        state = physics.init(sys, qd=jnp.zeros(sys.nv).at[0].set(v))
        state = physics.step(sys, state, jnp.zeros(0), n_substeps=100)
        return state.q[0]

    grad = jax.jit(jax.grad(loss))(2.0)
    assert np.isfinite(grad) and float(grad) > 0  # pushed harder, the box slides further


@pytest.mark.parametrize(
    "option, needle",
    [('cone="round"', "must be pyramidal or elliptic"), ('impratio="0"', "impratio")],
)
def test_bad_cone_options_are_named(option, needle):
    with pytest.raises(physics.MJCFError, match=needle):
        physics.load_mjcf(f"<mujoco><option {option}/><worldbody/></mujoco>")
