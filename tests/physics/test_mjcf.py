"""MJCF loading: gymnasium's models load unmodified and match MuJoCo's compiled model."""

import warnings

import jax
import mujoco
import numpy as np
import pytest
from gym_assets import GYM_MODELS, gym_asset
from mujoco_parity import drive_alongside

import physics
from physics import mjcf
from physics.system import INTEGRATORS


def _body_inertia(m):
    rot = np.stack([mjcf._quat_mat(q) for q in m.body_iquat])
    return np.einsum("bij,bj,bkj->bik", rot, m.body_inertia, rot)


def _check_against_mujoco(sys, m):
    assert (sys.nq, sys.nv, sys.nbody, sys.njnt, sys.ngeom, sys.nu) == (
        m.nq,
        m.nv,
        m.nbody,
        m.njnt,
        m.ngeom,
        m.nu,
    )
    close = lambda a, b: np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-6)
    close(sys.body_mass, m.body_mass)
    close(sys.body_ipos, m.body_ipos)
    close(sys.body_inertia, _body_inertia(m))
    # body_iframe holds principal axes: the inertia is diagonal there, with MuJoCo's moments
    frame = np.asarray(sys.body_iframe, np.float64)
    principal = np.einsum("bji,bjk,bkl->bil", frame, np.asarray(sys.body_inertia), frame)
    scale = np.abs(m.body_inertia).max()
    close(principal * (1 - np.eye(3)) / scale, np.zeros_like(principal))
    close(np.sort(np.diagonal(principal, 0, 1, 2), -1) / scale, np.sort(m.body_inertia, -1) / scale)
    close(sys.body_pos, m.body_pos)
    close(sys.qpos0, m.qpos0)
    close(sys.jnt_range, m.jnt_range)
    close(sys.jnt_axis, m.jnt_axis)
    close(sys.jnt_pos, m.jnt_pos)
    close(sys.dof_armature, m.dof_armature)
    close(sys.dof_damping, m.dof_damping)
    close(sys.jnt_stiffness, m.jnt_stiffness)
    close(sys.geom_size, m.geom_size)
    close(sys.geom_pos, m.geom_pos)
    close(sys.geom_friction, m.geom_friction)
    close(sys.actuator_gear, m.actuator_gear[:, 0])
    assert sys.jnt_limited == tuple(bool(x) for x in m.jnt_limited)
    assert sys.geom_type == tuple(int(x) for x in m.geom_type)
    assert sys.geom_contype == tuple(int(x) for x in m.geom_contype)
    assert sys.geom_conaffinity == tuple(int(x) for x in m.geom_conaffinity)
    assert all(m.actuator_trntype == mujoco.mjtTrn.mjTRN_JOINT)
    assert sys.actuator_transmission == tuple(
        (((int(j), 1.0),), ()) for j in m.actuator_trnid[:, 0]
    )
    assert float(sys.timestep) == pytest.approx(m.opt.timestep)
    close(sys.gravity, m.opt.gravity)


