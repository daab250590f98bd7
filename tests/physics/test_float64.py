"""Under ``jax_enable_x64`` the physics computes in float64, as MJX and Brax do: a System built
then holds float64 arrays, and its steps follow MuJoCo's (a float64 engine) to rounding,
contacts included. Without x64 the same model is float32."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import physics
from tests.physics.gym_assets import gym_asset

_step = jax.jit(physics.step)


def _float_dtypes(tree: object) -> set:
    return {x.dtype for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.floating)}


def _drive_alongside(sys, state, m, d, rng, steps=100):
    """Our state after `steps` steps beside MuJoCo's `d`, both given the same random controls;
    the trajectory must touch the floor."""
    contacts = 0
    for _ in range(steps):
        d.ctrl[:] = rng.uniform(*m.actuator_ctrlrange.T)
        state = _step(sys, state, d.ctrl.copy())
        mujoco.mj_step(m, d)
        contacts += d.ncon
    assert contacts > 0, "the trajectory should touch the floor"
    return state


@pytest.mark.parametrize("name", ["ant", "half_cheetah", "walker2d_v5", "humanoid"])
def test_float64_steps_follow_mujoco_to_rounding(name, x64):
    m = mujoco.MjModel.from_xml_path(gym_asset(name))
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    q, qd = m.qpos0 + 0.02 * rng.normal(size=m.nq), 0.1 * rng.normal(size=m.nv)
    d.qpos[:], d.qvel[:] = q, qd
    sys = physics.load_mjcf(gym_asset(name))
    state = _drive_alongside(sys, physics.init(sys, q, qd), m, d, rng)
    assert _float_dtypes(sys) == _float_dtypes(state) == {jnp.dtype(jnp.float64)}
    # float32 stays within ~5e-4 (q) and ~2e-2 (qd): test_contacts_vs_mujoco.py; float64 is
    # within 1e-7 and 1e-6 on humanoid, 1e-10 on the others
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, rtol=0, atol=1e-5)


def test_a_model_asking_for_fewer_newton_iterations_steps_as_mujoco_does(x64):
    """`<option iterations="1">` (as MJX-tuned models ask): MuJoCo's Newton solver stops after
    one step, short of the optimum, and so do we. With the 8 steps of a converged solve this
    trajectory is 0.6 away from MuJoCo's after 100 steps."""
    xml = open(gym_asset("ant")).read().replace("<option ", '<option iterations="1" ', 1)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(xml)
    assert sys.newton_steps == 1
    state = _drive_alongside(sys, physics.init(sys), m, d, np.random.default_rng(0))
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, rtol=0, atol=1e-8)


@pytest.mark.parametrize(
    ("name", "option"),
    [
        ("ant", 'iterations="1" ls_iterations="4"'),  # RK4; as MJX-tuned models ask
        ("half_cheetah", 'iterations="2" ls_iterations="3"'),  # Euler, damped joints
        ("half_cheetah", 'integrator="implicitfast" iterations="1" ls_iterations="4"'),
    ],
)
def test_a_capped_solve_with_few_line_search_steps_follows_mujoco(name, option, x64):
    """With few line-search evaluations MuJoCo's search stops short of the line's minimum,
    and the capped solve with it: the engine's exact search left these trajectories 2.7
    (ant), 1e-13 and 3e-8 (half_cheetah) from MuJoCo's in qvel over 100 steps; MuJoCo's own
    search follows them to 1e-7. The half_cheetah runs also need the damped integrators to
    take f + f_c, not M qacc, from an unconverged solve (they were 1.3e-2 and 2.4 off)."""
    xml = open(gym_asset(name)).read().replace("<option ", f"<option {option} ", 1)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(xml)
    assert sys.capped_solve and sys.mujoco_search.iterations == m.opt.ls_iterations
    state = _drive_alongside(sys, physics.init(sys), m, d, np.random.default_rng(0))
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, rtol=0, atol=1e-7)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("option", "steps", "searched"),
    [
        ("", 8, False),
        ('iterations="3"', 3, False),  # MuJoCo's search with 50 evaluations converges
        ('iterations="3" ls_iterations="16"', 3, True),
        ('iterations="0"', 1, False),
        ('solver="PGS" iterations="2" ls_iterations="4"', 8, False),
        ('iterations="20" ls_iterations="4"', 8, False),  # MuJoCo converges: not capped
    ],
)
def test_newton_steps_are_capped_by_newtons_own_iteration_count(option, steps, searched):
    xml = f"""<mujoco><option {option}/><worldbody><geom type="plane" size="1 1 .1"/>
      <body pos="0 0 1"><freejoint/><geom size=".1"/></body></worldbody></mujoco>"""
    sys = physics.load_mjcf(xml)
    assert sys.newton_steps == steps and sys.capped_solve == (steps < 8)
    assert (sys.mujoco_search is not None) == searched
    assert physics.load_mjcf(xml, newton_steps=2).newton_steps == min(steps, 2)
    if searched:  # gtol = tolerance * ls_tolerance * |step| * trace(M)
        m = mujoco.MjModel.from_xml_string(xml)
        assert sys.mujoco_search.tolerance == m.opt.tolerance * m.opt.ls_tolerance


