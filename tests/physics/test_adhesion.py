"""Body transmissions (MuJoCo's adhesion): forces through the body's contacts, as MuJoCo's."""

import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco_parity import drive_alongside

import physics

# A tilted capsule (with a hinged ball that is another body's) under a ceiling, and a ball on
# a table (the ball is its contact's geom1, the capsule geom2) whose adhesion has a filter and
# a force range; margins let both pull before they touch.
SCENE = """<mujoco><option tolerance="1e-14"/><worldbody>
    <geom type="plane" size="5 5 .1"/>
    <geom type="plane" pos="0 0 .55" euler="180 0 0" size="1 1 .1" margin=".01"/>
    <body name="b" pos="0 0 .5"><freejoint/>
      <geom type="capsule" fromto="-.1 0 0 .2 0 0" size=".05" margin=".05"/>
      <body pos=".25 0 0"><joint axis="0 1 0"/><geom type="sphere" size=".04" pos=".05 0 0"/>
      </body></body>
    <geom type="box" pos="1 0 .05" size=".3 .3 .05"/>
    <body name="c" pos="1 0 .2"><freejoint/><geom type="sphere" size=".1" margin=".03"/>
    </body></worldbody>
  <actuator><adhesion body="b" ctrlrange="0 1" gain="60"/>
    <general body="c" gainprm="20" ctrlrange="0 1" dyntype="filter" dynprm=".05"
      forcerange="0 15" forcelimited="true"/></actuator></mujoco>"""


def test_adhesion_pulls_through_the_contacts_as_mujoco(x64):
    """100 steps against MuJoCo, the pulls strong then weak; without them (actuation
    disabled) the capsule drops from the ceiling sooner."""
    sys, m = physics.load_mjcf(SCENE), mujoco.MjModel.from_xml_string(SCENE)
    assert sys.actuator_adhesion == ((0, 1), (1, 3))
    d = mujoco.MjData(m)
    d.qvel[2], d.qpos[3:7] = 0.2, [np.cos(0.03), 0, np.sin(0.03), 0]
    start = physics.init(sys, d.qpos.copy(), d.qvel.copy())
    controls = [np.array([1.0, 1.0]), np.array([0.3, 0.0])]
    state = drive_alongside(sys, m, d, controls, 50)
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=1e-12)
    np.testing.assert_allclose(np.asarray(state.qd), d.qvel, atol=1e-12)
    flag = '<option><flag actuation="disable"/></option><worldbody>'
    off = physics.load_mjcf(SCENE.replace("<worldbody>", flag, 1))
    loose = physics.step(off, start, jnp.ones(2), n_substeps=100)
    assert float(loose.q[2]) < d.qpos[2] - 0.05


@pytest.mark.parametrize(
    "actuator, needle",
    [
        ('<adhesion body="b" gain="3"/>', "needs a ctrlrange of non-negative values"),
        ('<adhesion body="b" ctrlrange="-1 1"/>', "needs a ctrlrange of non-negative values"),
        ('<adhesion body="nobody" ctrlrange="0 1"/>', "unknown body 'nobody'"),
        ('<adhesion body="b" ctrlrange="0 1" gear="2"/>', r"unsupported attribute\(s\) \['gear'\]"),
        ('<motor body="b"/>', r"unsupported attribute\(s\) \['body'\]"),
        (
            '<general body="b" ctrlrange="0 1" biastype="affine" biasprm="0 0 -1"/>',
            "a body transmission takes a fixed gain and no bias",
        ),
    ],
)
def test_bad_body_transmissions_are_refused_by_name(actuator, needle):
    xml = SCENE.split("<actuator>")[0] + f"<actuator>{actuator}</actuator></mujoco>"
    with pytest.raises(physics.MJCFError, match=needle):
        physics.load_mjcf(xml)


def test_adhesion_takes_the_shared_actuator_defaults_as_mujoco():
    """MuJoCo keeps one actuator default per class, so an <adhesion> inherits what a <general>
    or <motor> default sets (as MuJoCo Menagerie's fruit fly does): its control range stays
    limited, a force range applies, a gear is stored but a body transmission has none."""
    defaults = """<default><general ctrllimited="false" forcelimited="true" forcerange="0 9"/>
      <default class="sticky"><motor gear="5"/><adhesion ctrlrange="0 1" gain="2"/></default>
      </default>"""
    xml = SCENE.replace("<worldbody>", defaults + "<worldbody>", 1).split("<actuator>")[0] + (
        '<actuator><adhesion class="sticky" body="b" gain="60"/></actuator></mujoco>'
    )
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    assert sys.actuator_adhesion == ((0, 1),)
    np.testing.assert_array_equal(np.asarray(sys.actuator_ctrlrange), m.actuator_ctrlrange)
    np.testing.assert_array_equal(np.asarray(sys.actuator_forcerange), m.actuator_forcerange)
    assert m.actuator_ctrllimited[0] and m.actuator_forcelimited[0]