@pytest.mark.parametrize("name", GYM_MODELS)
def test_gymnasium_models_match_mujoco(name):
    path = gym_asset(name)
    m = mujoco.MjModel.from_xml_path(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sys = physics.load_mjcf(path)
    _check_against_mujoco(sys, m)
    # loaded with the file's integrator (most of them RK4), simulated as asked: no warning
    assert sys.integrator == INTEGRATORS[m.opt.integrator]
    assert not [w for w in caught if issubclass(w.category, mjcf.MJCFWarning)], caught


DEFAULTS_XML = """
<mujoco>
  <compiler angle="radian" eulerseq="ZYX"/>
  <option timestep="0.005" gravity="0 0 -5"/>
  <default>
    <joint damping="0.5" armature="0.1"/>
    <geom density="300"/>
    <default class="heavy">
      <geom density="3000" friction="0.5 0.01 0.001"/>
      <joint stiffness="4" springref="0.2"/>
    </default>
  </default>
  <worldbody>
    <geom type="plane" size="1 1 1"/>
    <body name="a" pos="0 0 1" euler="0.3 0.2 0.1" childclass="heavy">
      <joint name="j0" type="hinge" axis="1 1 0" pos="0 0 0.1" range="-1 1"/>
      <geom type="box" size="0.1 0.2 0.3" euler="0.1 0 0.4"/>
      <body name="b" pos="0.3 0 0" axisangle="0 1 0 0.7">
        <joint name="j1" type="slide" axis="0 0 1" class="main" ref="0.1"/>
        <geom type="cylinder" fromto="0 0 0 0.2 0.1 0.3" size="0.05"/>
        <body name="c" pos="0 0.2 0" xyaxes="0 1 0 -1 0 0">
          <joint type="ball" damping="2" class="main"/>
          <inertial pos="0.1 0 0" mass="2" diaginertia="0.1 0.2 0.3" quat="0.9 0.1 0.2 0.3"/>
        </body>
      </body>
    </body>
    <body name="free" pos="1 2 3" zaxis="1 0 1">
      <freejoint/>
      <geom type="capsule" size="0.1 0.2" mass="3"/>
    </body>
    <body name="eggs" pos="-1 0 1">
      <joint type="hinge" axis="0 1 0"/>
      <geom type="ellipsoid" size="0.1 0.2 0.3" euler="0.3 0 0" contype="0" conaffinity="0"/>
      <geom type="ellipsoid" fromto="0 0 0 0.2 0.1 0.3" size="0.05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <contact><exclude body1="a" body2="b"/></contact>
  <actuator>
    <motor joint="j0" gear="7" ctrlrange="-2 2"/>
    <motor joint="j1" forcerange="-1 1"/>
  </actuator>
</mujoco>
"""


def test_defaults_childclass_orientations_match_mujoco():
    sys = physics.load_mjcf(DEFAULTS_XML)
    m = mujoco.MjModel.from_xml_string(DEFAULTS_XML)
    _check_against_mujoco(sys, m)
    np.testing.assert_allclose(np.asarray(sys.qpos_spring), m.qpos_spring, atol=1e-6)
    quat = np.asarray(sys.body_quat) * np.sign(np.asarray(sys.body_quat)[:, :1] + 1e-9)
    np.testing.assert_allclose(quat, m.body_quat * np.sign(m.body_quat[:, :1] + 1e-9), atol=1e-6)
    np.testing.assert_allclose(np.asarray(sys.actuator_ctrlrange)[0], [-2, 2])
    assert np.isinf(np.asarray(sys.actuator_ctrlrange)[1]).all()
    assert sys.exclude_pairs == ((1, 2),)


# Each model below once loaded without a word but built a different model than MuJoCo does.
ONCE_SILENTLY_WRONG = {
    "two top-level defaults add to one main class": """
      <default><geom density="10"/></default>
      <default><joint damping="1"/></default>
      <worldbody><body><joint/><geom type="capsule" size="0.1 0.2"/></body></worldbody>""",
    "a nested default overwrites only the numbers it gives": """
      <default>
        <geom type="box" size="0.1 0.2 0.3" solimp="0.9 0.95 0.02 0.5 2"/>
        <default class="c"><geom size="0.05" solimp="0.8"/></default>
      </default>
      <worldbody><body><joint/><geom class="c"/></body></worldbody>""",
    "a box along fromto is size[0] wide in x and y": """
      <worldbody><body><joint/>
        <geom type="box" fromto="0 0 0 0.3 0 0.1" size="0.05 0.02"/>
      </body></worldbody>""",
    "geoms outside the inertia groups add no mass": """
      <worldbody><body><joint/>
        <geom type="sphere" size="0.1"/>
        <geom type="sphere" size="0.1" pos="0 0 0.3" group="7" contype="0" conaffinity="0"/>
      </body></worldbody>""",
    "compiler inertiagrouprange": """
      <compiler inertiagrouprange="1 2"/>
      <worldbody><body><joint/>
        <geom type="sphere" size="0.1" group="0" mass="5"/>
        <geom type="sphere" size="0.2" pos="0 0 0.3" group="2"/>
      </body></worldbody>""",
}


def test_unused_defaults_of_refused_elements_load_and_used_ones_are_refused():
    """Asset libraries keep mesh, material, equality and pair defaults in their classes: unused,
    they change nothing; a <pair> is still refused where it appears, and an unsupported
    actuator kind in a default is refused (its common attributes would apply to every actuator
    of the class)."""
    xml = """<mujoco><default><mesh scale="2 2 2"/><material rgba="1 0 0 1"/>
      <equality solref="0.01 1"/><pair condim="1"/><geom density="10"/></default>
      <worldbody><body><joint/><geom type="capsule" size="0.1 0.2"/></body></worldbody></mujoco>"""
    _check_against_mujoco(physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml))
    pid = xml.replace('<pair condim="1"/>', '<pid kp="1"/>')  # (MuJoCo 4's PID actuator)
    with pytest.raises(physics.MJCFError, match="unsupported element <pid> in <default>"):
        physics.load_mjcf(pid)


def test_springdamper_sets_mujocos_stiffness_and_damping():
    """springdamper="timeconst dampratio" gives a joint the stiffness and damping of that
    time constant and damping ratio for its inertia at qpos0, over what the joint states."""
    xml = """<mujoco><worldbody><body><joint type="slide" springdamper=".5 1"/>
      <geom size=".1" mass="2"/>
      <body pos="0 0 -.3"><joint axis="0 1 0" springdamper=".2 .7" stiffness="9" damping="3"
        armature=".01"/><geom type="capsule" fromto="0 0 0 0 0 -.4" size=".03"/>
        <body pos="0 0 -.4"><joint axis="1 0 0" damping=".5"/><geom size=".05"/></body>
      </body></body></worldbody></mujoco>"""
    _check_against_mujoco(physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml))
    with pytest.raises(physics.MJCFError, match="springdamper values must both be positive"):
        physics.load_mjcf(xml.replace('springdamper=".5 1"', 'springdamper=".5 0"'))


@pytest.mark.parametrize("name", ONCE_SILENTLY_WRONG)
def test_defaults_fromto_and_inertia_groups_build_mujocos_model(name):
    xml = f"<mujoco>{ONCE_SILENTLY_WRONG[name]}</mujoco>"
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    _check_against_mujoco(sys, m)
    np.testing.assert_allclose(np.asarray(sys.geom_solimp), m.geom_solimp, rtol=1e-6)


