"""MuJoCo's constraint islands: a Newton solve capped short of the optimum (MJX-tuned files ask
for one iteration) follows MuJoCo only if each island of trees joined by active constraints
takes its own line-search step, as MuJoCo's island solver does."""

import os

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import physics
from physics import constraints as con
from tests.physics.gym_assets import gym_asset

# Four trees: two boxes that slide and tumble on the floor, a ball in free flight (no
# constraint: MuJoCo leaves it at qacc_smooth), and a fixed-base arm with a joint limit and
# friction loss; flung about by random velocities, they form one to four islands. The geoms
# meet only the floor (collision bits), which keeps the program small.
SCENE = """<mujoco><option timestep="0.005" {option}/>{flag}
<default><geom contype="2" conaffinity="1"/></default><worldbody>
  <geom type="plane" size="5 5 .1" contype="1" conaffinity="2"/>
  <body pos="0 0 .09"><freejoint/><geom type="box" size=".1 .1 .1" euler="10 5 0"/></body>
  <body pos="1 0 .09"><freejoint/><geom type="box" size=".1 .1 .1" euler="-7 3 20"/></body>
  <body pos="3 0 1"><freejoint/><geom type="sphere" size=".1"/></body>
  <body pos="-1 0 .3"><joint type="hinge" axis="0 1 0" range="-10 10" frictionloss=".05"/>
    <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05"/></body>
</worldbody></mujoco>"""

_step = jax.jit(physics.step)


@pytest.mark.parametrize(
    ("option", "flag"),
    [
        ('iterations="1" ls_iterations="3"', ""),  # MuJoCo's search, as MJX-tuned files ask
        ('iterations="1" ls_iterations="4" cone="elliptic" impratio="5"', ""),
        ('iterations="2"', ""),  # 50 evaluations: each island's exact minimum
        ('iterations="1" ls_iterations="3"', '<option><flag island="disable"/></option>'),
    ],
)
def test_capped_solves_search_each_island_as_mujoco(option, flag, x64):
    """One step length for all dofs left this scene 0.5-0.9 from MuJoCo in qvel within 60 steps
    (1e-4 to 2e-3 at the first); with islands off MuJoCo takes one too (and scales its
    tolerance by its mean inertia at qpos0), and so do we."""
    xml = SCENE.format(option=option, flag=flag)
    m, sys = mujoco.MjModel.from_xml_string(xml), physics.load_mjcf(xml)
    assert sys.capped_solve and sys.disable_island == bool(flag)
    d = mujoco.MjData(m)
    d.qvel[:] = 3.0 * np.random.default_rng(0).standard_normal(m.nv)
    state = physics.init(sys, d.qpos.copy(), d.qvel.copy())
    islands, gap = set(), 0.0
    for _ in range(60):
        mujoco.mj_step(m, d)
        state = _step(sys, state, jnp.zeros(0))
        islands.add(d.nisland)
        gap = max(gap, float(np.abs(np.asarray(state.qd) - d.qvel).max()))
    assert (islands == {0}) if flag else (max(islands) >= 2), islands
    assert gap < 1e-9, gap


@pytest.mark.parametrize("name", ["ant", "humanoid", "reacher", "inverted_double_pendulum"])
def test_trees_are_mujocos(name):
    m = mujoco.MjModel.from_xml_path(gym_asset(name))
    topology = physics.load_mjcf(gym_asset(name)).topology
    np.testing.assert_array_equal(topology.body_tree, m.body_treeid)
    np.testing.assert_array_equal(topology.dof_tree, m.dof_treeid)


def test_a_fixed_base_makes_each_jointed_branch_a_tree():
    xml = """<mujoco><worldbody><body><geom size=".1"/>
      <body><joint/><geom size=".1"/><body><joint/><geom size=".1"/></body></body>
      <body><joint/><geom size=".1"/></body></body>
      <body><freejoint/><geom size=".1"/></body><body><geom size=".1"/></body>
    </worldbody></mujoco>"""
    m, topology = mujoco.MjModel.from_xml_string(xml), physics.load_mjcf(xml).topology
    assert topology.ntree == m.ntree == 3
    np.testing.assert_array_equal(topology.body_tree, m.body_treeid)  # [-1 -1 0 0 1 2 -1]
    np.testing.assert_array_equal(topology.dof_tree, m.dof_treeid)


def test_island_labels_join_trees_through_chains_of_active_rows():
    # trees 0-1 and 1-3 joined by active rows, 2 alone, 4 touched only by an inactive row
    row_trees = np.zeros((4, 5), bool)
    row_trees[0, [0, 1]] = row_trees[1, [3, 1]] = row_trees[2, 2] = row_trees[3, [2, 4]] = True
    mask = jnp.asarray([True, True, True, False])
    labels = jax.jit(con.island_labels)(jnp.asarray(row_trees), mask)
    np.testing.assert_array_equal(labels, [0, 0, 2, 0, 4])


def test_mjxs_scene_of_three_humanoids_follows_mujoco(x64):
    """MJX's own test scene (iterations="1" ls_iterations="4"): three humanoids on a floor,
    each its own tree. With one step length for all dofs it was 18 off in qvel within 50
    steps."""
    path = os.path.join(
        os.path.dirname(mujoco.__file__), "mjx", "test_data", "humanoid", "03_humanoids.xml"
    )
    m = mujoco.MjModel.from_xml_path(path)
    with pytest.warns(physics.MJCFWarning, match="contact slots"):  # max_contacts=None
        sys = physics.load_mjcf(path)
    assert sys.capped_solve and sys.topology.ntree == 3
    d, rng = mujoco.MjData(m), np.random.default_rng(0)
    state = physics.init(sys, d.qpos.copy(), d.qvel.copy())
    islands, gap = set(), 0.0
    for _ in range(30):
        d.ctrl[:] = rng.uniform(*m.actuator_ctrlrange.T)
        mujoco.mj_step(m, d)
        state = _step(sys, state, jnp.asarray(d.ctrl))
        islands.add(d.nisland)
        gap = max(gap, float(np.abs(np.asarray(state.qd) - d.qvel).max()))
    assert max(islands) >= 2, islands
    assert gap < 1e-9, gap