@pytest.mark.parametrize(
    ("option", "needle"),
    [
        ('solver="Jacobi"', "solver='Jacobi' must be PGS, CG or Newton"),
        ('iterations="-1"', ">= 0"),
        ('ls_iterations="-2"', "ls_iterations, tolerance and ls_tolerance must be >= 0"),
    ],
)
def test_bad_solver_options_are_named(option, needle):
    with pytest.raises(physics.MJCFError, match="<option>") as err:
        physics.load_mjcf(f"<mujoco><option {option}/><worldbody/></mujoco>")
    assert needle in str(err.value)


def test_without_x64_a_system_is_float32():
    sys = physics.load_mjcf(gym_asset("hopper"))
    state = jax.eval_shape(physics.init, sys)  # shapes only: no program joins the jit caches
    assert _float_dtypes(sys) == _float_dtypes(state) == {jnp.dtype(jnp.float32)}


def _unactuated_side_by_side(xml: str, steps: int) -> tuple:
    """(our State, MuJoCo's MjData, the geom pairs of MuJoCo's contacts at each step) after
    ``steps`` steps of the model without controls, from its rest pose."""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    sys = physics.load_mjcf(xml)
    state, contacts = physics.init(sys), []
    for _ in range(steps):
        state = _step(sys, state, jnp.zeros(0))
        mujoco.mj_step(m, d)
        contacts.append([tuple(sorted((c.geom1, c.geom2))) for c in d.contact])
    return state, d, contacts


_SHAPES = """<mujoco><worldbody><geom type="plane" size="5 5 .1"/>
  <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.3 0.3 0.1"/></body>
  <body pos="0.05 0 0.27" euler="0 90 20"><freejoint/><geom type="capsule" size="0.05 0.2"/></body>
  <body pos="1 0 0.12" euler="30 0 0"><freejoint/><geom type="cylinder" size="0.1 0.1"/></body>
  <body pos="1 0.2 0.4" euler="0 20 0"><freejoint/><geom type="cylinder" size="0.1 0.1"/></body>
  <body pos="-1 0 0.16" euler="30 20 0"><freejoint/><geom type="ellipsoid" size="0.1 0.07 0.15"/>
  </body>
</worldbody></mujoco>"""


def test_float64_collisions_of_each_primitive_pair_track_mujoco(x64):
    # capsule-box and cylinder pairs search by fixed golden-section steps: the loops keep the
    # System's float type
    state, d, contacts = _unactuated_side_by_side(_SHAPES, 100)
    pairs = set().union(*contacts)
    assert {(1, 2), (0, 3), (3, 4), (0, 5)} <= pairs, pairs
    assert _float_dtypes(state) == {jnp.dtype(jnp.float64)}
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, rtol=0, atol=5e-4)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, rtol=0, atol=1e-2)


_CAPSULES_ON_BOXES = """<mujoco><worldbody><geom type="box" size="2 2 .1" pos="0 0 -.1"/>
  <geom type="box" size=".1 .4 .1" pos="1 0 .1" euler="0 0 10"/>
  <body pos="0 0 .3" euler="0 80 0"><freejoint/><geom type="capsule" size=".05 .2"/></body>
  <body pos="-.8 .5 .3" euler="30 70 10"><freejoint/><geom type="capsule" size=".05 .2"/></body>
  <body pos="1 0 .45" euler="80 0 5"><freejoint/><geom type="capsule" size=".05 .3"/></body>
</worldbody></mujoco>"""


def test_float64_capsules_landing_on_boxes_follow_mujoco_to_rounding(x64):
    """Tilted capsules landing on a box floor with an end, then lying down, and one across a
    box's edge: MuJoCo's second capsule-box contact (a point over the same face or edge) comes
    and goes with theirs; with one contact where MuJoCo has two, the paths parted at step 100."""
    state, d, contacts = _unactuated_side_by_side(_CAPSULES_ON_BOXES, 250)
    assert max(map(len, contacts)) == 6
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, rtol=0, atol=1e-10)


_HILL = """<mujoco><option timestep="0.002"/><asset><hfield name="hill" nrow="5" ncol="5"
  size="1 1 0.5 0.1" elevation="0 0 0 0 0  0 1 2 1 0  0 2 3 2 0  0 1 1 1 0  0 0 0 0 0"/></asset>
  <worldbody><geom type="hfield" hfield="hill" pos="0.1 -0.1 0.05" euler="4 -3 30"/>
  <body pos="0.03 0.07 0.8"><freejoint/><geom size="0.1"/></body>
  <body pos="0.3 -0.2 0.6"><freejoint/><geom size="0.1"/></body>
  <body pos="0.5 0.5 0.4"><freejoint/><geom size="0.1"/></body>
</worldbody></mujoco>"""


def test_float64_spheres_on_terrain_follow_mujoco_to_rounding(x64):
    """Down the faces of a tilted hill, over its seams: MuJoCo's path to rounding, since both
    hold the terrain's heights as float32 data (scaled in float32, as MuJoCo compiles them);
    heights kept in float64 here had put the paths 5e-8 apart after 300 steps."""
    state, d, contacts = _unactuated_side_by_side(_HILL, 300)
    assert sum(map(len, contacts)) > 300
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, rtol=0, atol=1e-11)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, rtol=0, atol=1e-9)