@pytest.mark.parametrize(
    "xml, needle",
    [
        ('<body quat="0 0 0 0"><joint/><geom size="1"/></body>', "quat='0 0 0 0' is degenerate"),
        ('<body><joint axis="0 0 1"/><geom size="1" zaxis="0 0 0"/></body>', "zaxis="),
        (
            '<body pos="0,0,1"><joint/><geom size="1"/></body>',
            "attribute 'pos' must be numbers, got '0,0,1'",
        ),
        ('<body><joint/><geom size="1" condim="3.0"/></body>', "<geom>: invalid attribute value"),
        ('<body><joint type="spiral"/><geom size="1"/></body>', "unknown joint type 'spiral'"),
        ('<body><joint/><geom type="box" size="1 1"/></body>', "box geom needs size"),
        ("<body><joint/></body>", "zero mass"),
        ('<body><joint/><geom size="1"/><composite/></body>', "unsupported element <composite>"),
        (
            '<geom type="plane" size="1 1 1"/><body><joint/><geom size="1" condim="5"/></body>',
            "1 geom pair(s) would make contacts of condim other than 1, 3, 4 and 6",
        ),
        ('<body><joint/><geom type="sdf" size="1"/></body>', "unsupported geom type 'sdf'"),
        ('<geom type="hfield"/>', "an hfield geom needs an hfield"),
        ('<body><joint/><geom type="mesh" size="1"/></body>', "a mesh geom needs a mesh"),
        ('<body><joint frictionloss="-1"/><geom size="1"/></body>', "frictionloss must be >= 0"),
        ('<body><joint limited="true"/><geom size="1"/></body>', "range"),
        ('<body childclass="nope"><joint/><geom size="1"/></body>', "unknown"),
        (
            '<body><joint type="ball" springdamper="1 1"/><geom size="1"/></body>',
            "unsupported springdamper on a ball joint",
        ),
    ],
)
def test_model_errors_name_the_element(xml, needle):
    with pytest.raises(physics.MJCFError, match="<xml string>") as err:
        physics.load_mjcf(f"<mujoco><worldbody>{xml}</worldbody></mujoco>")
    assert needle in str(err.value)


def test_unsupported_sections_raise_with_file_name(tmp_path):
    path = tmp_path / "m.xml"
    path.write_text("<mujoco><worldbody/><deformable/></mujoco>")
    with pytest.raises(physics.MJCFError, match=r"m\.xml.*unsupported element <deformable>"):
        physics.load_mjcf(path)
    path.write_text('<mujoco><worldbody/><equality><weld body1="a"/></equality></mujoco>')
    with pytest.raises(physics.MJCFError, match=r"m\.xml.*<weld>: unknown body 'a'"):
        physics.load_mjcf(path)
    pid = (
        '<mujoco><worldbody><body name="b"><joint name="j"/><geom size="1"/></body></worldbody>'
        '<actuator><pid joint="j" kp="1"/></actuator></mujoco>'
    )
    with pytest.raises(physics.MJCFError, match="unsupported actuator <pid>"):
        physics.load_mjcf(pid)
    free_tendon = (
        '<mujoco><worldbody><body><freejoint name="f"/><geom size="1"/></body>'
        '</worldbody><tendon><fixed><joint joint="f"/></fixed></tendon></mujoco>'
    )
    with pytest.raises(physics.MJCFError, match="joints must be hinge or slide"):
        physics.load_mjcf(free_tendon)


FRAME_XML = """
<mujoco>
  <default><default class="small"><geom size="0.03"/></default></default>
  <worldbody>
    <frame pos="0 0 1" euler="0 0 30">
      <body name="a" pos="0.2 0 0" euler="10 0 0">
        <joint type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.05"/>
        <frame pos="0.3 0 0" zaxis="1 1 0" childclass="small">
          <joint type="hinge" axis="0 1 1" pos="0 0 0.05"/>
          <geom type="sphere" pos="0 0 0.1"/>
          <frame euler="0 45 0">
            <body name="b" pos="0.1 0 0">
              <joint type="slide" axis="1 0 0"/>
              <geom type="box" size="0.05 0.04 0.03"/>
            </body>
          </frame>
        </frame>
      </body>
    </frame>
  </worldbody>
</mujoco>
"""


def test_frames_place_their_children_as_mujoco_does():
    sys, m = physics.load_mjcf(FRAME_XML), mujoco.MjModel.from_xml_string(FRAME_XML)
    _check_against_mujoco(sys, m)
    for ours, theirs in ((sys.body_quat, m.body_quat), (sys.geom_quat, m.geom_quat)):
        sign = np.sign(np.asarray(ours)[:, :1] + 1e-9) * np.sign(theirs[:, :1] + 1e-9)
        np.testing.assert_allclose(np.asarray(ours) * sign, theirs, atol=1e-6)


def test_includes_are_spliced_in_relative_to_the_main_file(tmp_path):
    (tmp_path / "parts").mkdir()
    files = {
        "parts/arm.xml": '<mujoco><body name="arm" pos="0 0 1"><joint name="j0"/>'
        '<geom size="0.1"/><include file="parts/hand.xml"/></body></mujoco>',
        "parts/hand.xml": '<mujoco><body name="hand" pos="0.2 0 0"><joint axis="1 0 0"/>'
        '<geom size="0.05"/></body></mujoco>',
        "parts/act.xml": '<mujoco><actuator><motor joint="j0" gear="3"/></actuator></mujoco>',
        "model.xml": '<mujoco><worldbody><include file="parts/arm.xml"/></worldbody>'
        '<include file="parts/act.xml"/></mujoco>',
        "loop.xml": '<mujoco><include file="loop.xml"/></mujoco>',
        "missing.xml": '<mujoco><include file="nope.xml"/></mujoco>',
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    main = tmp_path / "model.xml"
    sys = physics.load_mjcf(main)
    _check_against_mujoco(sys, mujoco.MjModel.from_xml_path(str(main)))
    assert sys.body_names == ("world", "arm", "hand") and float(sys.actuator_gear[0]) == 3.0
    with pytest.raises(physics.MJCFError, match="cycle"):
        physics.load_mjcf(tmp_path / "loop.xml")
    with pytest.raises(physics.MJCFError, match=r"missing\.xml: cannot read .*nope\.xml"):
        physics.load_mjcf(tmp_path / "missing.xml")


def test_a_scene_with_its_own_worldbody_around_an_included_robot_loads(tmp_path):
    """MuJoCo Menagerie's layout: scene.xml has a floor in its <worldbody> and includes the
    robot's file, which has another; MuJoCo merges the sections in document order."""
    (tmp_path / "robot.xml").write_text(
        '<mujoco><worldbody><body name="torso" pos="0 0 0.5"><freejoint/><geom size="0.1"/>'
        '<body name="arm" pos="0.2 0 0"><joint axis="0 1 0"/><geom type="capsule" '
        'fromto="0 0 0 0.2 0 0" size="0.05"/></body></body></worldbody></mujoco>'
    )
    (tmp_path / "scene.xml").write_text(
        '<mujoco><include file="robot.xml"/><worldbody><geom type="plane" size="2 2 0.1"/>'
        '<body name="ball" pos="0.6 0 0.3"><freejoint/><geom size="0.05"/></body>'
        "</worldbody></mujoco>"
    )
    scene = tmp_path / "scene.xml"
    sys, m = physics.load_mjcf(scene), mujoco.MjModel.from_xml_path(str(scene))
    _check_against_mujoco(sys, m)
    assert sys.body_names == ("world", "torso", "arm", "ball")
    d, state, step = mujoco.MjData(m), physics.init(sys), jax.jit(physics.step)
    for _ in range(200):  # everything falls onto the floor of the other section
        state = step(sys, state, np.zeros(0))
        mujoco.mj_step(m, d)
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=1e-4)  # measured: 1.5e-5


def test_a_model_without_a_worldbody_steps_as_an_empty_world():
    sys = physics.load_mjcf('<mujoco><option timestep="0.01"/></mujoco>')
    assert (sys.nbody, sys.nq, sys.nv) == (1, 0, 0)
    state = jax.jit(physics.step)(sys, physics.init(sys), np.zeros(0))
    assert state.q.shape == (0,) and float(state.time) == pytest.approx(0.01)


FLAGS_XML = """
<mujoco>
  <option timestep="0.005"><flag {flags}/></option>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.3">
      <freejoint/>
      <geom type="sphere" size="0.1"/>
      <body pos="0.2 0 0">
        <joint type="hinge" axis="0 1 0" range="-10 10"/>
        <geom type="sphere" pos="0.2 0 0" size="0.04"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize(
    "flags, contact, limit, friction, gravity",
    [
        ('contact="disable"', False, True, True, True),
        ('limit="disable" energy="enable"', True, False, True, True),
        ('frictionloss="disable"', True, True, False, True),
        ('constraint="disable"', False, False, False, True),
        ('gravity="disable" contact="enable"', True, True, True, False),
    ],
)
def test_option_flags_switch_contacts_limits_friction_and_gravity(
    flags, contact, limit, friction, gravity
):
    sys = physics.load_mjcf(FLAGS_XML.format(flags=flags))
    switches = (sys.disable_contact, sys.disable_limit, sys.disable_frictionloss)
    assert switches == (not contact, not limit, not friction)
    assert float(np.abs(np.asarray(sys.gravity)).max()) == pytest.approx(9.81 if gravity else 0)


def test_option_flags_match_mujoco():
    """dm_control's lqr and point_mass switch gravity and constraints off: both sides agree."""
    xml = FLAGS_XML.format(flags='gravity="disable" constraint="disable"')
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qvel[:] = [0.5, 0, -1.0, 0, 0, 0, 4.0]  # drifts into the floor, spins past the limit
    state = jax.jit(physics.step, static_argnames="n_substeps")(
        sys, physics.init(sys, d.qpos.copy(), d.qvel.copy()), np.zeros(0), n_substeps=60
    )
    for _ in range(60):
        mujoco.mj_step(m, d)
    assert d.qpos[2] < 0.1 and d.qpos[7] > 0.5  # through the floor, past the limit
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=1e-4)


def test_eulerdamp_flag_integrates_damping_explicitly_as_mujoco():
    """<flag eulerdamp="disable">: Euler without the implicit damping step (a heavily damped
    hinge makes the two visibly different)."""
    xml = FLAGS_XML.format(flags='eulerdamp="disable"').replace(
        'range="-10 10"', 'range="-10 10" damping=".02"'
    )
    trajectories = []
    for source in (xml, xml.replace('eulerdamp="disable"', "")):
        sys, m = physics.load_mjcf(source), mujoco.MjModel.from_xml_string(source)
        d = mujoco.MjData(m)
        d.qvel[6] = 4.0
        state = jax.jit(physics.step, static_argnames="n_substeps")(
            sys, physics.init(sys, d.qpos.copy(), d.qvel.copy()), np.zeros(0), n_substeps=40
        )
        mujoco.mj_step(m, d, nstep=40)
        np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=1e-4)
        trajectories.append(d.qpos[7])
    assert abs(trajectories[0] - trajectories[1]) > 1e-3


# Springs and dampers on joints and a tendon, gravity compensation and a medium (which MuJoCo
# drops with springs and dampers both off), a motor and a filter past their ctrlrange.
PASSIVE_XML = """<mujoco><option density="300"><flag {flags}/></option>
  <worldbody><body pos="0 0 1" gravcomp=".5">
    <joint name="a" axis="0 1 0" stiffness="2" springref="20" damping=".3"/>
    <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05"/>
    <body pos=".3 0 0"><joint name="b" axis="0 1 0" damping=".1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05"/></body></body></worldbody>
  <tendon><fixed stiffness="3" damping=".2" springlength=".1"><joint joint="a" coef="1"/>
    <joint joint="b" coef="-.5"/></fixed></tendon>
  <actuator><motor joint="a" ctrlrange="-1 1"/>
    <general joint="b" dyntype="filter" dynprm=".05" gainprm="2" ctrlrange="-1 1"/></actuator>
</mujoco>"""


@pytest.mark.parametrize(
    "flags",
    [
        'spring="disable"',
        'damper="disable"',  # Euler's implicit damping goes too
        'spring="disable" damper="disable"',  # and with both, gravcomp and the medium
        'actuation="disable"',  # no actuator force; act stays
        'clampctrl="disable"',
    ],
)
def test_passive_and_actuation_flags_match_mujoco(flags):
    xml = PASSIVE_XML.format(flags=flags)
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    default = mujoco.MjModel.from_xml_string(PASSIVE_XML.format(flags=""))
    controls = [np.array([3.0, 2.0]), np.array([-2.0, -3.0])]
    d, unflagged = mujoco.MjData(m), mujoco.MjData(default)
    for data in (d, unflagged):
        data.qpos[:], data.qvel[:] = [0.3, -0.4], [1.0, -0.5]
    state = drive_alongside(sys, m, d, controls, 10)
    for ctrl in controls:
        unflagged.ctrl[:] = ctrl
        mujoco.mj_step(default, unflagged, nstep=10)
    assert np.abs(d.qpos - unflagged.qpos).max() > 1e-3  # the flag changes the motion
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-5)
    np.testing.assert_allclose(state.act, d.act, atol=1e-6)


@pytest.mark.parametrize(
    "flag, needle",
    [
        ('diagexact="enable"', "unsupported flag diagexact"),
        ('passive="disable"', "unknown flag 'passive'"),  # MuJoCo 4: spring and damper
        ('speculative="enable"', "unsupported flag speculative"),
        ('contacts="disable"', "unknown flag 'contacts'"),
        ('contact="off"', "must be enable or disable"),
    ],
)
def test_option_flags_that_cannot_be_honoured_are_named(flag, needle):
    xml = f"<mujoco><option><flag {flag}/></option><worldbody/></mujoco>"
    with pytest.raises(physics.MJCFError, match=needle):
        physics.load_mjcf(xml)


def test_compiler_mass_and_inertia_bounds_are_mujocos():
    """boundmass and boundinertia raise small masses and principal moments (a massless body
    included) and balanceinertia replaces moments that break A + B >= C by their mean, as
    MuJoCo's compiler does for poorly designed (often URDF-converted) models."""
    xml = """<mujoco><compiler boundmass=".5" boundinertia=".01" balanceinertia="true"/>
      <worldbody><body><joint axis="0 1 0"/>
        <inertial pos="0 0 0" mass=".1" diaginertia=".001 .002 .5" euler=".2 .3 .1"/>
        <body pos=".3 0 0"><joint axis="0 1 0"/>
          <inertial pos=".1 0 0" mass="2" diaginertia=".3 .05 .1"/>
          <body pos=".3 0 0"><joint axis="1 0 0"/>
            <body pos=".1 0 0"><geom size=".05" mass="1"/></body></body>
        </body></body></worldbody></mujoco>"""
    _check_against_mujoco(physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml))


def test_fusestatic_keeps_static_bodies_with_mujocos_dynamics():
    """fusestatic merges jointless bodies into their parents in MuJoCo; here they are kept
    (with a warning): the mass matrix and a driven trajectory are MuJoCo's all the same."""
    xml = """<mujoco><compiler fusestatic="true"/><worldbody>
      <body><joint axis="0 1 0" damping=".1"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
        <body name="bracket" pos=".3 0 0" euler="0 0 30"><geom type="box" size=".04 .04 .04"/>
          <body pos=".05 0 0"><joint axis="0 0 1"/><geom type="capsule" fromto="0 0 0 .2 0 0"
            size=".02"/></body></body></body></worldbody></mujoco>"""
    with pytest.warns(physics.MJCFWarning, match="fusestatic"):
        sys = physics.load_mjcf(xml)
    m = mujoco.MjModel.from_xml_string(xml)
    assert sys.nbody == m.nbody + 1  # the bracket, fused in MuJoCo
    d = mujoco.MjData(m)
    d.qvel[:] = [1.0, -2.0]
    state = jax.jit(physics.step, static_argnames="n_substeps")(
        sys, physics.init(sys, d.qpos.copy(), d.qvel.copy()), np.zeros(0), n_substeps=100
    )
    mujoco.mj_step(m, d, nstep=100)
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=1e-4)


ALIGNFREE = """<mujoco><compiler alignfree="true"/>
  <worldbody><geom type="plane" size="5 5 .1"/><site name="hook" pos="0 0 1.2"/>
    <body name="brick" pos="0 0 .6" euler="10 20 30"><freejoint/>
      <geom type="box" size=".1 .05 .03" pos=".1 .05 0" euler="0 0 40"/>
      <site name="eye" pos=".2 0 .03"/></body>
    <body name="ball" pos=".5 0 .5"><freejoint/>
      <inertial pos=".05 0 0" euler="30 0 0" mass="1" diaginertia=".01 .02 .03"/>
      <geom type="sphere" size=".08" contype="0" conaffinity="0"/></body>
    <body name="kept" pos="-.5 0 .5"><freejoint align="false"/>
      <geom type="capsule" fromto="0 0 0 .2 0 0" size=".04"/></body>
    <body name="arm" pos="0 .6 .5"><freejoint/><geom type="sphere" size=".05" pos=".1 0 0"/>
      <body pos=".2 0 0"><joint axis="0 1 0"/><geom type="capsule" fromto="0 0 0 .2 0 0"
        size=".02"/></body></body>
  </worldbody>
  <equality><connect site1="eye" site2="hook"/><weld body1="ball" body2="kept"
    relpose=".3 0 0 1 0 0 0" anchor=".1 0 0"/></equality></mujoco>"""


def test_alignfree_moves_childless_free_bodies_onto_their_inertial_frames_as_mujoco():
    """A childless free body with a geom or an <inertial> (aligned by the compiler's
    alignfree) takes its inertial frame as its own: qpos0, poses and the geoms' and sites'
    frames are MuJoCo's, and so are 60 steps with contacts, a site connect and a weld whose
    anchor and relpose MuJoCo reads in the new frame. A body with children, or whose
    <freejoint align="false">, keeps its frame."""
    sys, m = physics.load_mjcf(ALIGNFREE), mujoco.MjModel.from_xml_string(ALIGNFREE)
    _check_against_mujoco(sys, m)
    np.testing.assert_allclose(m.body_ipos[1:3], 0, atol=1e-12)  # brick and ball: aligned
    assert np.abs(m.body_ipos[3]).max() > 0.05 and np.abs(m.body_ipos[4]).max() > 0.01
    close = lambda a, b: np.testing.assert_allclose(np.asarray(a), b, atol=1e-6)
    close(sys.body_quat, m.body_quat)
    close(sys.geom_quat, m.geom_quat)
    close(sys.site_pos, m.site_pos)
    close(sys.site_quat, m.site_quat)
    d = mujoco.MjData(m)
    state = drive_alongside(sys, m, d, [np.zeros(0)] * 6, 10)
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-4)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-3)
    two_geoms = ALIGNFREE.replace('<site name="eye"', '<geom size=".02"/><site name="eye"')
    with pytest.raises(physics.MJCFError, match="eigenbasis of several geoms"):
        physics.load_mjcf(two_geoms)
    with pytest.raises(physics.MJCFError, match="align='yes' must be auto, true or false"):
        physics.load_mjcf(ALIGNFREE.replace('align="false"', 'align="yes"'))


REPLICATE = """<mujoco><compiler angle="radian" eulerseq="zyx"/>
  <worldbody><geom type="plane" size="5 5 .1"/>
    <replicate count="3" offset=".5 0 .1" euler=".3 .2 .1" sep="-">
      <body name="brick" pos="0 .2 .4" euler=".1 0 0"><freejoint/>
        <geom name="block" type="box" size=".1 .05 .03"/><site name="eye" pos=".1 0 0"/></body>
      <geom name="post" type="capsule" fromto="0 1 0 0 1 .3" size=".02"/>
    </replicate>
    <body name="rack" pos="-2 0 .5">
      <replicate count="2" offset=".4 0 0"><replicate count="2" offset="0 .4 0" sep="_">
        <body name="slider"><joint name="rail" type="slide" axis="0 0 1"/>
          <geom type="sphere" size=".05"/></body>
      </replicate></replicate>
    </body>
    <replicate count="0"><body name="nothing"><geom size=".1"/></body></replicate>
    <replicate count="10" offset=".1 0 0"><geom name="pebble" size=".01" pos="3 3 0"/></replicate>
  </worldbody>
  <actuator><motor joint="rail_10"/></actuator></mujoco>"""


def test_replicate_places_and_names_copies_as_mujoco():
    """<replicate>: copies turned by multiples of euler (radian, zyx here) and moved by the
    turned offsets, in bodies and in the world, nested (the inner suffix first), names
    suffixed (zero-padded to count's digits) so that an actuator outside names a copy's
    joint; count 0 adds nothing."""
    sys, m = physics.load_mjcf(REPLICATE), mujoco.MjModel.from_xml_string(REPLICATE)
    _check_against_mujoco(sys, m)
    close = lambda a, b: np.testing.assert_allclose(np.asarray(a), b, atol=1e-6)
    close(sys.body_quat, m.body_quat)
    close(sys.geom_quat, m.geom_quat)
    close(sys.site_pos, m.site_pos)
    assert sys.body_names == tuple(m.body(i).name for i in range(m.nbody))
    assert sys.body_names[1:4] == ("brick-0", "brick-1", "brick-2")
    assert sys.jnt_names[-4:] == ("rail_00", "rail_10", "rail_01", "rail_11")
    assert sys.geom_names == tuple(m.geom(i).name for i in range(m.ngeom))
    assert sys.site_names == ("eye-0", "eye-1", "eye-2")
    assert "pebble09" in sys.geom_names
    for bad, needle in [('count="-1"', "count=-1 must be >= 0"), ('count="x"', "integer")]:
        with pytest.raises(physics.MJCFError, match=needle):
            physics.load_mjcf(REPLICATE.replace('count="0"', bad))


def test_filterparent_flag_lets_bodies_touch_their_parents_as_mujoco(x64):
    """<flag filterparent="disable">: a body's geoms collide with its parent's (those welded
    together still never do, nor a child of a body welded to the world with it): 30 steps
    against MuJoCo in float64 (the deep start leaves float32 3e-3 off), which differ from the
    filtered ones."""
    xml = """<mujoco><option><flag filterparent="disable"/></option><worldbody>
      <geom type="plane" size="5 5 .1"/>
      <body pos="0 0 .3"><joint type="slide" axis="0 0 1"/><geom type="sphere" size=".1"/>
        <body pos=".15 0 0"><joint axis="0 1 0"/><geom type="sphere" size=".1" pos="0 0 .05"/>
          <body pos=".1 0 0"><geom type="sphere" size=".05"/></body></body></body>
      <body pos="2 0 .5"><geom type="sphere" size=".1"/>
        <body pos=".15 0 0"><joint axis="0 1 0"/><geom type="sphere" size=".1"/></body></body>
    </worldbody></mujoco>"""
    filtered = mujoco.MjModel.from_xml_string(xml.replace('filterparent="disable"', ""))
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    d, reference = mujoco.MjData(m), mujoco.MjData(filtered)
    state = drive_alongside(sys, m, d, [np.zeros(0)] * 3, 10)
    mujoco.mj_step(filtered, reference, nstep=30)
    assert np.abs(d.qpos - reference.qpos).max() > 1e-2
    # filtered (MuJoCo's default): the sliding sphere (geom 1) and its child (2) never meet;
    # the child (5) of the body welded to the world (4) does meet its parent
    pairs = physics.load_mjcf(xml.replace('filterparent="disable"', "")).contact_pairs
    assert (1, 2) not in pairs and (4, 5) in pairs and (1, 2) in sys.contact_pairs
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-9)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-8)


# A ball rolling off with spin, a hinged capsule against the floor through an explicit pair,
# margins, and parameters of their own that the override replaces.
OVERRIDE_XML = """<mujoco><option cone="elliptic" tolerance="1e-12" o_margin=".004"
    o_solref=".03 .7" o_solimp=".8 .9 .002" o_friction=".3 .2 .01 .001 .002">
    <flag override="enable"/></option>
  <worldbody><geom name="floor" type="plane" size="5 5 .1" friction="1 .005 .0001"
    margin=".01"/>
    <body pos="0 0 .1"><freejoint/>
      <geom type="sphere" size=".1" condim="6" solref=".01 1" margin=".02"/></body>
    <body pos="1 0 .5"><joint axis="0 1 0"/>
      <geom name="arm" type="capsule" fromto="0 0 0 .45 0 -.45" size=".05" condim="3"/></body>
  </worldbody>
  <contact><pair geom1="floor" geom2="arm" condim="4" friction=".9 .9 .01" solref=".04 1"
    solreffriction=".05 .5" margin=".1"/></contact></mujoco>"""


def test_override_flag_gives_every_contact_the_options_parameters_as_mujoco(x64):
    """<flag override="enable">: every contact, the pair's too (its solreffriction included),
    takes o_margin, o_solref, o_solimp and o_friction; 40 steps against MuJoCo (its solver
    run to 1e-12), which differ from the same model without the override."""
    plain = mujoco.MjModel.from_xml_string(OVERRIDE_XML.replace('override="enable"', ""))
    sys, m = physics.load_mjcf(OVERRIDE_XML), mujoco.MjModel.from_xml_string(OVERRIDE_XML)
    assert sys.enable_override
    d, reference = mujoco.MjData(m), mujoco.MjData(plain)
    for data in (d, reference):
        data.qvel[:] = [1.0, 0.0, 0.0, 0.0, 20.0, 5.0, 2.0]
    state = drive_alongside(sys, m, d, [np.zeros(0)] * 4, 10)
    mujoco.mj_step(plain, reference, nstep=40)
    assert np.abs(d.qpos - reference.qpos).max() > 1e-2
    np.testing.assert_allclose(state.q, d.qpos, atol=1e-9)
    np.testing.assert_allclose(state.qd, d.qvel, atol=1e-7)


def test_partial_solref_vectors_keep_the_rest_from_their_class_as_mujoco():
    """A solref (or solreflimit, solreffriction) of one number sets the time constant and
    keeps the class's damping ratio (or the default's), on every element that has one."""
    xml = """<mujoco><default><geom solref=".05 .5"/><pair solref=".06 .4" solreffriction=".07 .3"/>
        <joint solreflimit=".04 .6" solreffriction=".03 .7"/>
        <default class="c"><geom solref=".01"/></default></default>
      <worldbody><geom name="f" type="plane" size="1 1 1" solref=".03"/>
        <body><joint name="j" range="0 1" solreflimit=".02" solreffriction=".09" frictionloss="1"/>
          <geom name="b" class="c" size=".1"/><geom size=".1" solref="-100"/></body></worldbody>
      <contact><pair geom1="f" geom2="b" solref=".08" solreffriction=".01"/></contact>
      <equality><joint joint1="j" solref=".11"/></equality>
      <tendon><fixed limited="true" range="0 1" solreflimit=".12" solreffriction=".13"
        frictionloss="1"><joint joint="j" coef="1"/></fixed></tendon></mujoco>"""
    sys, m = physics.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    for ours, theirs in [
        (sys.geom_solref, m.geom_solref),
        (sys.jnt_solref, m.jnt_solref),
        (sys.dof_solref, m.dof_solref),
        (sys.pair_solref, m.pair_solref),
        (sys.pair_solreffriction, m.pair_solreffriction),
        (sys.eq_solref, m.eq_solref),
        (sys.tendon_solref_limit, m.tendon_solref_lim),
        (sys.tendon_solref_friction, m.tendon_solref_fri),
    ]:
        np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-6)
    with pytest.raises(physics.MJCFError, match="'solref' takes at most 2 numbers"):
        physics.load_mjcf(xml.replace('solref=".03"', 'solref=".03 1 2"'))


def test_a_model_with_many_contact_slots_warns_to_set_max_contacts():
    """40 free balls over a floor: 820 geom pairs, each a slot solved every step unless
    max_contacts bounds them; the warning names the count and the way out. 20 balls (210
    slots), or a bound, load quietly."""

    def balls(n: int) -> str:
        bodies = "".join(
            f'<body pos="{i % 8 * 0.3} {i // 8 * 0.3} 1"><freejoint/><geom size=".1"/></body>'
            for i in range(n)
        )
        return f'<mujoco><worldbody><geom type="plane" size="5 5 .1"/>{bodies}</worldbody></mujoco>'

    with pytest.warns(physics.MJCFWarning, match="820 contact slots from 820 geom pairs"):
        physics.load_mjcf(balls(40))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        physics.load_mjcf(balls(40), max_contacts=16)
        physics.load_mjcf(balls(20))


SHELLS = """<mujoco><default><default class="shell"><geom shellinertia="true"/></default></default>
  <worldbody>
  <body><freejoint/><geom class="shell" size=".1"/></body>
  <body pos="1 0 0"><freejoint/><geom class="shell" type="capsule" size=".05 .2" euler="10 20 30"/>
  </body>
  <body pos="2 0 0"><freejoint/><geom class="shell" type="cylinder" size=".07 .15" pos=".1 0 0"/>
    <geom size=".03"/></body>
  <body pos="3 0 0"><freejoint/><geom class="shell" type="box" size=".1 .2 .3" mass="2"/></body>
  <body pos="4 0 0"><freejoint/>
    <geom class="shell" type="ellipsoid" size=".1 .2 .3" euler="30 0 0"/></body>
  <body pos="5 0 0"><freejoint/>
    <geom class="shell" type="box" size=".1 .2 .3" shellinertia="false"/></body>
  </worldbody></mujoco>"""


def test_shell_inertia_of_each_primitive_is_mujocos(x64):
    """shellinertia puts a geom's mass on its surface (area times density, or its mass): each
    primitive's mass and inertia as MuJoCo computes them, from a class default too; a mesh
    geom is told to say it on its <mesh>, as MuJoCo 4 does."""
    sys, m = physics.load_mjcf(SHELLS), mujoco.MjModel.from_xml_string(SHELLS)
    np.testing.assert_allclose(np.asarray(sys.body_mass), m.body_mass, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(sys.body_ipos), m.body_ipos, atol=1e-12)
    np.testing.assert_allclose(np.asarray(sys.body_inertia), _body_inertia(m), atol=1e-12)
    solid = physics.load_mjcf(SHELLS.replace('shellinertia="true"', ""))
    differ = np.asarray(solid.body_mass) != np.asarray(sys.body_mass)
    assert differ.tolist() == [False, True, True, True, False, True, False]  # (box: mass given)
    with pytest.raises(physics.MJCFError, match='give its <mesh> inertia="shell"'):
        physics.load_mjcf(
            '<mujoco><asset><mesh name="t" vertex="0 0 0 1 0 0 0 1 0 0 0 1"/></asset>'
            '<worldbody><body><freejoint/><geom type="mesh" mesh="t" shellinertia="true"/>'
            "</body></worldbody></mujoco>"
        )


def test_inverse_like_mujoco_is_the_inverse_of_a_regular_mass_matrix():
    from physics.linalg import inverse_like_mujoco

    rng = np.random.default_rng(0)
    a = rng.normal(size=(7, 7))
    m = a @ a.T + 0.1 * np.eye(7)
    minv, ratio = inverse_like_mujoco(m)
    np.testing.assert_allclose(minv, np.linalg.inv(m), rtol=1e-9, atol=1e-12)
    assert (ratio > 0).all() and (ratio <= 1).all()
    # singular: the pivot becomes MuJoCo's mjMINVAL, as in its mj_factorI
    minv, ratio = inverse_like_mujoco(np.ones((2, 2)))
    assert np.isfinite(minv).all() and np.abs(minv).max() == pytest.approx(1e15)
    assert ratio[0] == pytest.approx(1e-15) and ratio[1] == 1


SINGULAR_XML = """<mujoco><worldbody><body>
  <joint name="x" type="slide" axis="1 0 0"/><joint name="y" type="slide" axis="0 1 0"/>
  <joint name="z" type="slide" axis="0 0 1"/><joint name="xy" type="slide" axis="1 1 0"/>
  <geom type="box" size=".05 .05 .05" mass="1"/></body></worldbody>
  <actuator><position joint="x" kp="10" dampratio="1"/></actuator></mujoco>"""


@pytest.mark.parametrize("use_x64", [False, True])
def test_a_singular_mass_matrix_loads_with_a_warning_naming_the_joints(use_x64, request):
    """MuJoCo loads a body moved by dependent joints (its test model general_dyntype.xml),
    warning of a singular inertia; we did fail with 'invalid attribute value: Singular
    matrix' in float64."""
    if use_x64:
        request.getfixturevalue("x64")
    with pytest.warns(physics.MJCFWarning, match=r"singular at the dofs of 'x'.*armature"):
        sys = physics.load_mjcf(SINGULAR_XML)
    assert sys.topology.nv == 4 and np.isfinite(np.asarray(sys.actuator_bias)).all()
    mujoco.MjModel.from_xml_string(SINGULAR_XML)  # MuJoCo takes it too


SLEEPY = """<mujoco><option timestep="0.005" sleep_tolerance="1e-3"><flag sleep="enable"/></option>
  <worldbody><geom type="plane" size="2 2 .1"/>
    <body pos="0 0 .3" euler="20 10 0" sleep="{policy}"><freejoint/>
      <geom type="box" size=".1 .08 .05"/></body></worldbody></mujoco>"""


def test_sleep_is_not_simulated_but_a_resting_body_stays_where_mujocos_sleeps():
    """With sleep enabled MuJoCo freezes a tree once its velocities stay under sleep_tolerance;
    here every tree stays awake (with a warning). A box that lands and goes to sleep in MuJoCo
    rests within 1e-4 of it; a tree set to start asleep, and an unknown policy,
    are refused by name."""
    xml = SLEEPY.format(policy="allowed")
    with pytest.warns(physics.MJCFWarning, match="sleep='enable'"):
        sys = physics.load_mjcf(xml)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    state = jax.jit(physics.step, static_argnames="n_substeps")(
        sys, physics.init(sys, d.qpos.copy(), d.qvel.copy()), np.zeros(0), n_substeps=400
    )
    mujoco.mj_step(m, d, nstep=400)
    assert np.all(d.qvel == 0.0), "MuJoCo's box did not go to sleep"
    np.testing.assert_allclose(np.asarray(state.q), d.qpos, atol=1e-4)  # measured: 1.5e-5
    assert np.abs(np.asarray(state.qd)).max() < 1e-2
    with pytest.warns(physics.MJCFWarning), pytest.raises(physics.MJCFError, match="'init'"):
        physics.load_mjcf(SLEEPY.format(policy="init"))
    with pytest.warns(physics.MJCFWarning), pytest.raises(physics.MJCFError, match="one of"):
        physics.load_mjcf(SLEEPY.format(policy="nap"))
