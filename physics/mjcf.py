"""MJCF loader: a subset of MuJoCo's XML format -> :class:`physics.system.System`.

Supported: nested bodies (pos, quat/euler/axisangle/xyaxes/zaxis, gravcomp), ``inertial`` or
inertia from geoms and density as MuJoCo computes it (in the volume, or on the surface with
``shellinertia``; with the compiler's boundmass,
boundinertia, balanceinertia and alignfree), hinge/slide/ball/free joints (limits,
damping, stiffness or springdamper, armature, frictionloss, actuatorfrcrange, actuatorgravcomp),
plane/sphere/capsule/ellipsoid/cylinder/box geoms, mesh geoms (``<asset><mesh>`` from a file or
inline vertices: :mod:`physics.mesh`), height fields (``<asset><hfield>`` from an elevation list,
a PNG or MuJoCo's binary file, on static bodies: :mod:`physics.hfield`),
motor/position/velocity/intvelocity/damper/cylinder/muscle/general (fixed, affine or muscle
gain, affine or muscle bias, integrator/filter/muscle activation) on joints, tendons or sites,
adhesion (a body transmission: :func:`physics.contact.adhesion_force`), solref vectors given
in part (the rest from the class, as MuJoCo reads them),
with muscles' length ranges computed as MuJoCo's compiler computes them
(``<compiler><lengthrange>``: :mod:`physics.lengthrange`), ``include`` files, ``frame`` and
``replicate`` elements, ``option`` timestep/gravity/flags (the contact ``override`` with
o_margin/o_solref/o_solimp/o_friction included), ``noslip_iterations`` (MuJoCo's noslip
sweeps, :mod:`physics.noslip`) and a medium's
density/viscosity/wind (MuJoCo's inertia-box fluid model, or its ellipsoid one on geoms with
``fluidshape``: :mod:`physics.fluid`), the pyramidal or elliptic friction cone (contacts of
condim 1, 3, 4 and 6), ``default`` classes with ``childclass``, ``contact/exclude`` and explicit
``contact/pair`` elements, sites, fixed tendons and spatial tendons (through sites and pulleys,
and around spheres and cylinders) with springs, dampers, limits and friction loss, and
``equality`` connect and weld (by bodies or sites), joint and tendon couplings. Purely visual
or bookkeeping content (rgba, materials, textures, cameras, lights, sensors, keyframes, ...) is
skipped. Anything else that would change the dynamics raises :class:`MJCFError` naming it and
the file, so a model never silently behaves differently from MuJoCo.

``option integrator`` is honoured: Euler (semi-implicit, implicit joint damping), RK4,
implicit and implicitfast, each as MuJoCo integrates (:mod:`physics.step`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from physics import constraints as con
from physics import (
    contact,
    equality,
    fluid,
    hfield,
    kinematics,
    lengthrange,
    mesh,
    tendon,
)
from physics import system as S
from physics.math import float_dtype
from physics.system import INTEGRATORS

_MINVAL = 1e-15

_JOINT_TYPES = {"free": S.JNT_FREE, "ball": S.JNT_BALL, "slide": S.JNT_SLIDE, "hinge": S.JNT_HINGE}
_GEOM_TYPES = {
    "plane": S.GEOM_PLANE,
    "hfield": S.GEOM_HFIELD,
    "sphere": S.GEOM_SPHERE,
    "capsule": S.GEOM_CAPSULE,
    "ellipsoid": S.GEOM_ELLIPSOID,
    "cylinder": S.GEOM_CYLINDER,
    "box": S.GEOM_BOX,
    "mesh": S.GEOM_MESH,
}
_ORIENT = ("quat", "euler", "axisangle", "xyaxes", "zaxis")
_VISUAL = {"name", "class", "rgba", "material", "group", "user"}

# Attributes every actuator element understands (joint, tendon or site transmission).
_ACTUATOR = {
    "joint",
    "jointinparent",
    "tendon",
    "site",
    "refsite",
    "cranksite",
    "slidersite",
    "cranklength",
    "gear",
    "ctrlrange",
    "ctrllimited",
    "actearly",
    "forcerange",
    "forcelimited",
    "lengthrange",  # (on the element only: MuJoCo's schema refuses it in a <default>)
} | _VISUAL
_TRANSMISSIONS = ("joint", "jointinparent", "tendon", "site", "cranksite", "body")
# MuJoCo keeps one actuator default per class, which every actuator element in <default> sets.
_ACTUATOR_TAGS = (
    "general",
    "motor",
    "position",
    "velocity",
    "intvelocity",
    "damper",
    "cylinder",
    "muscle",
    "adhesion",
)
# A <muscle>'s own parameters and their defaults (MuJoCo's), in gainprm order after timeconst
# and tausmooth (which go into dynprm).
_MUSCLE = {
    "timeconst": "0.01 0.04",
    "tausmooth": "0",
    "range": "0.75 1.05",
    "force": "-1",
    "scale": "200",
    "lmin": "0.5",
    "lmax": "1.6",
    "vmax": "1.5",
    "fpmax": "1.3",
    "fvmax": "1.2",
}
# Actuator attributes that set the force model (gain and bias); the others (gear, ranges, ...)
# are common to every kind.
_GAIN_BIAS = {
    "kp",
    "kv",
    "dampratio",
    "timeconst",
    "area",
    "diameter",
    "bias",
    "gainprm",
    "biasprm",
    "gaintype",
    "biastype",
    "dyntype",
    "dynprm",
    "gain",
} | set(_MUSCLE)
# Activation dynamics (MuJoCo's mjtDyn) of a <general> actuator: its state act follows ctrl.
_DYNTYPES = {"none": 0, "integrator": 1, "filter": 2, "filterexact": 3, "muscle": S.DYN_MUSCLE}

# Attributes of every <equality> element, and of each kind (connect and weld by bodies or by
# sites).
_EQUALITY = {"name", "class", "active", "solref", "solimp"}
_EQUALITY_KINDS = {
    "connect": _EQUALITY | {"body1", "body2", "anchor", "site1", "site2"},
    "weld": _EQUALITY | {"body1", "body2", "anchor", "relpose", "torquescale", "site1", "site2"},
    "joint": _EQUALITY | {"joint1", "joint2", "polycoef"},
    "tendon": _EQUALITY | {"tendon1", "tendon2", "polycoef"},
}

# Attributes of both kinds of tendon (<fixed>, <spatial>).
_TENDON = {
    "limited",
    "range",
    "stiffness",
    "damping",
    "frictionloss",
    "springlength",
    "armature",
    "actuatorfrcrange",
    "actuatorfrclimited",
    "width",
    "margin",
    "solreflimit",
    "solimplimit",
    "solreffriction",
    "solimpfriction",
} | _VISUAL

# Attributes understood per element; anything else on these elements is an error.
_KNOWN = {
    "body": {"pos", "childclass", "gravcomp", "mocap", "sleep", *_ORIENT} | _VISUAL,
    "inertial": {"pos", "mass", "diaginertia", "fullinertia", *_ORIENT},
    "joint": {
        "type",
        "pos",
        "axis",
        "range",
        "limited",
        "armature",
        "damping",
        "stiffness",
        "springref",
        "springdamper",
        "actuatorfrcrange",
        "actuatorfrclimited",
        "actuatorgravcomp",
        "ref",
        "margin",
        "solreflimit",
        "solimplimit",
        "frictionloss",
        "solreffriction",
        "solimpfriction",
    }
    | _VISUAL,
    "freejoint": {"align"} | _VISUAL,
    "frame": {"pos", "childclass", *_ORIENT} | _VISUAL,
    "replicate": {"count", "offset", "euler", "sep"},
    "geom": {
        "type",
        "pos",
        "size",
        "fromto",
        "friction",
        "contype",
        "conaffinity",
        "condim",
        "density",
        "mass",
        "margin",
        "gap",  # accepted: it only widens MuJoCo's detection of inactive contacts
        "solref",
        "solimp",
        "solmix",
        "priority",
        "fluidshape",
        "shellinertia",  # mass on the surface: physics.mjcf._Loader.geom_inertia
        "fluidcoef",
        "mesh",
        "hfield",
        "fitscale",
        *_ORIENT,
    }
    | _VISUAL,
    "hfield": {"name", "file", "content_type", "nrow", "ncol", "elevation", "size"},
    "mesh": {
        "name",
        "class",
        "file",
        "content_type",
        "vertex",
        "face",
        "scale",
        "refpos",
        "refquat",
        "inertia",
        "maxhullvert",
        "normal",  # normals, texture coordinates and smoothing only shade the mesh
        "texcoord",
        "smoothnormal",
    },
    "motor": _ACTUATOR,
    # a pull toward whatever the body touches: body transmission, gain (physics.contact)
    "adhesion": {"name", "class", "group", "user", "body", "gain", "ctrlrange", "forcerange"}
    | {"forcelimited"},
    "position": _ACTUATOR | {"kp", "kv", "dampratio", "inheritrange"},
    "velocity": _ACTUATOR | {"kv"},
    # integrated velocity: act' = ctrl, a position servo (kp, kv) on act, within actrange
    "intvelocity": _ACTUATOR | {"kp", "kv", "dampratio", "actrange", "actlimited"},
    # a damper of adjustable strength: force = -kv velocity ctrl (ctrl >= 0)
    "damper": _ACTUATOR | {"kv"},
    # a pneumatic or hydraulic cylinder: act filters ctrl (timeconst); force area act + bias
    "cylinder": _ACTUATOR | {"timeconst", "area", "diameter", "bias"},
    # MuJoCo's muscle: activation dynamics, force-length-velocity gain, passive bias
    "muscle": _ACTUATOR | set(_MUSCLE),
    "general": _ACTUATOR
    | {
        "body",
        "gainprm",
        "biasprm",
        "gaintype",
        "biastype",
        "dyntype",
        "dynprm",
        "actrange",
        "actlimited",
    },
    "option": {
        "timestep",
        "gravity",
        "integrator",
        "iterations",
        "ls_iterations",
        "tolerance",
        "ls_tolerance",
        "solver",
        "cone",
        "impratio",
        "noslip_iterations",
        "noslip_tolerance",
        "density",
        "viscosity",
        "wind",
        "magnetic",
        "jacobian",
        "apirate",
        "o_margin",
        "o_solref",
        "o_solimp",
        "o_friction",
        "sleep_tolerance",
    },
    "compiler": {
        "angle",
        "coordinate",
        "inertiafromgeom",
        "settotalmass",
        "eulerseq",
        "autolimits",
        "inertiagrouprange",
        "meshdir",
        "texturedir",
        "assetdir",
        "discardvisual",
        "strippath",
        "usethread",
        "boundmass",
        "boundinertia",
        "balanceinertia",
        "fusestatic",
        "alignfree",
        "fitaabb",
    },
    "fixed": _TENDON,
    "spatial": _TENDON,
    "site": {"type", "size", "pos", "fromto", *_ORIENT} | _VISUAL,
    "exclude": {"name", "body1", "body2"},
    "pair": {
        "name",
        "class",
        "geom1",
        "geom2",
        "condim",
        "friction",
        "solref",
        "solreffriction",
        "solimp",
        "margin",
        "gap",  # accepted: as a geom's, it only widens the detection of inactive contacts
    },
    "equality": _EQUALITY,  # in <default>: what every kind of equality takes from its class
}
# Vector attributes that may be given partially, the rest coming from the default class.
_PARTIAL = {"friction", "solimp", "solimplimit", "solimpfriction", "size", "gear"} | {
    "solref",
    "solreflimit",
    "solreffriction",
}
# Elements skipped because they never change the dynamics.
_IGNORED = {
    "camera",
    "light",
    "asset",
    "visual",
    "statistic",
    "custom",
    "size",
    "keyframe",
    "sensor",
}
# Defaults of elements this engine refuses wherever a model uses them (a flex) or that never
# change the dynamics (a material): a class may hold them.
_DEFAULTS_OF_REFUSED = {"material", "flex"}
# <option><flag> switches with MuJoCo's defaults, and those that cannot change what this engine
# simulates (diagnostics, solver and collision internals, features it refuses to load anyway).
_FLAG_DEFAULTS = {
    **dict.fromkeys(
        "constraint equality frictionloss limit contact spring damper gravity clampctrl "
        "warmstart filterparent actuation refsafe sensor midphase eulerdamp autoreset "
        "nativeccd island".split(),
        "enable",
    ),
    **dict.fromkeys(
        "override energy fwdinv invdiscrete multiccd sleep diagexact ipc speculative".split(),
        "disable",
    ),
}
# What each switch this engine honours turns off when disabled.
_FLAG_EFFECTS = {
    "constraint": {"contact", "limit", "frictionloss", "equality"},
    "contact": {"contact"},
    "limit": {"limit"},
    "frictionloss": {"frictionloss"},
    "gravity": {"gravity"},
    "equality": {"equality"},
    "eulerdamp": {"eulerdamp"},
    "spring": {"spring"},
    "damper": {"damper"},
    "actuation": {"actuation"},
    "clampctrl": {"clampctrl"},
    "filterparent": {"filterparent"},
    "island": {"island"},
}
# The switches off by default that this engine honours when enabled.
_ENABLE_FLAGS = {"override"}
_FLAGS_WITHOUT_EFFECT = {
    "warmstart",
    "refsafe",
    "sensor",
    "midphase",
    "autoreset",
    "nativeccd",
    "energy",
    "fwdinv",
    "invdiscrete",
    "multiccd",
}
# A <body sleep=...> policy (MuJoCo's mjtSleepPolicy keywords).
_SLEEP_POLICIES = ("auto", "never", "allowed", "init")
# A contact's five friction coefficients when nothing sets them (a pair's, MuJoCo's o_friction)
_DEFAULT_FRICTION = (1.0, 1.0, 0.005, 0.0001, 0.0001)


class MJCFError(ValueError):
    """A model the engine cannot load (invalid, or using an unsupported feature)."""


class MJCFWarning(UserWarning):
    """A model feature the engine loads but does not simulate, or a model it simulates slowly
    as loaded (named in the message)."""


# Above this many contact slots a model loaded with max_contacts=None warns: every slot's rows
# enter every constraint solve (masked when inactive), O(slots) per Newton step and O(slots^2)
# per exact line search. MuJoCo Menagerie's g1 (3,096 slots from 1,013 geom pairs) stepped in
# 0.75 s at batch 1 on a 2-core CPU, and in 18 ms with max_contacts=32.
_MANY_SLOTS = 512


def _floats(text: str) -> np.ndarray:
    return np.asarray([float(x) for x in text.split()], np.float64)


def _merge(out: dict[str, str], attrib: dict[str, str]) -> None:
    """`out.update(attrib)`, except that a vector attribute of _PARTIAL given with fewer numbers
    than it has overwrites only those (as MuJoCo reads size, friction, solimp and gear)."""
    for key, text in attrib.items():
        if key in _PARTIAL and key in out:
            given, inherited = text.split(), out[key].split()
            text = " ".join(given + inherited[len(given) :])
        out[key] = text


def _axis_angle_quat(axis: np.ndarray, angle: float) -> np.ndarray:
    axis = axis / np.linalg.norm(axis)
    return np.concatenate([[math.cos(angle / 2)], math.sin(angle / 2) * axis])


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def _quat_mat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _mat_quat(r: np.ndarray) -> np.ndarray:
    """Quaternion of a rotation matrix (Shepperd's method)."""
    t = np.trace(r)
    if t > 0:
        s = 2 * math.sqrt(t + 1)
        q = [s / 4, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(r)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2 * math.sqrt(1 + r[i, i] - r[j, j] - r[k, k])
        q = [0.0] * 4
        q[0] = (r[k, j] - r[j, k]) / s
        q[1 + i] = s / 4
        q[1 + j] = (r[j, i] + r[i, j]) / s
        q[1 + k] = (r[k, i] + r[i, k]) / s
    q = np.asarray(q)
    return q / np.linalg.norm(q)


def _principal_axes(inertia: np.ndarray) -> np.ndarray:
    """Columns: principal axes of a symmetric 3x3 inertia (the identity when it is diagonal)."""
    if np.allclose(inertia, np.diag(np.diag(inertia)), rtol=0, atol=1e-12 * np.abs(inertia).max()):
        return np.eye(3)
    return np.linalg.eigh(inertia)[1]


def _z_to_vec_quat(vec: np.ndarray) -> np.ndarray:
    """Quaternion rotating +z onto ``vec`` (MuJoCo's mju_quatZ2Vec)."""
    v = vec / np.linalg.norm(vec)
    ax = np.cross([0.0, 0.0, 1.0], v)
    s = np.linalg.norm(ax)
    if s < 1e-10:
        return np.array([0.0, 1.0, 0.0, 0.0]) if v[2] < 0 else np.array([1.0, 0.0, 0.0, 0.0])
    return _axis_angle_quat(ax / s, math.atan2(s, v[2]))


# The pose (pos, quat) of the <frame> elements around an element, in its body's frame.
_Frame = tuple[np.ndarray, np.ndarray] | None


def _shell_inertia(g: dict, t: int, r: float, h: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass, 3x3 inertia (body frame) and axes of a primitive geom whose mass lies on its
    surface, by MuJoCo's formulas: the area (for an ellipsoid, Thomsen's approximation) times
    the density, and the inertia of the surface's parts (a capsule's tube and two hemispheres,
    a cylinder's tube and two disks, a box's six faces; an ellipsoid's as the difference of two
    solid ones 1e-6 apart)."""
    size = g["size"]
    if t == S.GEOM_SPHERE:
        area = 4 * math.pi * r * r
    elif t == S.GEOM_CAPSULE:
        area = 4 * math.pi * r * r + 4 * math.pi * r * h
    elif t == S.GEOM_CYLINDER:
        area = 2 * math.pi * r * r + 4 * math.pi * r * h
    elif t == S.GEOM_ELLIPSOID:
        p = 1.6075
        x, y, z = size
        area = 4 * math.pi * (((x * y) ** p + (y * z) ** p + (z * x) ** p) / 3) ** (1 / p)
    else:
        x, y, z = size
        area = 8 * (x * y + y * z + z * x)
    mass = g["mass"] if g["mass"] is not None else g["density"] * area
    if t == S.GEOM_SPHERE:
        d = np.full(3, 2 * mass * r * r / 3)
    elif t in (S.GEOM_CAPSULE, S.GEOM_CYLINDER):
        # the tube (radius r, length 2h), and two hemispheres or two disks at its ends
        tube_area = 4 * math.pi * r * h
        tube = mass * tube_area / area
        ends = mass - tube
        d = np.array([tube * (6 * r * r + 4 * h * h) / 12] * 2 + [tube * r * r])
        if t == S.GEOM_CAPSULE:  # a hemisphere's centre of mass is r/2 from its base
            com, at = r / 2, h + r / 2
            side = 2 * ends * r * r / 3 + ends * (at * at - com * com)
            d += [side, side, 2 * ends * r * r / 3]
        else:
            d += [ends * r * r / 4 + ends * h * h] * 2 + [ends * r * r / 2]
    elif t == S.GEOM_ELLIPSOID:
        eps = 1e-6
        inner, outer = size, size + eps
        density = mass / (4 / 3 * math.pi * (np.prod(outer) - np.prod(inner)))

        def solid(s: np.ndarray) -> np.ndarray:
            x, y, z = s * s
            return density * 4 / 3 * math.pi * np.prod(s) / 5 * np.array([y + z, x + z, x + y])

        d = solid(outer) - solid(inner)
    else:
        lx, ly, lz = 2 * size
        x2, y2, z2 = size * size
        m0, m1, m2 = (mass * a / (area) for a in (lx * ly, ly * lz, lz * lx))  # the face pairs
        d = 2 * np.array(
            [
                m0 * z2 + m2 * y2 + (m0 * ly * ly + m1 * (ly * ly + lz * lz) + m2 * lz * lz) / 12,
                m0 * z2 + m1 * x2 + (m0 * lx * lx + m1 * lz * lz + m2 * (lx * lx + lz * lz)) / 12,
                m1 * x2 + m2 * y2 + (m0 * (lx * lx + ly * ly) + m1 * ly * ly + m2 * lx * lx) / 12,
            ]
        )
    rot = _quat_mat(g["quat"])
    return mass, rot @ np.diag(d) @ rot.T, rot


def _cylinder_area(a: dict[str, str]) -> float:
    """A <cylinder> actuator's gain: its area, or pi d^2 / 4 where a diameter is given."""
    if "diameter" in a:
        return math.pi / 4 * float(a["diameter"]) ** 2
    return float(a.get("area", 1.0))


def _general_form(kind: str, a: dict[str, str], own: dict[str, str]) -> dict[str, str]:
    """The <general> attributes (gain, bias, dynamics) an actuator shortcut stands for, from
    its attributes `a` (MuJoCo's rules; `own`: the attributes given on the element itself,
    where an own kv wins over a class's dampratio, which MuJoCo keeps in the same slot)."""
    if kind in ("position", "intvelocity"):
        kp, kv = float(a.get("kp", 1.0)), float(a.get("kv", 0.0))
        # a damping ratio rides in biasprm[2] as a positive number (see parse_actuators)
        damping = float(a["dampratio"]) if "dampratio" in a and "kv" not in own else -kv
        form = {"gainprm": f"{kp!r}", "biastype": "affine", "biasprm": f"0 {-kp!r} {damping!r}"}
        if kind == "intvelocity":  # an integrator on ctrl, a position servo on it
            return {**form, "dyntype": "integrator", "actlimited": a.get("actlimited", "true")}
        return {**form, "dyntype": "none"}
    if kind == "velocity":
        kv = float(a.get("kv", 1.0))
        return {"gainprm": f"{kv!r}", "biastype": "affine", "biasprm": f"0 0 {-kv!r}"}
    if kind == "damper":  # gain -kv velocity, ctrl the damper's strength
        kv = float(a.get("kv", 1.0))
        return {"gaintype": "affine", "gainprm": f"0 0 {-kv!r}", "dyntype": "none"}
    if kind == "cylinder":  # a filter on ctrl, gain area, affine bias
        return {
            "gainprm": f"{_cylinder_area(a)!r}",
            "biastype": "affine",
            "biasprm": a.get("bias", "0 0 0"),
            "dyntype": "filter",
            "dynprm": a.get("timeconst", "1"),
        }
    if kind == "muscle":  # the same parameters for the gain and the bias
        muscle = {k: a.get(k, v) for k, v in _MUSCLE.items()}
        prm = " ".join(muscle[k] for k in list(_MUSCLE)[2:])
        return {
            "gaintype": "muscle",
            "biastype": "muscle",
            "dyntype": "muscle",
            "dynprm": f"{muscle['timeconst']} {muscle['tausmooth']}",
            "gainprm": prm,
            "biasprm": prm,
        }
    if kind == "adhesion":  # its control range is always limited
        return {"gainprm": a.get("gain", "1"), "dyntype": "none", "ctrllimited": "true"}
    return {"dyntype": "none"}  # <motor>: unit gain, no bias


def _in_frame(frame: _Frame, pos: np.ndarray, quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A pose given inside `frame`, expressed in the frame's parent."""
    if frame is None:
        return pos, quat
    frame_pos, frame_quat = frame
    return frame_pos + _quat_mat(frame_quat) @ pos, _quat_mul(frame_quat, quat)


class _Loader:
    """One pass over a parsed MJCF document, accumulating numpy model arrays."""

    def __init__(self, root: ET.Element, source: str, base: str):
        self.source = source
        self.root = root
        self.base = base  # directory that relative asset paths start from (the model's)
        self.classes: dict[str, dict[str, dict[str, str]]] = {}
        self.bodies: list[dict] = []
        self.joints: list[dict] = []
        self.geoms: list[dict] = []
        self.mesh_elems: dict[str, ET.Element] = {}  # <asset><mesh> by name
        self.meshes: dict[str, mesh.Mesh] = {}  # the ones geoms use, processed once each
        self.hfield_elems: dict[str, ET.Element] = {}  # <asset><hfield> by name
        self.hfields: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # used: (heights, size)
        self.actuators: list[dict] = []
        self.sites: list[dict] = []
        self.mocap: list[int] = []  # bodies with mocap="true"
        self.tendons: dict[str, dict] = {}  # name -> path, limited, range
        self.spring_tendons: list[dict] = []  # tendons with a spring or damper
        self.armature_tendons: list[dict] = []  # tendons with armature
        self.constrained_tendons: list[dict] = []  # tendons with a limit or friction loss
        self.excludes: list[tuple[str, str, ET.Element]] = []
        self.pairs: list[dict] = []  # <contact><pair>: explicit geom pairs and their parameters
        self.equalities: list[dict] = []
        self.current: ET.Element | None = None  # the element whose attributes were read last

    # ---------------------------------------------------------------- errors and attributes
    def error(self, elem: ET.Element | None, msg: str) -> MJCFError:
        where = ""
        if elem is not None:
            name = elem.get("name")
            where = f"<{elem.tag}{' name=' + repr(name) if name else ''}>: "
        return MJCFError(f"{self.source}: {where}{msg}")

    def check_known(self, elem: ET.Element, keys: object, known: set[str] | None = None) -> None:
        """Refuse attributes `keys` of `elem` outside `known` (default: _KNOWN of its tag)."""
        unknown = sorted(set(keys) - (_KNOWN[elem.tag] if known is None else known))
        if unknown:
            raise self.error(elem, f"unsupported attribute(s) {unknown} on <{elem.tag}>")

    def attrs(self, elem: ET.Element, cls: str) -> dict[str, str]:
        """Element attributes with the defaults of its class filled in, checked for support."""
        cls = elem.get("class", cls)
        if cls not in self.classes:
            raise self.error(elem, f"unknown default class {cls!r}")
        defaults = self.classes[cls]
        if elem.tag in _ACTUATOR_TAGS:
            out = {**defaults.get("actuator", {}), **self.inherited_force_model(elem, defaults)}
        else:  # a <fixed> or <spatial> tendon takes its class's <tendon> defaults
            tag = "tendon" if elem.tag in ("fixed", "spatial") else elem.tag
            out = dict(defaults.get(tag, {}))
        self.current = elem  # named if one of its numbers turns out malformed
        _merge(out, elem.attrib)
        # an actuator's class defaults were checked where they were set: the one actuator
        # default every kind shares may hold what this kind cannot say itself (an <adhesion>
        # under a <general ctrllimited="true"> takes it, and MuJoCo holds its range limited)
        self.check_known(elem, elem.attrib if elem.tag in _ACTUATOR_TAGS else out)
        return out

    def get_floats(
        self, elem: ET.Element, a: dict[str, str], key: str, default: object, n: int | None = None
    ) -> np.ndarray:
        if key not in a:
            return np.asarray(default, np.float64)
        try:
            v = _floats(a[key])
        except ValueError:
            raise self.error(elem, f"attribute {key!r} must be numbers, got {a[key]!r}") from None
        if n is not None and len(v) != n:
            raise self.error(elem, f"attribute {key!r} needs {n} numbers, got {a[key]!r}")
        return v

    def padded(
        self, elem: ET.Element, a: dict[str, str], key: str, default: tuple[float, ...]
    ) -> np.ndarray:
        """A vector attribute that may give a prefix only, the rest from `default` (as MuJoCo
        reads friction and solimp)."""
        v = self.get_floats(elem, a, key, default)
        if len(v) > len(default):
            raise self.error(elem, f"attribute {key!r} takes at most {len(default)} numbers")
        return np.concatenate([v, default[len(v) :]])

    def flag(self, elem: ET.Element, a: dict[str, str], key: str, auto: bool) -> bool:
        v = a.get(key, "auto")
        if v not in ("true", "false", "auto"):
            raise self.error(elem, f"{key}={v!r} must be true, false or auto")
        if v == "auto" and not self.autolimits and f"{key[:-7]}range" in a:
            raise self.error(elem, f"{key} is 'auto' but compiler autolimits is false")
        return auto if v == "auto" else v == "true"

    # ---------------------------------------------------------------- compiler, option, defaults
    def parse_compiler(self) -> None:
        self.degree, self.eulerseq, self.inertiafromgeom = True, "xyz", "auto"
        self.settotalmass, self.autolimits = -1.0, True
        self.inertiagroups = (0, 5)  # geoms of these groups give a body its inertia
        self.meshdir, self.strippath, self.fitaabb = "", False, False
        # lower bounds on bodies' mass and principal moments, and the triangle inequality
        self.boundmass, self.boundinertia, self.balanceinertia = 0.0, 0.0, False
        self.alignfree = False
        self.lengthrange = lengthrange.LengthRangeOptions()
        for c in self.root.iter("compiler"):
            a = dict(c.attrib)
            self.check_known(c, a)
            for child in c:
                if child.tag != "lengthrange":
                    raise self.error(child, f"unsupported element <{child.tag}> in <compiler>")
                self.lengthrange = self.lengthrange_options(child)
            self.degree = a.get("angle", "degree" if self.degree else "radian") == "degree"
            self.eulerseq = a.get("eulerseq", self.eulerseq)
            if len(self.eulerseq) != 3 or set(self.eulerseq.lower()) - set("xyz"):
                raise self.error(c, f"invalid eulerseq {self.eulerseq!r}")
            self.inertiafromgeom = a.get("inertiafromgeom", self.inertiafromgeom)
            self.settotalmass = float(a.get("settotalmass", self.settotalmass))
            self.autolimits = a.get("autolimits", "true") == "true"
            if "inertiagrouprange" in a:
                low, high = (int(v) for v in self.get_floats(c, a, "inertiagrouprange", 0, 2))
                self.inertiagroups = (low, high)
            self.meshdir = a.get("meshdir", a.get("assetdir", self.meshdir))
            self.strippath = a.get("strippath", "false") == "true"
            self.fitaabb = a.get("fitaabb", "false") == "true"
            if a.get("coordinate", "local") != "local":
                raise self.error(c, "only coordinate='local' is supported")
            self.boundmass = float(a.get("boundmass", self.boundmass))
            self.boundinertia = float(a.get("boundinertia", self.boundinertia))
            self.balanceinertia = a.get("balanceinertia", "false") == "true"
            if a.get("alignfree", "false") not in ("true", "false"):
                raise self.error(c, f"alignfree={a['alignfree']!r} must be true or false")
            self.alignfree = a.get("alignfree", "false") == "true"
            if a.get("fusestatic", "false") == "true":  # the same dynamics, other body ids
                warnings.warn(
                    f"{self.source}: <compiler fusestatic='true'>: bodies without joints are "
                    "kept (MuJoCo merges them into their parents); the dynamics are the same, "
                    "body indices and names differ from MuJoCo's",
                    MJCFWarning,
                    stacklevel=4,
                )

    def lengthrange_options(self, e: ET.Element) -> lengthrange.LengthRangeOptions:
        """<compiler><lengthrange>: how muscles' length ranges are found (MuJoCo's mjLROpt)."""
        fields = {f.name: f for f in dataclasses.fields(lengthrange.LengthRangeOptions)}
        self.check_known(e, e.attrib, set(fields))
        values = {}
        for key, text in e.attrib.items():
            if key == "mode":
                if text not in ("none", "muscle", "muscleuser", "all"):
                    raise self.error(e, f"unknown lengthrange mode {text!r}")
                values[key] = text
            elif key in ("useexisting", "uselimit"):
                values[key] = self.flag(e, e.attrib, key, False)
            else:
                values[key] = float(self.get_floats(e, e.attrib, key, [0.0], 1)[0])
        return lengthrange.LengthRangeOptions(**values)

    def parse_option(self) -> None:
        self.timestep, self.gravity = 0.002, np.array([0.0, 0.0, -9.81])
        self.iterations, self.cone, self.impratio = 100, "pyramidal", 1.0
        self.ls_iterations, self.tolerance, self.ls_tolerance = 50, 1e-8, 0.01
        self.solver = "Newton"  # every solve here is Newton's; see load_mjcf for `iterations`
        self.noslip_iterations = 0
        self.integrator = "Euler"
        self.density, self.viscosity, self.wind = 0.0, 0.0, np.zeros(3)
        self.disabled: set[str] = set()  # features <flag> turns off (_FLAG_EFFECTS values)
        self.enabled: set[str] = set()  # switches <flag> turns on (_ENABLE_FLAGS)
        self.sleep = False  # <flag sleep="enable">, which this engine does not simulate
        self.o_margin, self.o_solref = 0.0, np.asarray(con.DEFAULT_SOLREF, np.float64)
        self.o_solimp = np.asarray(con.DEFAULT_SOLIMP, np.float64)
        self.o_friction = np.asarray(_DEFAULT_FRICTION, np.float64)
        for o in self.root.iter("option"):
            a = dict(o.attrib)
            self.check_known(o, a)
            for child in o:
                if child.tag != "flag":
                    raise self.error(child, f"unsupported element <{child.tag}> in <option>")
                self.parse_flags(child)
            self.timestep = float(a.get("timestep", self.timestep))
            self.gravity = self.get_floats(o, a, "gravity", self.gravity, 3)
            self.iterations = int(a.get("iterations", self.iterations))
            if self.iterations < 0:
                raise self.error(o, f"iterations={self.iterations} must be >= 0")
            self.ls_iterations = int(a.get("ls_iterations", self.ls_iterations))
            self.tolerance = float(a.get("tolerance", self.tolerance))
            self.ls_tolerance = float(a.get("ls_tolerance", self.ls_tolerance))
            if self.ls_iterations < 0 or self.tolerance < 0 or self.ls_tolerance < 0:
                raise self.error(o, "ls_iterations, tolerance and ls_tolerance must be >= 0")
            self.solver = a.get("solver", self.solver)
            if self.solver not in ("PGS", "CG", "Newton"):
                raise self.error(o, f"solver={self.solver!r} must be PGS, CG or Newton")
            self.cone = a.get("cone", self.cone)
            if self.cone not in ("pyramidal", "elliptic"):
                raise self.error(o, f"cone={self.cone!r} must be pyramidal or elliptic")
            self.impratio = float(a.get("impratio", self.impratio))
            if not self.impratio > 0:
                raise self.error(o, f"impratio={self.impratio!r} must be > 0")
            self.noslip_iterations = int(a.get("noslip_iterations", self.noslip_iterations))
            if self.noslip_iterations < 0:
                raise self.error(o, f"noslip_iterations={self.noslip_iterations} must be >= 0")
            self.density = float(a.get("density", self.density))
            self.viscosity = float(a.get("viscosity", self.viscosity))
            self.wind = self.get_floats(o, a, "wind", self.wind, 3)
            self.o_margin = float(a.get("o_margin", self.o_margin))
            self.o_solref = self.padded(o, a, "o_solref", tuple(self.o_solref))
            self.o_solimp = self.padded(o, a, "o_solimp", tuple(self.o_solimp))
            self.o_friction = self.padded(o, a, "o_friction", tuple(self.o_friction))
            if self.density < 0 or self.viscosity < 0:
                raise self.error(o, "density and viscosity must be non-negative")
            self.integrator = a.get("integrator", self.integrator)
            if self.integrator not in INTEGRATORS:
                raise self.error(
                    o, f"integrator={self.integrator!r} must be one of {', '.join(INTEGRATORS)}"
                )
            if float(a.get("sleep_tolerance", 0.0)) < 0:
                raise self.error(o, "sleep_tolerance must be >= 0")
        if self.sleep:
            warnings.warn(
                f"{self.source}: <flag sleep='enable'>: every tree stays awake here; MuJoCo "
                "freezes a tree whose velocities stay under sleep_tolerance until something "
                "wakes it, so such a tree moves on here by what motion it had left (measured: "
                "1.5e-5 in qpos for a box at rest, 1.2e-3 for a slowly swinging damped arm)",
                MJCFWarning,
                stacklevel=4,
            )

    @property
    def passive_off(self) -> bool:
        """Springs and dampers both disabled: MuJoCo's mj_passive then adds nothing at all,
        gravity compensation and fluid forces included (measured)."""
        return {"spring", "damper"} <= self.disabled

    def parse_flags(self, elem: ET.Element) -> None:
        """<option><flag>: the switches this engine honours (constraint, contact, limit,
        frictionloss, equality, gravity, eulerdamp, spring, damper, actuation, clampctrl and
        filterparent off; override on), the ones that change nothing here, and an error for any
        other."""
        for key, value in elem.attrib.items():
            if value not in ("enable", "disable"):
                raise self.error(elem, f"flag {key}={value!r} must be enable or disable")
            if key not in _FLAG_DEFAULTS:
                raise self.error(elem, f"unknown flag {key!r}")
            if key == "sleep":
                self.sleep = value == "enable"
                continue
            if value == _FLAG_DEFAULTS[key] or key in _FLAGS_WITHOUT_EFFECT:
                continue
            if key in _ENABLE_FLAGS and value == "enable":
                self.enabled.add(key)
            elif key in _FLAG_EFFECTS and value == "disable":
                self.disabled |= _FLAG_EFFECTS[key]
            else:
                raise self.error(elem, f"unsupported flag {key}={value!r}")

    def parse_defaults(self) -> None:
        self.classes["main"] = {}
        tops = [d for d in self.root if d.tag == "default"]
        for top in tops:  # several (or an included file's own) add to the same main class
            name = top.get("class", "main")
            self._parse_default(top, self.classes.get(name, {}), name)

    def _parse_default(self, elem: ET.Element, parent: dict, name: str) -> None:
        own = copy.deepcopy(parent)
        for child in elem:
            if child.tag == "default":
                continue
            tag = child.tag
            if tag in _DEFAULTS_OF_REFUSED:
                continue
            if tag not in _KNOWN and tag not in _IGNORED and tag != "tendon":
                raise self.error(child, f"unsupported element <{tag}> in <default>")
            if tag in _ACTUATOR_TAGS:
                self._actuator_default(child, own)
            else:
                _merge(own.setdefault(tag, {}), child.attrib)
        self.classes[name] = own
        for child in elem:
            if child.tag == "default":
                if "class" not in child.attrib:
                    raise self.error(child, "nested <default> needs a class")
                self._parse_default(child, own, child.attrib["class"])

    def _actuator_default(self, elem: ET.Element, own: dict) -> None:
        """An actuator element in a <default>, stored as MuJoCo resolves it (probed against
        MuJoCo 4.0): the attributes common to every kind (gear, ranges, ...) go into ONE
        actuator default in document order (own["actuator"]); kp and kv, or a <general>'s gain
        and bias parameters, are kept per kind and inherited by child classes
        (own["actuator_params"]); and own["actuator_force"] names the kind that last set a
        force model here (every <motor>, <position> or <velocity>; a <general> that gives gain
        or bias parameters), which is what a <general> actuator of the class inherits."""
        self.check_known(elem, elem.attrib)
        if "lengthrange" in elem.attrib:
            raise self.error(elem, "lengthrange goes on the actuator, not in a <default>")
        common = {k: v for k, v in elem.attrib.items() if k not in _GAIN_BIAS}
        specific = {k: v for k, v in elem.attrib.items() if k in _GAIN_BIAS}
        _merge(own.setdefault("actuator", {}), common)
        _merge(own.setdefault("actuator_params", {}).setdefault(elem.tag, {}), specific)
        if elem.tag != "general" or specific:
            own["actuator_force"] = elem.tag

    def inherited_force_model(self, elem: ET.Element, defaults: dict) -> dict[str, str]:
        """The force-model attributes actuator `elem` takes from its class (see
        `_actuator_default`): a <motor>, <position>, <velocity>, <intvelocity> or <cylinder>
        takes its own kind's defaults; a <general> takes the force model of the kind named
        there (a <position>'s or <velocity>'s as gain and affine bias, an <intvelocity>'s or
        <cylinder>'s with their activation dynamics too, a <general>'s parameters, a <motor>'s
        nothing)."""
        per_kind = defaults.get("actuator_params", {})
        kind = defaults.get("actuator_force", "motor")
        if elem.tag != "general":
            if kind == "general" and elem.tag != "motor":
                raise self.error(
                    elem,
                    f"a <{elem.tag}> whose class default is a <general> with gain or bias "
                    f"parameters (MuJoCo derives kp and kv from them): give kp/kv on the "
                    f"<{elem.tag}> or in a <{elem.tag}> default",
                )
            return dict(per_kind.get(elem.tag, {}))
        if kind != "general":
            params = per_kind.get(kind, {})
            return _general_form(kind, params, params)
        return dict(per_kind.get("general", {}))

    # ---------------------------------------------------------------- geometry helpers
    def angle(self, v: np.ndarray) -> np.ndarray:
        return v * (math.pi / 180.0) if self.degree else v

    def orientation(self, elem: ET.Element, a: dict[str, str]) -> np.ndarray:
        """Quaternion from whichever orientation attribute is present (identity if none)."""
        given = [k for k in _ORIENT if k in a]
        if len(given) > 1:
            raise self.error(elem, f"more than one orientation given: {given}")
        if not given:
            return np.array([1.0, 0.0, 0.0, 0.0])
        key = given[0]
        v = _floats(a[key])
        need = {"quat": 4, "euler": 3, "axisangle": 4, "xyaxes": 6, "zaxis": 3}[key]
        if len(v) != need:
            raise self.error(elem, f"attribute {key!r} needs {need} numbers, got {a[key]!r}")
        if key == "xyaxes":
            length = np.linalg.norm(np.cross(v[:3], v[3:]))
        else:  # the quaternion, rotation axis or z axis (euler has none)
            length = 1.0 if key == "euler" else np.linalg.norm(v[:4] if key == "quat" else v[:3])
        if length < 1e-10:
            raise self.error(elem, f"{key}={a[key]!r} is degenerate (zero length or parallel)")
        if key == "quat":
            return v / np.linalg.norm(v)
        if key == "axisangle":
            return _axis_angle_quat(v[:3], float(self.angle(v[3])))
        if key == "zaxis":
            return _z_to_vec_quat(v)
        if key == "xyaxes":
            x = v[:3] / np.linalg.norm(v[:3])
            y = v[3:] - x * np.dot(x, v[3:])
            y /= np.linalg.norm(y)
            return _mat_quat(np.stack([x, y, np.cross(x, y)], axis=1))
        q = np.array([1.0, 0.0, 0.0, 0.0])
        for ch, ang in zip(self.eulerseq, self.angle(v), strict=True):
            r = _axis_angle_quat(np.eye(3)["xyz".index(ch.lower())], float(ang))
            q = _quat_mul(q, r) if ch.islower() else _quat_mul(r, q)
        return q

    # ---------------------------------------------------------------- tree
    def walk(self, elem: ET.Element, parent: int, cls: str, frame: _Frame = None) -> None:
        """Adds body ``elem`` (child of body ``parent``, placed in ``frame`` of it if the body
        sits in <frame> elements) and its subtree, depth first."""
        is_world = parent < 0
        if is_world:
            a: dict[str, str] = {}
            pos, quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        else:
            a = self.attrs(elem, cls)
            pos = self.get_floats(elem, a, "pos", np.zeros(3), 3)
            quat = self.orientation(elem, a)
            pos, quat = _in_frame(frame, pos, quat)
            cls = a.get("childclass", cls)
            if cls not in self.classes:
                raise self.error(elem, f"unknown childclass {cls!r}")
            self.check_sleep_policy(elem, a.get("sleep", "auto"))
        bid = len(self.bodies)
        body = {
            "elem": elem,
            "parent": parent,
            "pos": pos,
            "quat": quat,
            "inertial": None,
            "gravcomp": float(a.get("gravcomp", 0)),
            "name": a.get("name", "world" if is_world else ""),
        }
        self.bodies.append(body)
        children = list(self.frame_children(elem, cls, None))
        if a.get("mocap", "false") not in ("true", "false"):
            raise self.error(elem, f"mocap={a['mocap']!r} must be true or false")
        if a.get("mocap") == "true":
            # a pose given from outside: sys.body_pos/body_quat (System.mocap_bodies)
            if parent != 0:
                raise self.error(elem, "a mocap body must be a child of the world body")
            if any(child.tag in ("joint", "freejoint") for child, _, _ in children):
                raise self.error(elem, "a mocap body cannot have joints")
            self.mocap.append(bid)
        for child, child_cls, child_frame in children:
            tag = child.tag
            if tag == "body":
                continue
            if tag in ("joint", "freejoint"):
                if is_world:
                    raise self.error(child, "joints cannot be attached to the world body")
                self.add_joint(child, bid, child_cls, child_frame)
            elif tag == "geom":
                self.add_geom(child, bid, child_cls, child_frame)
            elif tag == "site":
                self.add_site(child, bid, child_cls, child_frame)
            elif tag == "inertial":
                if is_world:
                    raise self.error(child, "the world body cannot have <inertial>")
                self.add_inertial(child, body)
            elif tag not in _IGNORED:
                raise self.error(child, f"unsupported element <{tag}> in <{elem.tag}>")
        for child, child_cls, child_frame in children:
            if child.tag == "body":
                self.walk(child, bid, child_cls, child_frame)

    def check_sleep_policy(self, elem: ET.Element, policy: str) -> None:
        """A body's sleep policy: every one simulates as "never" here, except "init" with sleep
        enabled (MuJoCo holds that tree still, wherever it is, until something wakes it)."""
        if policy not in _SLEEP_POLICIES:
            raise self.error(elem, f"sleep={policy!r} must be one of {', '.join(_SLEEP_POLICIES)}")
        if policy == "init" and self.sleep:
            raise self.error(
                elem,
                "sleep='init' (a tree that starts asleep) is not supported: no tree sleeps here",
            )

    def expand_replicates(self, elem: ET.Element) -> None:
        """Replaces each <replicate count offset euler sep> below `elem` by `count` <frame>s
        holding copies of its children, as MuJoCo's compiler does (measured): copy i is turned
        by i times the euler angles and moved by the sum of the offsets turned by 0, 1, ...,
        i - 1 times them, and every name in it gets sep and i (zero-padded to the digits of
        count) appended; an inner replicate's suffix comes first."""
        children = []
        for child in list(elem):
            self.expand_replicates(child)
            if child.tag != "replicate":
                children.append(child)
                continue
            a = dict(child.attrib)
            self.check_known(child, a)
            try:
                count = int(a.get("count", "1"))
            except ValueError:
                raise self.error(child, f"count={a['count']!r} must be an integer") from None
            if count < 0:
                raise self.error(child, f"count={count} must be >= 0")
            offset = self.get_floats(child, a, "offset", np.zeros(3), 3)
            euler = self.get_floats(child, a, "euler", np.zeros(3), 3)
            pos = np.zeros(3)
            for i in range(count):
                quat = self.orientation(child, {"euler": " ".join(map(repr, (i * euler).tolist()))})
                frame = ET.Element("frame", pos=" ".join(map(repr, pos.tolist())))
                frame.set("quat", " ".join(map(repr, quat.tolist())))
                suffix = f"{a.get('sep', '')}{i:0{len(str(count))}d}"
                for item in child:
                    copy_ = copy.deepcopy(item)
                    for named in copy_.iter():
                        if "name" in named.attrib:
                            named.set("name", named.get("name") + suffix)
                    frame.append(copy_)
                children.append(frame)
                pos = pos + _quat_mat(quat) @ offset
        elem[:] = children

    def frame_children(
        self, elem: ET.Element, cls: str, frame: _Frame
    ) -> Iterator[tuple[ET.Element, str, _Frame]]:
        """The children of a body with <frame> elements dissolved: each child with its class
        and the pose of the frames around it (MuJoCo's frames only place their children)."""
        for child in elem:
            if child.tag != "frame":
                yield child, cls, frame
                continue
            a = self.attrs(child, cls)
            pose = _in_frame(
                frame, self.get_floats(child, a, "pos", np.zeros(3), 3), self.orientation(child, a)
            )
            child_cls = a.get("childclass", cls)
            if child_cls not in self.classes:
                raise self.error(child, f"unknown childclass {child_cls!r}")
            for inner, inner_cls, inner_frame in self.frame_children(child, child_cls, pose):
                if inner.tag not in ("body", "geom", "joint", "site", *_IGNORED):
                    raise self.error(inner, f"unsupported element <{inner.tag}> in <frame>")
                yield inner, inner_cls, inner_frame

    def add_inertial(self, elem: ET.Element, body: dict) -> None:
        a = self.attrs(elem, "main")
        if "mass" not in a:
            raise self.error(elem, "<inertial> needs mass")
        mass = float(a["mass"])
        rot = _quat_mat(self.orientation(elem, a))
        if "fullinertia" in a:
            xx, yy, zz, xy, xz, yz = self.get_floats(elem, a, "fullinertia", None, 6)
            inertia = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
            axes = _principal_axes(inertia)
        elif "diaginertia" in a:
            inertia = np.diag(self.get_floats(elem, a, "diaginertia", None, 3))
            axes = np.eye(3)
        else:
            raise self.error(elem, "<inertial> needs diaginertia or fullinertia")
        body["inertial"] = (
            mass,
            self.get_floats(elem, a, "pos", np.zeros(3), 3),
            rot @ inertia @ rot.T,
            rot @ axes,
        )

    def add_joint(self, elem: ET.Element, bid: int, cls: str, frame: _Frame = None) -> None:
        a = self.attrs(elem, cls)
        jtype = "free" if elem.tag == "freejoint" else a.get("type", "hinge")
        if jtype not in _JOINT_TYPES:
            raise self.error(elem, f"unknown joint type {jtype!r}")
        t = _JOINT_TYPES[jtype]
        frictionloss = float(a.get("frictionloss", 0))
        if frictionloss < 0:
            raise self.error(elem, f"frictionloss must be >= 0, got {frictionloss}")
        springdamper = self.get_floats(elem, a, "springdamper", [0.0, 0.0], 2)
        if springdamper.any() and not (springdamper > 0).all():
            raise self.error(elem, f"springdamper values must both be positive, got {springdamper}")
        if t in (S.JNT_FREE, S.JNT_BALL) and springdamper.any():
            raise self.error(elem, f"unsupported springdamper on a {jtype} joint")
        if t == S.JNT_FREE and self.bodies[bid]["parent"] != 0:
            raise self.error(elem, "a free joint must belong to a child of the world body")
        angular = t in (S.JNT_HINGE, S.JNT_BALL)
        conv = self.angle if angular else (lambda v: v)
        rng = self.get_floats(elem, a, "range", [0.0, 0.0], 2)
        limited = t != S.JNT_FREE and self.flag(elem, a, "limited", "range" in a)
        if limited and not rng[0] < rng[1] and t != S.JNT_BALL:
            raise self.error(elem, f"limited joint needs range lo < hi, got {rng}")
        axis = self.get_floats(elem, a, "axis", [0.0, 0.0, 1.0], 3)
        if np.linalg.norm(axis) < 1e-10:
            raise self.error(elem, "joint axis is zero")
        # inside <frame>s: the anchor and the axis in the body's frame
        pos = self.get_floats(elem, a, "pos", np.zeros(3), 3)
        pos, rot = _in_frame(frame, pos, np.array([1.0, 0.0, 0.0, 0.0]))
        axis = _quat_mat(rot) @ axis
        self.joints.append(
            {
                "elem": elem,
                "body": bid,
                "type": t,
                "name": a.get("name", ""),
                "pos": pos,
                "axis": axis / np.linalg.norm(axis),
                "range": conv(rng),
                "limited": bool(limited),
                "margin": float(a.get("margin", 0)),
                "solref": self.padded(elem, a, "solreflimit", con.DEFAULT_SOLREF),
                "solimp": self.padded(elem, a, "solimplimit", con.DEFAULT_SOLIMP),
                "frictionloss": frictionloss,
                "solref_friction": self.padded(elem, a, "solreffriction", con.DEFAULT_SOLREF),
                "solimp_friction": self.padded(elem, a, "solimpfriction", con.DEFAULT_SOLIMP),
                "stiffness": float(a.get("stiffness", 0)),
                "armature": float(a.get("armature", 0)),
                "damping": float(a.get("damping", 0)),
                "ref": float(conv(float(a.get("ref", 0)))),
                "springref": float(conv(float(a.get("springref", 0)))),
                "springdamper": springdamper,
                "actuatorfrcrange": self.actuator_force_range(elem, a),
                "actuatorgravcomp": a.get("actuatorgravcomp", "false") == "true",
                "align": self.free_joint_align(elem, a),
            }
        )

    def free_joint_align(self, elem: ET.Element, a: dict[str, str]) -> bool | None:
        """A <freejoint>'s align: True or False, None (auto) for the compiler's alignfree."""
        align = a.get("align", "auto")
        if align not in ("auto", "true", "false"):
            raise self.error(elem, f"align={align!r} must be auto, true or false")
        return None if align == "auto" else align == "true"

    def actuator_force_range(self, elem: ET.Element, a: dict[str, str]) -> np.ndarray:
        """A joint's actuatorfrcrange where actuatorfrclimited (auto: given), else (-inf, inf):
        MuJoCo clamps the joint's total actuator force to it."""
        rng = self.get_floats(elem, a, "actuatorfrcrange", [0.0, 0.0], 2)
        if not self.flag(elem, a, "actuatorfrclimited", "actuatorfrcrange" in a):
            return np.array([-np.inf, np.inf])
        if not rng[0] <= rng[1]:
            raise self.error(elem, f"actuatorfrcrange needs lo <= hi, got {rng}")
        return rng

    def add_geom(self, elem: ET.Element, bid: int, cls: str, frame: _Frame = None) -> None:
        a = self.attrs(elem, cls)
        gname = a.get("type", "sphere")
        if gname not in _GEOM_TYPES:
            raise self.error(elem, f"unsupported geom type {gname!r}")
        t = _GEOM_TYPES[gname]
        size = self.get_floats(elem, a, "size", [])
        pos = self.get_floats(elem, a, "pos", np.zeros(3), 3)
        quat = self.orientation(elem, a)
        if t == S.GEOM_MESH and "mesh" not in a:
            raise self.error(elem, "a mesh geom needs a mesh")
        if t == S.GEOM_HFIELD:
            if "hfield" not in a:
                raise self.error(elem, "an hfield geom needs an hfield")
            if "fromto" in a:
                raise self.error(elem, "fromto is not allowed on an hfield geom")
            size = np.zeros(3)  # its extent is the asset's (and it adds no mass)
            self.hfield_asset(elem, a["hfield"])
        if "mesh" in a:  # MuJoCo's frame of a mesh geom: the mesh's principal frame
            if "fromto" in a:
                raise self.error(elem, f"fromto is not allowed on a {gname} geom with a mesh")
            if t == S.GEOM_PLANE:
                raise self.error(elem, "a plane cannot be fitted to a mesh")
            m = self.mesh_asset(elem, a["mesh"])
            offset, size = m.com, m.size
            if t != S.GEOM_MESH:  # a primitive fitted to the mesh, as MuJoCo's compiler does
                centre, size = self.fitted_size(m, t, float(a.get("fitscale", 1.0)))
                offset = offset + m.rot @ centre
            pos, quat = pos + _quat_mat(quat) @ offset, _quat_mul(quat, _mat_quat(m.rot))
        need = {
            S.GEOM_PLANE: 0,
            S.GEOM_HFIELD: 0,
            S.GEOM_SPHERE: 1,
            S.GEOM_CAPSULE: 2,
            S.GEOM_ELLIPSOID: 3,
            S.GEOM_CYLINDER: 2,
            S.GEOM_BOX: 3,
            S.GEOM_MESH: 3,
        }[t]
        if "fromto" in a:
            if t not in (S.GEOM_CAPSULE, S.GEOM_CYLINDER, S.GEOM_BOX, S.GEOM_ELLIPSOID):
                raise self.error(elem, f"fromto is not allowed on a {gname} geom")
            ft = self.get_floats(elem, a, "fromto", None, 6)
            if np.linalg.norm(ft[3:] - ft[:3]) < 1e-10:
                raise self.error(elem, "fromto has zero length")
            # MuJoCo points the geom z axis from "to" towards "from"
            pos, quat = (ft[:3] + ft[3:]) / 2, _z_to_vec_quat(ft[:3] - ft[3:])
            half = np.linalg.norm(ft[3:] - ft[:3]) / 2
            if len(size) < 1:
                raise self.error(elem, f"{gname} geom with fromto needs size with 1 number")
            # the radius; a box's or ellipsoid's half-width in both x and y, as MuJoCo builds it
            width = np.repeat(size[:1], 2 if t in (S.GEOM_BOX, S.GEOM_ELLIPSOID) else 1)
            size = np.concatenate([width, [half]])
        elif len(size) < need:
            raise self.error(elem, f"{gname} geom needs size with {need} number(s)")
        if t not in (S.GEOM_PLANE, S.GEOM_HFIELD) and np.any(size[:need] <= 0):
            raise self.error(elem, f"geom size must be positive, got {size[:need]}")
        if t == S.GEOM_PLANE and bid != 0:
            raise self.error(elem, "plane geoms must belong to the world body")
        size = np.concatenate([size, np.zeros(3)])[:3]
        pos, quat = _in_frame(frame, pos, quat)
        friction = self.padded(elem, a, "friction", (1.0, 0.005, 0.0001))
        self.geoms.append(
            {
                "elem": elem,
                "body": bid,
                "type": t,
                "name": a.get("name", ""),
                "mesh": a.get("mesh") if t == S.GEOM_MESH else None,
                "hfield": a.get("hfield") if t == S.GEOM_HFIELD else None,
                "size": size,
                "pos": pos,
                "quat": quat,
                "friction": friction,
                "contype": int(a.get("contype", 1)),
                "conaffinity": int(a.get("conaffinity", 1)),
                "condim": int(a.get("condim", 3)),
                "priority": int(a.get("priority", 0)),
                "group": int(a.get("group", 0)),
                "density": float(a.get("density", 1000.0)),
                "mass": float(a["mass"]) if "mass" in a else None,
                "shell": self.shell_inertia(elem, a, t),
                "margin": float(a.get("margin", 0)),
                "solmix": float(a.get("solmix", 1.0)),
                "solref": self.padded(elem, a, "solref", con.DEFAULT_SOLREF),
                "solimp": self.padded(elem, a, "solimp", con.DEFAULT_SOLIMP),
                "fluid": self.geom_fluid(elem, a, t, size, bid),
            }
        )

    def shell_inertia(self, elem: ET.Element, a: dict[str, str], t: int) -> bool:
        """A geom's shellinertia: its mass on its surface (density per area) instead of in its
        volume. A mesh says so on its asset (inertia="shell"), as MuJoCo 4 requires."""
        shell = a.get("shellinertia", "false")
        if shell not in ("true", "false"):
            raise self.error(elem, f"shellinertia={shell!r} must be true or false")
        if shell == "true" and t == S.GEOM_MESH:
            raise self.error(
                elem, 'shellinertia on a mesh geom: give its <mesh> inertia="shell" instead'
            )
        return shell == "true"

    def geom_fluid(
        self, elem: ET.Element, a: dict[str, str], t: int, size: np.ndarray, body: int
    ) -> np.ndarray:
        """A geom's row of MuJoCo's geom_fluid [12]: zeros, or with fluidshape="ellipsoid" its
        ellipsoid model's coefficients (physics.fluid). The world's geoms never move through
        the medium, so their row stays 0 whatever their shape."""
        shape = a.get("fluidshape", "none")
        if shape not in ("none", "ellipsoid"):
            raise self.error(elem, f"fluidshape={shape!r} must be none or ellipsoid")
        coef = self.padded(elem, a, "fluidcoef", fluid.FLUIDCOEF)
        if shape == "none" or body == 0:
            return np.zeros(12)
        if t == S.GEOM_HFIELD:
            raise self.error(elem, "fluidshape='ellipsoid' on a height field is not supported")
        return fluid.ellipsoid_coefficients(fluid.semiaxes(t, size), coef)

    def fitted_size(self, m: mesh.Mesh, t: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
        """(centre in the mesh's principal frame, size) of a primitive of type ``t`` fitted to
        mesh ``m``: to its equivalent-inertia box, or with compiler fitaabb to its bounding
        box (MuJoCo's rules, times ``fitscale``)."""
        if self.fitaabb:
            low, high = m.vertices.min(axis=0), m.vertices.max(axis=0)
            centre, half = (high + low) / 2, (high - low) / 2
            radius = max(half[0], half[1])
            sphere, capsule = half.max(), [radius, half[2] - radius]
        else:
            e = m.inertia
            moments = np.array([e[1] + e[2] - e[0], e[0] + e[2] - e[1], e[0] + e[1] - e[2]])
            centre, half = np.zeros(3), 0.5 * np.sqrt(6 * np.maximum(moments, 0) / m.measure)
            radius = (half[0] + half[1]) / 2
            sphere, capsule = half.mean(), [radius, max(0.0, half[2] - radius / 2)]
        size = {
            S.GEOM_SPHERE: [sphere, 0, 0],
            S.GEOM_CAPSULE: [*capsule, 0],
            S.GEOM_CYLINDER: [radius, half[2], 0],
        }.get(t, half)
        return centre, scale * np.asarray(size, np.float64)

    def add_site(self, elem: ET.Element, bid: int, cls: str, frame: _Frame = None) -> None:
        """A site: a frame fixed to body `bid` (its type and size only draw it)."""
        a = self.attrs(elem, cls)
        pos, quat = self.get_floats(elem, a, "pos", np.zeros(3), 3), self.orientation(elem, a)
        if "fromto" in a:  # as a geom's: centred, z axis from "to" towards "from"
            if a.get("type", "sphere") not in ("capsule", "cylinder", "box", "ellipsoid"):
                raise self.error(elem, "fromto needs a capsule, cylinder, box or ellipsoid site")
            ft = self.get_floats(elem, a, "fromto", None, 6)
            if np.linalg.norm(ft[3:] - ft[:3]) < 1e-10:
                raise self.error(elem, "fromto has zero length")
            pos, quat = (ft[:3] + ft[3:]) / 2, _z_to_vec_quat(ft[:3] - ft[3:])
        pos, quat = _in_frame(frame, pos, quat)
        self.sites.append({"body": bid, "name": a.get("name", ""), "pos": pos, "quat": quat})

    # ---------------------------------------------------------------- mesh assets
    def parse_assets(self, tag: str) -> dict[str, ET.Element]:
        """Every <asset><mesh> or <asset><hfield> (``tag``) by name (a file's name without
        directory and extension when it has none); each is read and processed when a geom
        first uses it."""
        found: dict[str, ET.Element] = {}
        for asset in (c for c in self.root if c.tag == "asset"):
            for elem in asset.iter(tag):
                a = self.attrs(elem, "main")
                if tag == "mesh" and "file" not in a and "vertex" not in a:
                    raise self.error(elem, "a mesh needs a file or vertex data")
                name = a.get("name") or os.path.splitext(os.path.basename(a.get("file", "")))[0]
                if not name:
                    raise self.error(elem, f"a {tag} without a file needs a name")
                if name in found:
                    raise self.error(elem, f"repeated {tag} name {name!r}")
                found[name] = elem
        return found

    def hfield_asset(self, geom: ET.Element, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(heights [nrow, ncol] in the geom's frame, size [4]) of the height field ``name``,
        compiled as MuJoCo does: elevations scaled to [0, 1] in float32 (their minimum to 0,
        maximum to 1), times size[2]; row 0 at -y (an image's or the ``elevation`` list's
        LAST row)."""
        if name in self.hfields:
            return self.hfields[name]
        if name not in self.hfield_elems:
            raise self.error(geom, f"unknown hfield {name!r}")
        elem = self.hfield_elems[name]
        a = self.attrs(elem, "main")
        size = self.get_floats(elem, a, "size", None, 4)
        if np.any(size <= 0):
            raise self.error(elem, f"hfield size must be 4 positive numbers, got {list(size)}")
        nrow, ncol = int(a.get("nrow", 0)), int(a.get("ncol", 0))
        if "file" in a:
            if "elevation" in a:  # (nrow and ncol are ignored then, as MuJoCo does)
                raise self.error(elem, "an hfield takes a file or an elevation, not both")
            path = os.path.basename(a["file"]) if self.strippath else a["file"]
            try:
                data = hfield.read(
                    os.path.join(self.base, self.meshdir, path), a.get("content_type")
                )
            except hfield.HFieldError as e:
                raise self.error(elem, str(e)) from None
        else:
            if nrow < 2 or ncol < 2:
                raise self.error(
                    elem, f"hfield needs nrow and ncol of at least 2, got {nrow} {ncol}"
                )
            data = np.zeros((nrow, ncol))
            if "elevation" in a:
                values = self.get_floats(elem, a, "elevation", None)
                if values.size != nrow * ncol:
                    raise self.error(
                        elem, f"elevation has {values.size} values, nrow x ncol is {nrow * ncol}"
                    )
                data = values.reshape(nrow, ncol)[::-1]
        if min(data.shape) < 2:
            raise self.error(elem, f"hfield grid {data.shape} needs at least 2 rows and columns")
        if not np.all(np.isfinite(data)):
            raise self.error(elem, "hfield elevations must be finite")
        # in float32, as MuJoCo keeps hfield data: float64 physics then meets MuJoCo's terrain
        data = data.astype(np.float32)
        span = data.max() - data.min()
        data = (data - data.min()) / span if span > 0 else np.zeros_like(data)
        self.hfields[name] = (data.astype(np.float64) * size[2], size)
        return self.hfields[name]

    def mesh_asset(self, geom: ET.Element, name: str) -> mesh.Mesh:
        """The processed mesh called ``name`` (what MuJoCo compiles from <asset><mesh>)."""
        if name in self.meshes:
            return self.meshes[name]
        if name not in self.mesh_elems:
            raise self.error(geom, f"unknown mesh {name!r}")
        elem = self.mesh_elems[name]
        a = self.attrs(elem, "main")
        maxhullvert = int(a.get("maxhullvert", -1))
        if maxhullvert != -1 and maxhullvert < 4:
            raise self.error(elem, f"maxhullvert={maxhullvert} must be -1 or at least 4")
        try:
            if "file" in a:
                path = a["file"]
                path = os.path.basename(path) if self.strippath else path
                path = os.path.join(self.base, self.meshdir, path)
                vertices, faces = mesh.read(path, a.get("content_type"))
            else:
                vertices, faces = self.get_floats(elem, a, "vertex", None).reshape(-1, 3), None
            if "face" in a:
                faces = _floats(a["face"]).astype(np.int64).reshape(-1, 3)
            # MuJoCo's order: refpos, then refquat (its inverse rotation), then scale
            vertices = vertices - self.get_floats(elem, a, "refpos", np.zeros(3), 3)
            vertices = vertices @ _quat_mat(self.get_floats(elem, a, "refquat", [1, 0, 0, 0], 4))
            scale = self.get_floats(elem, a, "scale", np.ones(3), 3)
            if faces is not None and np.prod(scale) < 0:  # a mirror: faces keep facing out
                faces = faces[:, ::-1]
            self.meshes[name] = mesh.process(vertices * scale, faces, a.get("inertia", "legacy"))
        except mesh.MeshError as e:
            raise self.error(elem, str(e)) from None
        return self.meshes[name]

    # ---------------------------------------------------------------- actuators, contact, tendon
    def parse_actuators(self) -> None:
        """Actuators on a joint, a tendon or a site with MuJoCo's force model:
        force = gain * input + bias[0] + bias[1] * length + bias[2] * velocity, gain fixed or
        affine (g0 + g1 length + g2 velocity), input ctrl or, with activation dynamics, the
        state act; length and velocity are gear times the joint's (or tendon's) position and
        velocity. Every shortcut (<motor>, <position>, <velocity>, <intvelocity>, <damper>,
        <cylinder>) is read in the <general> form it stands for (`_general_form`), as MuJoCo
        compiles it; a position servo's kv may come from a damping ratio
        (`with_damping_ratios`)."""
        names = [j["name"] for j in self.joints]
        for sec in self.root.iter("actuator"):
            for m in sec:
                if m.tag not in _ACTUATOR_TAGS:
                    raise self.error(
                        m, f"unsupported actuator <{m.tag}> (one of {', '.join(_ACTUATOR_TAGS)})"
                    )
                a = self.attrs(m, "main")
                if sum(k in a for k in _TRANSMISSIONS) != 1:
                    raise self.error(
                        m,
                        f"actuator needs one of {', '.join(_TRANSMISSIONS)} (other "
                        "transmissions unsupported)",
                    )
                gear = self.get_floats(m, a, "gear", [1.0])
                site = ball_free = slider_crank = body = None
                if "body" in a:  # adhesion: moment arms from the body's contacts, no gear
                    bodies = [b["name"] for b in self.bodies]
                    if a["body"] not in bodies:
                        raise self.error(m, f"unknown body {a['body']!r}")
                    body = bodies.index(a["body"])
                    target = {"path": S.NO_TENDON, "limited": False}
                    gear = np.ones(1)
                elif "cranksite" in a:
                    slider_crank = self.slider_crank(m, a)
                    target = {"path": S.NO_TENDON, "limited": False}
                elif "site" in a:
                    sites = [x["name"] for x in self.sites]
                    if a["site"] not in sites:
                        raise self.error(m, f"unknown site {a['site']!r}")
                    # a wrench in the site's frame: force gear[:3], torque gear[3:] (MuJoCo's
                    # gear is 6 numbers, (1, 0, 0, 0, 0, 0) by default)
                    wrench = np.concatenate([gear, np.zeros(6)])[:6]
                    ref = -1  # a refsite: length and moment relative to its frame
                    if "refsite" in a:
                        if a["refsite"] not in sites:
                            raise self.error(m, f"unknown refsite {a['refsite']!r}")
                        ref = sites.index(a["refsite"])
                    site = (sites.index(a["site"]), tuple(float(x) for x in wrench), ref)
                    target = {"path": S.NO_TENDON, "limited": False}
                    gear = np.ones(1)
                elif "tendon" in a:
                    if a["tendon"] not in self.tendons:
                        raise self.error(m, f"unknown tendon {a['tendon']!r}")
                    target = self.tendons[a["tendon"]]
                else:
                    # jointinparent differs from joint only on ball and free joints
                    joint = a.get("joint", a.get("jointinparent"))
                    if joint not in names:
                        raise self.error(m, f"unknown joint {joint!r}")
                    index = names.index(joint)
                    target = {**self.joints[index], "path": (((index, 1.0),), ())}
                    if target["type"] in (S.JNT_BALL, S.JNT_FREE):
                        # the gear is a rotation axis (and a free joint's force): its
                        # moment arms and length depend on q (dynamics.ball_free_moments)
                        gear6 = tuple(float(x) for x in np.concatenate([gear, np.zeros(6)])[:6])
                        ball_free = (index, gear6, "jointinparent" in a)
                        target = {"path": S.NO_TENDON, "limited": False}
                        gear = np.ones(1)
                if np.any(gear[1:] != 0):
                    raise self.error(
                        m,
                        "only the first gear component applies to a joint, tendon or slider-crank",
                    )
                if m.tag != "general":
                    self.check_shortcut(m, a)
                    a = {**a, **_general_form(m.tag, a, m.attrib)}
                gain, bias = self.actuator_gain_bias(m, a)
                gain = np.concatenate([np.atleast_1d(gain), np.zeros(3)])[:3]
                if body is not None and (
                    gain[1:].any() or np.any(bias) or a.get("gaintype") == "muscle"
                ):
                    raise self.error(m, "a body transmission takes a fixed gain and no bias")
                dampratio = 0.0
                position_like = bias[1] == -gain[0] and not gain[1:].any()
                if bias[2] > 0 and position_like:  # MuJoCo's encoding of a damping ratio
                    dampratio, bias = float(bias[2]), bias * np.array([1.0, 1.0, 0.0])
                dyntype, dynprm, actrange = self.activation(m, a)
                ctrl = self.get_floats(m, a, "ctrlrange", [0.0, 0.0], 2)
                force = self.get_floats(m, a, "forcerange", [0.0, 0.0], 2)
                inherit = float(a.get("inheritrange", 0))
                if inherit < 0:
                    raise self.error(m, f"inheritrange must be >= 0, got {inherit}")
                if inherit > 0:
                    # The control range spans the joint's or tendon's range, scaled about its
                    # middle.
                    if not target["limited"]:
                        raise self.error(m, "inheritrange needs a limited joint or tendon")
                    lo, hi = target["range"]
                    mid, half = (lo + hi) / 2, inherit * (hi - lo) / 2
                    ctrl = np.array([mid - half, mid + half])
                inf = np.array([-np.inf, np.inf])
                ctrllimited = self.flag(m, a, "ctrllimited", "ctrlrange" in a or inherit > 0)
                forcelimited = self.flag(m, a, "forcelimited", "forcerange" in a)
                for lim, rng, key in (
                    (ctrllimited, ctrl, "ctrlrange"),
                    (forcelimited, force, "forcerange"),
                ):
                    if lim and not rng[0] < rng[1]:
                        raise self.error(m, f"limited {key} needs lo < hi, got {rng}")
                self.actuators.append(
                    {
                        "name": a.get("name", ""),
                        "transmission": target["path"],
                        "site": site,
                        "ball_free": ball_free,
                        "slider_crank": slider_crank,
                        "body": body,
                        "tendon": a.get("tendon"),
                        "gear": float(gear[0]),
                        "gain": gain,
                        "bias": bias,
                        "ctrlrange": ctrl if ctrllimited else inf,
                        "forcerange": force if forcelimited else inf,
                        "dyntype": dyntype,
                        "dynprm": dynprm,
                        "muscle_gainprm": self.muscle_parameters(m, a, "gainprm"),
                        "muscle_biasprm": self.muscle_parameters(m, a, "biasprm"),
                        "lengthrange": self.get_floats(m, a, "lengthrange", [0.0, 0.0], 2),
                        # (a joint's or tendon's range, where limited: compiler uselimit)
                        "limit": target["range"] if target["limited"] else None,
                        "elem": m,
                        "actrange": actrange,
                        "dampratio": dampratio,
                        "actearly": a.get("actearly", "false") == "true",
                    }
                )

    def activation(self, m: ET.Element, a: dict[str, str]) -> tuple[int, np.ndarray, np.ndarray]:
        """(dyntype, dynprm [3], actrange) of an actuator: integrator (act' = ctrl), filter and
        filterexact (act' = (ctrl - act) / dynprm[0]), muscle (physics.muscle; dynprm: the
        activation and deactivation time constants and the smoothing width); user is
        refused."""
        name = a.get("dyntype", "none")
        if name not in _DYNTYPES:
            raise self.error(m, f"unsupported dyntype={name!r} (supported: {', '.join(_DYNTYPES)})")
        prm = np.concatenate([self.get_floats(m, a, "dynprm", [1.0]), np.zeros(3)])
        if name != "muscle" and np.any(prm[1:] != 0):
            raise self.error(m, "integrator and filter dynamics use dynprm[0] only")
        if name == "muscle" and prm[2] < 0:
            raise self.error(m, f"a muscle's tausmooth must be >= 0, got {prm[2]}")
        actrange = self.get_floats(m, a, "actrange", [0.0, 0.0], 2)
        limited = self.flag(m, a, "actlimited", "actrange" in a)
        if limited and not actrange[0] < actrange[1]:
            raise self.error(m, f"limited actrange needs lo < hi, got {actrange}")
        if not limited:
            actrange = np.array([-np.inf, np.inf])
        return _DYNTYPES[name], prm[:3], actrange

    def check_shortcut(self, m: ET.Element, a: dict[str, str]) -> None:
        """What MuJoCo refuses in an actuator shortcut's own parameters."""
        if "kv" in m.attrib and "dampratio" in m.attrib:
            raise self.error(m, "kv and dampratio cannot both be given")
        if m.tag in ("position", "intvelocity"):
            kp, kv, ratio = (
                float(a.get(k, d)) for k, d in (("kp", 1), ("kv", 0), ("dampratio", 0))
            )
            if kp < 0 or kv < 0 or ratio < 0:
                raise self.error(
                    m, f"kp and kv (or dampratio) must be >= 0, got {kp}, {kv}, {ratio}"
                )
        if m.tag in ("velocity", "damper") and float(a.get("kv", 1.0)) < 0:
            raise self.error(m, f"kv must be >= 0, got {a['kv']}")
        if m.tag == "adhesion" and (
            "ctrlrange" not in a or any(self.get_floats(m, a, "ctrlrange", [0.0, 0.0], 2) < 0)
        ):
            raise self.error(m, "an adhesion actuator needs a ctrlrange of non-negative values")
        if m.tag == "intvelocity" and "actrange" not in a:
            raise self.error(m, "intvelocity needs an actrange")
        if m.tag == "damper" and (
            not self.flag(m, a, "ctrllimited", "ctrlrange" in a)
            or any(self.get_floats(m, a, "ctrlrange", [0.0, 0.0], 2) < 0)
        ):
            raise self.error(m, "a damper needs a ctrlrange of non-negative values")

    def tendon_actuator_force_limits(self) -> tuple[tuple[tuple[int, ...], float, float], ...]:
        """(the actuators on it, lo, hi) of each actuated tendon with an actuatorfrcrange."""
        limits = []
        for name, t in self.tendons.items():
            on_tendon = tuple(i for i, u in enumerate(self.actuators) if u["tendon"] == name)
            lo, hi = (float(x) for x in t["actuatorfrcrange"])
            if on_tendon and np.isfinite([lo, hi]).any():
                limits.append((on_tendon, lo, hi))
        return tuple(limits)

    def references(
        self, e: ET.Element, a: dict, keys: tuple[str, ...], names: list[str], who: str, kind: str
    ) -> list[int]:
        """The indices in `names` of the elements that attributes `keys` name, each required."""
        found = []
        for key in keys:
            if key not in a:
                raise self.error(e, f"{who} needs {key}")
            if a[key] not in names:
                raise self.error(e, f"unknown {kind} {a[key]!r}")
            found.append(names.index(a[key]))
        return found

    def slider_crank(self, m: ET.Element, a: dict) -> tuple[int, int, float]:
        """(crank site, slider site, rod length) of a slider-crank transmission."""
        sites = [x["name"] for x in self.sites]
        found = self.references(m, a, ("cranksite", "slidersite"), sites, "a slider-crank", "site")
        rod = float(a.get("cranklength", 0))
        if not rod > 0:
            raise self.error(m, f"a slider-crank needs cranklength > 0, got {rod}")
        return found[0], found[1], rod

    def actuator_gain_bias(
        self, m: ET.Element, a: dict[str, str]
    ) -> tuple[float | np.ndarray, np.ndarray]:
        """Gain (a number, or the three terms of an affine gain) and the three affine bias
        terms of an actuator in <general> form (see parse_actuators); a muscle gain or bias is
        0 here (its force is physics.muscle's, see muscle_parameters)."""
        for key, allowed in (
            ("gaintype", ("fixed", "affine", "muscle")),
            ("biastype", ("none", "affine", "muscle")),
        ):
            if a.get(key, allowed[0]) not in allowed:
                raise self.error(m, f"unsupported {key}={a[key]!r} (supported: {allowed})")
        gainprm = self.get_floats(m, a, "gainprm", [1.0])
        biasprm = self.get_floats(m, a, "biasprm", [0.0])
        gaintype = a.get("gaintype", "fixed")
        if gaintype == "muscle":
            gain: float | np.ndarray = 0.0
        elif np.any(gainprm[3 if gaintype == "affine" else 1 :] != 0):
            raise self.error(
                m,
                "an affine gain uses gainprm[0:3] only; the rest must be 0"
                if gaintype == "affine"
                else "a fixed gain uses gainprm[0] only; the rest must be 0",
            )
        elif gaintype == "affine":
            gain = np.concatenate([gainprm, np.zeros(3)])[:3]
        else:
            gain = float(gainprm[0])
        if a.get("biastype", "none") in ("none", "muscle"):
            return gain, np.zeros(3)
        if np.any(biasprm[3:] != 0):
            raise self.error(m, "an affine bias uses biasprm[0:3] only; the rest must be 0")
        return gain, np.concatenate([biasprm, np.zeros(3)])[:3]

    def muscle_parameters(self, m: ET.Element, a: dict[str, str], key: str) -> np.ndarray:
        """A muscle gain's or bias's 9 parameters (`key`: gainprm or biasprm; MuJoCo's order,
        see physics.muscle), checked as MuJoCo's compiler does; zeros unless its type (gaintype
        or biastype) is muscle."""
        kind = "gaintype" if key == "gainprm" else "biastype"
        if a.get(kind) != "muscle":
            return np.zeros(9)
        prm = np.concatenate([self.get_floats(m, a, key, [1.0] if key == "gainprm" else [0.0]),
                              np.zeros(9)])[:9]  # fmt: skip
        if not prm[0] < prm[1]:
            raise self.error(m, f"a muscle needs range[0] < range[1], got {prm[:2]}")
        if not prm[4] < 1 < prm[5]:
            raise self.error(m, f"a muscle needs lmin < 1 < lmax, got {prm[4]}, {prm[5]}")
        if not (prm[[3, 6, 7, 8]] > 0).all():
            raise self.error(
                m, f"a muscle needs scale, vmax, fpmax and fvmax > 0, got {prm[[3, 6, 7, 8]]}"
            )
        return prm

    def parse_contact(self) -> None:
        """<contact>: body pairs excluded from collision, and explicit geom pairs (<pair>)
        with their own condim, friction (5), solref, solreffriction, solimp and margin, which
        replace the two geoms' mix and collide whatever their contype and conaffinity."""
        names = [g["name"] for g in self.geoms]
        for sec in self.root.iter("contact"):
            for e in sec:
                if e.tag == "pair":
                    self.pairs.append(self.explicit_pair(e, names))
                    continue
                if e.tag != "exclude":
                    raise self.error(e, f"unsupported element <{e.tag}> in <contact>")
                a = self.attrs(e, "main")
                if "body1" not in a or "body2" not in a:
                    raise self.error(e, "exclude needs body1 and body2")
                self.excludes.append((a["body1"], a["body2"], e))

    def explicit_pair(self, e: ET.Element, names: list[str]) -> dict:
        a = self.attrs(e, "main")
        ids = self.references(e, a, ("geom1", "geom2"), names, "pair", "geom")
        if ids[0] == ids[1]:
            raise self.error(e, "a pair needs two different geoms")
        condim = int(a.get("condim", 3))
        if condim not in (1, 3, 4, 6):
            raise self.error(e, f"condim={condim} must be 1, 3, 4 or 6")
        if self.geoms[ids[0]]["type"] > self.geoms[ids[1]]["type"]:
            ids.reverse()  # as MuJoCo collides them: the lower geom type first
        return {
            "elem": e,
            "geoms": tuple(ids),
            "condim": condim,
            "friction": self.padded(e, a, "friction", _DEFAULT_FRICTION),
            "solref": self.padded(e, a, "solref", con.DEFAULT_SOLREF),
            "solreffriction": self.padded(e, a, "solreffriction", (0.0, 0.0)),
            "solimp": self.padded(e, a, "solimp", con.DEFAULT_SOLIMP),
            "margin": float(a.get("margin", 0)),
        }

    def parse_equality(self) -> None:
        """<equality>: connect and weld (by bodies or sites), joint and tendon couplings; the
        rest are refused. An inactive one (active="false") is left out: this engine has no switch to
        turn it on later."""
        bodies = [b["name"] for b in self.bodies]
        joints = [j["name"] for j in self.joints]
        for sec in (c for c in self.root if c.tag == "equality"):
            for e in sec:
                if e.tag not in _EQUALITY_KINDS:
                    raise self.error(e, f"unsupported equality constraint <{e.tag}>")
                cls = e.get("class", "main")
                if cls not in self.classes:
                    raise self.error(e, f"unknown default class {cls!r}")
                a = {**self.classes[cls].get("equality", {})}
                _merge(a, e.attrib)
                self.current = e
                unknown = sorted(set(a) - _EQUALITY_KINDS[e.tag])
                if unknown:
                    raise self.error(e, f"unsupported attribute(s) {unknown}")
                if not self.flag(e, a, "active", True):
                    continue
                data, given = np.zeros(11), False
                data[10] = float(a.get("torquescale", 1.0))  # MuJoCo stores it for every kind
                if e.tag in ("connect", "weld") and ({"site1", "site2"} & set(a)):
                    obj1, obj2 = self.site_pair_data(e, a, data)
                    given = True
                elif e.tag in ("connect", "weld"):
                    needed = ("body1", "anchor") if e.tag == "connect" else ("body1",)
                    for key in needed:
                        if key not in a:
                            raise self.error(e, f"{e.tag} needs {key}")
                    names = [a["body1"], a.get("body2", "world")]
                    for n in names:
                        if n not in bodies:
                            raise self.error(e, f"unknown body {n!r}")
                    obj1, obj2 = ((bodies.index(names[0]),), (bodies.index(names[1]),))
                    data[:3] = self.get_floats(e, a, "anchor", np.zeros(3), 3)
                    if e.tag == "weld":
                        pose = self.get_floats(e, a, "relpose", [0, 1, 0, 0, 0, 0, 0], 7)
                        given = bool(np.any(pose[3:] != 0))  # else: the pose at qpos0
                        data[3:10] = pose
                else:
                    kind = e.tag  # joint or tendon
                    side = []
                    for key in (f"{kind}1", f"{kind}2"):
                        name = a.get(key)
                        if name is None:
                            side.append(S.NO_TENDON)
                        elif kind == "joint":
                            if name not in joints:
                                raise self.error(e, f"unknown joint {name!r}")
                            jid = joints.index(name)
                            if self.joints[jid]["type"] not in (S.JNT_HINGE, S.JNT_SLIDE):
                                raise self.error(e, f"joint {name!r} must be hinge or slide")
                            side.append((((jid, 1.0),), ()))
                        elif name in self.tendons:
                            side.append(self.tendons[name]["path"])
                        else:
                            raise self.error(e, f"unknown tendon {name!r}")
                    if side[0] == S.NO_TENDON:
                        raise self.error(e, f"a {kind} equality needs {kind}1")
                    obj1, obj2 = side
                    data[:5] = self.padded(e, a, "polycoef", (0.0, 1.0, 0.0, 0.0, 0.0))
                self.equalities.append(
                    {
                        "type": {
                            "connect": S.EQ_CONNECT,
                            "weld": S.EQ_WELD,
                            "joint": S.EQ_JOINT,
                            "tendon": S.EQ_TENDON,
                        }[e.tag],
                        "given": given,
                        "obj1": obj1,
                        "obj2": obj2,
                        "data": data,
                        "solref": self.padded(e, a, "solref", con.DEFAULT_SOLREF),
                        "solimp": self.padded(e, a, "solimp", con.DEFAULT_SOLIMP),
                    }
                )

    def site_pair_data(
        self, e: ET.Element, a: dict[str, str], data: np.ndarray
    ) -> tuple[tuple[int], tuple[int]]:
        """A connect or weld between two sites: their bodies, with `data` set to hold the sites
        together (connect: site1 in body1, site2 in body2) or their frames aligned (weld: site2
        in body2, site1 in body1, relative orientation site1 conj(site2))."""
        clash = sorted({"body1", "body2", "anchor", "relpose"} & set(a))
        if clash:
            raise self.error(e, f"give site1 and site2 or bodies, not both (also {clash})")
        names = [site["name"] for site in self.sites]
        pair = []
        for key in ("site1", "site2"):
            if key not in a:
                raise self.error(e, f"{e.tag} by sites needs {key}")
        for key in ("site1", "site2"):
            if a[key] not in names:
                raise self.error(e, f"unknown site {a[key]!r}")
            pair.append(self.sites[names.index(a[key])])
        s1, s2 = pair
        if e.tag == "connect":
            data[:3], data[3:6] = s1["pos"], s2["pos"]
        else:
            data[:3], data[3:6] = s2["pos"], s1["pos"]
            data[6:10] = _quat_mul(s1["quat"], s2["quat"] * [1, -1, -1, -1])
        return (s1["body"],), (s2["body"],)

    def parse_tendons(self) -> None:
        """Fixed tendons (a linear combination of hinge/slide joint positions, which an
        actuator or equality may use) and spatial tendons (straight segments between sites,
        split into branches by pulleys), each with an optional spring (stiffness,
        springlength) and damper, limits (range, margin, solreflimit, solimplimit) and friction
        loss (solreffriction, solimpfriction): see physics.tendon."""
        for sec in self.root.iter("tendon"):
            if sec not in list(self.root):
                continue  # <tendon/> inside <default>
            for t in sec:
                if t.tag not in ("fixed", "spatial"):
                    raise self.error(t, f"unsupported tendon <{t.tag}>")
                a = self.attrs(t, "main")
                frictionloss = float(a.get("frictionloss", 0))
                limited = self.flag(t, a, "limited", "range" in a)
                if frictionloss < 0:
                    raise self.error(t, f"frictionloss must be >= 0, got {frictionloss}")
                stiffness, damping = float(a.get("stiffness", 0)), float(a.get("damping", 0))
                if stiffness < 0 or damping < 0:
                    raise self.error(t, "tendon stiffness and damping must be >= 0")
                springlength = self.get_floats(t, a, "springlength", [-1.0])
                if len(springlength) not in (1, 2):
                    raise self.error(t, f"springlength needs 1 or 2 values, got {springlength}")
                path = self.fixed_path(t) if t.tag == "fixed" else self.spatial_path(t)
                rng = self.get_floats(t, a, "range", [0.0, 0.0], 2) if limited else [0, 0]
                if limited and not rng[0] < rng[1]:
                    raise self.error(t, f"a limited tendon needs range lo < hi, got {rng}")
                armature = float(a.get("armature", 0))
                if armature < 0:
                    raise self.error(t, f"tendon armature must be >= 0, got {armature}")
                if armature and any(seg[3] >= 0 for seg in path[1]):
                    raise self.error(  # (MuJoCo's mj_tendonDot stops there: unsupported)
                        t, "armature on a tendon that wraps a geom is not supported"
                    )
                if armature:
                    self.armature_tendons.append({"path": path, "armature": armature})
                if "name" in a:
                    self.tendons[a["name"]] = {
                        "path": path,
                        "limited": limited,
                        "range": rng,
                        "actuatorfrcrange": self.actuator_force_range(t, a),
                    }
                if limited or frictionloss:
                    self.constrained_tendons.append(
                        {
                            "path": path,
                            "limited": limited,
                            "range": rng,
                            "margin": float(a.get("margin", 0.0)),
                            "solref_limit": self.padded(t, a, "solreflimit", con.DEFAULT_SOLREF),
                            "solimp_limit": self.padded(t, a, "solimplimit", con.DEFAULT_SOLIMP),
                            "frictionloss": frictionloss,
                            "solref_friction": self.padded(
                                t, a, "solreffriction", con.DEFAULT_SOLREF
                            ),
                            "solimp_friction": self.padded(
                                t, a, "solimpfriction", con.DEFAULT_SOLIMP
                            ),
                        }
                    )
                if stiffness or damping:
                    lo, hi = springlength[0], springlength[-1]
                    if lo != -1 and lo > hi:
                        raise self.error(t, f"springlength needs lo <= hi, got {springlength}")
                    self.spring_tendons.append(
                        {"path": path, "stiffness": stiffness, "damping": damping,
                         # MuJoCo's default (-1): the length at qpos_spring, set in build
                         "lengthspring": None if lo == -1 else [lo, hi]}
                    )  # fmt: skip

    def fixed_path(self, t: ET.Element) -> S.TendonPath:
        """A <fixed> tendon's (joint, coef) pairs."""
        names = [j["name"] for j in self.joints]
        pairs = []
        for j in t:
            if j.tag != "joint":
                raise self.error(j, f"unsupported element <{j.tag}> in a fixed tendon")
            self.check_known(j, j.attrib, {"joint", "coef"})
            if j.get("joint") not in names:
                raise self.error(j, f"unknown joint {j.get('joint')!r}")
            jid = names.index(j.get("joint"))
            if self.joints[jid]["type"] not in (S.JNT_HINGE, S.JNT_SLIDE):
                raise self.error(j, "a fixed tendon's joints must be hinge or slide")
            pairs.append((jid, float(j.get("coef", 1.0))))
        if not pairs:
            raise self.error(t, "a fixed tendon needs at least one joint")
        return tuple(pairs), ()

    def spatial_path(self, t: ET.Element) -> S.TendonPath:
        """A <spatial> tendon's (site a, site b, 1/divisor, geom, side site) segments:
        consecutive sites of each branch (a <pulley divisor> starts a new branch, its segments
        scaled by 1/divisor), with the sphere or cylinder a <geom> between two sites names
        (-1: none) and its sidesite (-1: none), as MuJoCo's mj_tendon measures them."""
        sites = [site["name"] for site in self.sites]
        geoms = [g["name"] for g in self.geoms]
        segments, scale, previous, branch_sites, around = [], 1.0, None, 0, None
        for e in t:
            if e.tag == "site":
                self.check_known(e, e.attrib, {"site"})
                (sid,) = self.references(e, e.attrib, ("site",), sites, "<site>", "site")
                if previous is not None:
                    segments.append((previous, sid, scale, *(around or (-1, -1))))
                previous, branch_sites, around = sid, branch_sites + 1, None
            elif e.tag == "pulley":
                self.check_known(e, e.attrib, {"divisor"})
                divisor = float(e.get("divisor", 0))
                if divisor <= 0:
                    raise self.error(e, f"a pulley needs divisor > 0, got {divisor}")
                if around is not None:
                    raise self.error(t, "a wrapping <geom> must lie between two sites")
                if segments and branch_sites < 2 or not segments and branch_sites == 1:
                    # (a tendon may start with a pulley: it scales the first branch)
                    raise self.error(t, "each branch of a spatial tendon needs two sites")
                scale, previous, branch_sites = 1.0 / divisor, None, 0
            elif e.tag == "geom":
                self.check_known(e, e.attrib, {"geom", "sidesite"})
                (gid,) = self.references(e, e.attrib, ("geom",), geoms, "<geom>", "geom")
                if previous is None or around is not None:
                    raise self.error(e, "a wrapping <geom> must lie between two sites")
                if self.geoms[gid]["type"] not in (S.GEOM_SPHERE, S.GEOM_CYLINDER):
                    raise self.error(e, "a tendon can wrap a sphere or a cylinder only")
                side = -1
                if "sidesite" in e.attrib:
                    (side,) = self.references(e, e.attrib, ("sidesite",), sites, "", "site")
                around = (gid, side)
            else:
                raise self.error(e, f"unsupported element <{e.tag}> in a spatial tendon")
        if around is not None:
            raise self.error(t, "a wrapping <geom> must lie between two sites")
        if branch_sites < 2:
            raise self.error(t, "each branch of a spatial tendon needs two sites")
        return (), tuple(segments)

    # ---------------------------------------------------------------- mass properties
    def geom_inertia(self, g: dict) -> tuple[float, np.ndarray, np.ndarray]:
        """Mass, 3x3 inertia (about its centre, body frame) and principal axes (the geom's
        frame) of a geom, as MuJoCo computes them."""
        r, h = g["size"][0], g["size"][1]
        t = g["type"]
        if t == S.GEOM_MESH:
            m = self.meshes[g["mesh"]]
            mass = g["mass"] if g["mass"] is not None else g["density"] * m.measure
            rot = _quat_mat(g["quat"])
            return mass, rot @ np.diag(m.inertia * mass / m.measure) @ rot.T, rot
        if g["shell"]:
            return _shell_inertia(g, t, r, h)
        if t == S.GEOM_SPHERE:
            vol = 4 / 3 * math.pi * r**3
        elif t == S.GEOM_CAPSULE:
            vol = math.pi * r * r * 2 * h + 4 / 3 * math.pi * r**3
        elif t == S.GEOM_ELLIPSOID:
            vol = 4 / 3 * math.pi * float(np.prod(g["size"]))
        elif t == S.GEOM_CYLINDER:
            vol = math.pi * r * r * 2 * h
        else:
            vol = 8 * float(np.prod(g["size"]))
        mass = g["mass"] if g["mass"] is not None else g["density"] * vol
        if t == S.GEOM_SPHERE:
            d = np.full(3, 0.4 * mass * r * r)
        elif t == S.GEOM_CAPSULE:
            height = 2 * h
            sphere_mass = mass * (4 / 3 * r**3) / (4 / 3 * r**3 + r * r * height)
            cyl_mass = mass - sphere_mass
            ixx = cyl_mass * (3 * r * r + height * height) / 12
            izz = cyl_mass * r * r / 2
            sph = 2 * sphere_mass * r * r / 5
            ixx += sph + sphere_mass * height * (3 * r + 2 * height) / 8
            d = np.array([ixx, ixx, izz + sph])
        elif t == S.GEOM_ELLIPSOID:
            x, y, z = g["size"] ** 2
            d = mass / 5 * np.array([y + z, x + z, x + y])
        elif t == S.GEOM_CYLINDER:
            ixx = mass * (3 * r * r + 4 * h * h) / 12
            d = np.array([ixx, ixx, mass * r * r / 2])
        else:
            x, y, z = 4 * g["size"] ** 2
            d = mass / 12 * np.array([y + z, x + z, x + y])
        rot = _quat_mat(g["quat"])
        return mass, rot @ np.diag(d) @ rot.T, rot

    def align_free_bodies(self, ipos: np.ndarray, inertia: np.ndarray, axes: np.ndarray) -> None:
        """MuJoCo's alignfree (or <freejoint align>): a free body without children gets its
        inertial frame as its own, so its qpos is its centre of mass and principal axes. Its
        pose moves onto that frame, its geoms and sites are re-expressed in it and its inertial
        frame becomes the identity (the arrays are updated in place). Equality anchors and
        relposes stay as written, now in the new frame, as MuJoCo reads them."""
        parents = {b["parent"] for b in self.bodies}
        for j in self.joints:
            b = j["body"]
            align = self.alignfree if j["align"] is None else j["align"]
            if j["type"] != S.JNT_FREE or not align or b in parents:
                continue
            body = self.bodies[b]
            if body.get("eigenframe"):
                raise self.error(
                    j["elem"],
                    "alignfree on a body whose inertial frame is the eigenbasis of several "
                    "geoms' inertia is not supported (MuJoCo orders and signs those axes by "
                    "its own eigensolver); give the body an <inertial>",
                )
            rot = axes[b]
            body["pos"] = body["pos"] + _quat_mat(body["quat"]) @ ipos[b]
            body["quat"] = _quat_mul(body["quat"], _mat_quat(rot))
            for item in (*self.geoms, *self.sites):
                if item["body"] == b:
                    item["pos"] = rot.T @ (item["pos"] - ipos[b])
                    item["quat"] = _quat_mul(_mat_quat(rot.T), item["quat"])
            ipos[b], inertia[b], axes[b] = 0.0, rot.T @ inertia[b] @ rot, np.eye(3)

    def body_inertias(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per body: mass, centre of mass, inertia tensor (body frame) and principal axes (as
        MuJoCo's inertial frame: a single geom's or <inertial>'s own frame, otherwise the
        eigenvectors of the summed tensor)."""
        nb = len(self.bodies)
        mass, ipos, inertia = np.zeros(nb), np.zeros((nb, 3)), np.zeros((nb, 3, 3))
        axes = np.tile(np.eye(3), (nb, 1, 1))
        from_geoms = {"true": True, "false": False}.get(self.inertiafromgeom)
        for b, body in enumerate(self.bodies):
            if b == 0:
                continue
            parts = []
            use_geoms = from_geoms if from_geoms is not None else body["inertial"] is None
            if use_geoms:
                low, high = self.inertiagroups
                for g in self.geoms:
                    if g["body"] == b and low <= g["group"] <= high:
                        m, inert, frame = self.geom_inertia(g)
                        parts.append((m, g["pos"], inert, frame))
            elif body["inertial"] is not None:
                parts.append(body["inertial"])
            if not parts:  # MuJoCo's inertial frame of a body without one: its own pose
                ipos[b], axes[b] = body["pos"], _quat_mat(body["quat"])
                continue
            m = sum(p[0] for p in parts)
            if m < _MINVAL:
                continue
            com = sum(p[0] * p[1] for p in parts) / m
            full = np.zeros((3, 3))
            for pm, pp, pi, _ in parts:
                d = pp - com
                full += pi + pm * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
            mass[b], ipos[b], inertia[b] = m, com, full
            axes[b] = parts[0][3] if len(parts) == 1 else _principal_axes(full)
            body["eigenframe"] = len(parts) > 1
        for b in range(1, nb):  # the compiler's quick fixes for poorly designed bodies
            mass[b] = max(mass[b], self.boundmass)
            if self.boundinertia > 0 or self.balanceinertia:
                moments = np.maximum(np.diag(axes[b].T @ inertia[b] @ axes[b]), self.boundinertia)
                a, b2, c = moments
                if self.balanceinertia and (a + b2 < c or a + c < b2 or b2 + c < a):
                    moments = np.full(3, moments.mean())  # MuJoCo: all three their mean
                inertia[b] = axes[b] @ np.diag(moments) @ axes[b].T
        if self.settotalmass > 0:
            scale = self.settotalmass / mass.sum()
            mass, inertia = mass * scale, inertia * scale
        return mass, ipos, inertia, axes

    # ---------------------------------------------------------------- assembly
    def build(self) -> S.System:
        top = [c.tag for c in self.root]
        for tag in top:
            if (
                tag
                not in {
                    "compiler",
                    "option",
                    "default",
                    "worldbody",
                    "actuator",
                    "contact",
                    "tendon",
                    "equality",
                }
                | _IGNORED
            ):
                raise self.error(None, f"unsupported element <{tag}>")
        self.parse_compiler()
        self.parse_option()
        self.parse_defaults()
        self.mesh_elems = self.parse_assets("mesh")
        self.hfield_elems = self.parse_assets("hfield")
        world = ET.Element("worldbody")  # every <worldbody>'s children, merged as MuJoCo does
        for section in (c for c in self.root if c.tag == "worldbody"):
            world.extend(section)
        self.expand_replicates(world)
        self.walk(world, -1, "main")
        mass, ipos, inertia, iframe = self.body_inertias()
        self.align_free_bodies(ipos, inertia, iframe)  # before anything copies a site's pose
        self.parse_tendons()
        self.parse_actuators()
        self.parse_contact()
        self.parse_equality()
        parent = tuple(b["parent"] for b in self.bodies)
        topo = S.Topology(
            parent, tuple(j["type"] for j in self.joints), tuple(j["body"] for j in self.joints)
        )
        self.check_masses(topo, mass)
        names = [b["name"] for b in self.bodies]
        excl = []
        for b1, b2, e in self.excludes:
            for n in (b1, b2):
                if n not in names:
                    raise self.error(e, f"unknown body {n!r}")
            excl.append((names.index(b1), names.index(b2)))

        qpos0, qpos_spring, armature, damping = [], [], [], []
        frictionloss, solref_friction, solimp_friction = [], [], []
        for j in self.joints:
            t, nv = j["type"], S.JNT_NV[j["type"]]
            if t == S.JNT_FREE:
                body = self.bodies[j["body"]]
                q0 = list(body["pos"]) + list(body["quat"])
                qs = q0
            elif t == S.JNT_BALL:
                q0 = qs = [1.0, 0.0, 0.0, 0.0]
            else:
                q0, qs = [j["ref"]], [j["springref"]]
            qpos0 += q0
            qpos_spring += qs
            armature += [j["armature"]] * nv
            damping += [j["damping"]] * nv
            frictionloss += [j["frictionloss"]] * nv
            solref_friction += [j["solref_friction"]] * nv
            solimp_friction += [j["solimp_friction"]] * nv

        # cast in numpy and device_put: jnp.asarray compiles a small program per shape
        real = float_dtype()
        floats = lambda x, shape=None: jax.device_put(  # noqa: E731
            (np.asarray(x, np.float64).reshape(shape) if shape else np.asarray(x)).astype(real)
        )
        nj, ng, nu = len(self.joints), len(self.geoms), len(self.actuators)
        jf = lambda k, shape: floats([j[k] for j in self.joints], (nj, *shape))  # noqa: E731
        gf = lambda k, shape: floats([g[k] for g in self.geoms], (ng, *shape))  # noqa: E731
        af = lambda k, shape: floats([u[k] for u in self.actuators], (nu, *shape))  # noqa: E731
        nt, tendons = len(self.spring_tendons), self.spring_tendons
        tf = lambda k, shape: floats([t[k] for t in tendons], (nt, *shape))  # noqa: E731
        ntc, ctens = len(self.constrained_tendons), self.constrained_tendons
        cf = lambda k, shape: floats([t[k] for t in ctens], (ntc, *shape))  # noqa: E731
        neq, eqs = len(self.equalities), self.equalities
        ef = lambda k, shape: floats([e[k] for e in eqs], (neq, *shape))  # noqa: E731
        pairs = self.supported_pairs()
        sys_ = S.System(
            timestep=floats(self.timestep),
            gravity=floats(np.zeros(3) if "gravity" in self.disabled else self.gravity),
            density=floats(self.density),
            viscosity=floats(self.viscosity),
            wind=floats(self.wind),
            o_margin=floats(self.o_margin),
            o_solref=floats(self.o_solref),
            o_solimp=floats(self.o_solimp),
            o_friction=floats(self.o_friction),
            body_pos=floats([b["pos"] for b in self.bodies]),
            body_quat=floats([b["quat"] for b in self.bodies]),
            body_mass=floats(mass),
            body_ipos=floats(ipos),
            body_inertia=floats(inertia),
            body_iframe=floats(iframe),
            body_gravcomp=floats([b["gravcomp"] for b in self.bodies]),
            jnt_actfrcrange=jf("actuatorfrcrange", (2,)),
            jnt_pos=jf("pos", (3,)),
            jnt_axis=jf("axis", (3,)),
            jnt_range=jf("range", (2,)),
            jnt_margin=jf("margin", ()),
            jnt_solref=jf("solref", (2,)),
            jnt_solimp=jf("solimp", (5,)),
            jnt_stiffness=jf("stiffness", ()),
            dof_armature=floats(armature, (len(armature),)),
            dof_damping=floats(damping, (len(damping),)),
            dof_frictionloss=floats(frictionloss, (len(frictionloss),)),
            dof_solref=floats(solref_friction, (len(solref_friction), 2)),
            dof_solimp=floats(solimp_friction, (len(solimp_friction), 5)),
            qpos0=floats(qpos0, (len(qpos0),)),
            qpos_spring=floats(qpos_spring, (len(qpos_spring),)),
            geom_size=gf("size", (3,)),
            geom_pos=gf("pos", (3,)),
            geom_quat=gf("quat", (4,)),
            geom_friction=gf("friction", (3,)),
            geom_margin=gf("margin", ()),
            geom_solref=gf("solref", (2,)),
            geom_solimp=gf("solimp", (5,)),
            geom_solmix=gf("solmix", ()),
            geom_fluid=gf("fluid", (12,)),
            mesh_hull=mesh.hull_tables([]),
            **self.terrain(topo),
            pair_friction=floats([p["friction"] for p in pairs], (len(pairs), 5)),
            pair_solref=floats([p["solref"] for p in pairs], (len(pairs), 2)),
            pair_solreffriction=floats([p["solreffriction"] for p in pairs], (len(pairs), 2)),
            pair_solimp=floats([p["solimp"] for p in pairs], (len(pairs), 5)),
            pair_margin=floats([p["margin"] for p in pairs], (len(pairs),)),
            pair_condim=tuple(p["condim"] for p in pairs),
            site_pos=floats([x["pos"] for x in self.sites], (len(self.sites), 3)),
            site_quat=floats([x["quat"] for x in self.sites], (len(self.sites), 4)),
            tendon_stiffness=tf("stiffness", ()),
            tendon_damping=tf("damping", ()),
            tendon_lengthspring=floats([t["lengthspring"] or [0.0, 0.0] for t in tendons], (nt, 2)),
            tendon_armature=floats(
                [t["armature"] for t in self.armature_tendons], (len(self.armature_tendons),)
            ),
            actuator_gear=af("gear", ()),
            actuator_gain=af("gain", (3,)),
            actuator_bias=af("bias", (3,)),
            actuator_ctrlrange=af("ctrlrange", (2,)),
            actuator_forcerange=af("forcerange", (2,)),
            actuator_dynprm=af("dynprm", (3,)),
            actuator_muscle_gainprm=af("muscle_gainprm", (9,)),
            actuator_muscle_biasprm=af("muscle_biasprm", (9,)),
            actuator_lengthrange=af("lengthrange", (2,)),
            actuator_actrange=af("actrange", (2,)),
            tendon_range=cf("range", (2,)),
            tendon_margin=cf("margin", ()),
            tendon_solref_limit=cf("solref_limit", (2,)),
            tendon_solimp_limit=cf("solimp_limit", (5,)),
            tendon_frictionloss=cf("frictionloss", ()),
            tendon_solref_friction=cf("solref_friction", (2,)),
            tendon_solimp_friction=cf("solimp_friction", (5,)),
            eq_data=ef("data", (11,)),
            eq_solref=ef("solref", (2,)),
            eq_solimp=ef("solimp", (5,)),
            eq_ref=jnp.zeros((neq, 2), real),
            body_invweight0=jnp.zeros((topo.nbody, 2), real),
            dof_invweight0=jnp.zeros(topo.nv, real),
            eq_invweight0=jnp.zeros((neq, 2), real),
            tendon_invweight0=jnp.zeros(ntc, real),
            topology=topo,
            jnt_limited=tuple(j["limited"] for j in self.joints),
            gravcomp_bodies=()
            if self.passive_off
            else tuple(i for i, b in enumerate(self.bodies) if b["gravcomp"] != 0),
            jnt_actgravcomp=tuple(j["actuatorgravcomp"] for j in self.joints),
            jnt_actfrclimited=tuple(
                bool(np.isfinite(j["actuatorfrcrange"]).any()) for j in self.joints
            ),
            geom_type=tuple(g["type"] for g in self.geoms),
            geom_body=tuple(g["body"] for g in self.geoms),
            geom_contype=tuple(g["contype"] for g in self.geoms),
            geom_conaffinity=tuple(g["conaffinity"] for g in self.geoms),
            geom_condim=tuple(g["condim"] for g in self.geoms),
            geom_priority=tuple(g["priority"] for g in self.geoms),
            actuator_transmission=tuple(u["transmission"] for u in self.actuators),
            actuator_adhesion=tuple(
                (i, u["body"]) for i, u in enumerate(self.actuators) if u["body"] is not None
            ),
            actuator_site=tuple(
                (i, *u["site"]) for i, u in enumerate(self.actuators) if u["site"] is not None
            ),
            actuator_ball_free=tuple(
                (i, *u["ball_free"])
                for i, u in enumerate(self.actuators)
                if u["ball_free"] is not None
            ),
            tendon_actuator_force_limits=self.tendon_actuator_force_limits(),
            ball_free_springs=tuple(
                j
                for j, joint in enumerate(self.joints)
                if joint["type"] in (S.JNT_BALL, S.JNT_FREE) and joint["stiffness"] != 0
            ),
            actuator_slider_crank=tuple(
                (i, *u["slider_crank"])
                for i, u in enumerate(self.actuators)
                if u["slider_crank"] is not None
            ),
            actuator_dyntype=tuple(u["dyntype"] for u in self.actuators),
            actuator_muscle_gain=tuple(
                i for i, u in enumerate(self.actuators) if u["muscle_gainprm"].any()
            ),
            actuator_muscle_bias=tuple(
                i for i, u in enumerate(self.actuators) if u["muscle_biasprm"].any()
            ),
            actuator_actearly=tuple(u["actearly"] for u in self.actuators),
            spring_tendons=tuple(t["path"] for t in self.spring_tendons),
            armature_tendons=tuple(t["path"] for t in self.armature_tendons),
            constrained_tendons=tuple(t["path"] for t in ctens),
            tendon_limited=tuple(t["limited"] for t in ctens),
            tendon_friction=tuple(i for i, t in enumerate(ctens) if t["frictionloss"] > 0),
            exclude_pairs=tuple(excl),
            eq_type=tuple(e["type"] for e in eqs),
            eq_obj1=tuple(e["obj1"] for e in eqs),
            eq_obj2=tuple(e["obj2"] for e in eqs),
            body_names=tuple(names),
            jnt_names=tuple(j["name"] for j in self.joints),
            geom_names=tuple(g["name"] for g in self.geoms),
            site_body=tuple(x["body"] for x in self.sites),
            site_names=tuple(x["name"] for x in self.sites),
            mocap_bodies=tuple(self.mocap),
            actuator_names=tuple(u["name"] for u in self.actuators),
            solver_iterations=self.iterations,
            noslip_iterations=self.noslip_iterations,
            disable_contact="contact" in self.disabled,
            disable_limit="limit" in self.disabled,
            disable_frictionloss="frictionloss" in self.disabled,
            disable_equality="equality" in self.disabled,
            disable_eulerdamp="eulerdamp" in self.disabled,
            disable_spring="spring" in self.disabled,
            disable_damper="damper" in self.disabled,
            disable_actuation="actuation" in self.disabled,
            disable_clampctrl="clampctrl" in self.disabled,
            disable_island="island" in self.disabled,
            enable_override="override" in self.enabled,
            integrator=self.integrator,
            dof_friction=tuple(i for i, x in enumerate(frictionloss) if x > 0),
            cone=self.cone,
            impratio=self.impratio,
            fluid=(self.density > 0 or self.viscosity > 0) and not self.passive_off,
            fluid_ellipsoids=tuple(i for i, g in enumerate(self.geoms) if g["fluid"][0] > 0),
            contact_pairs=contact.contact_pairs(
                topo,
                tuple(g["type"] for g in self.geoms),
                tuple(g["body"] for g in self.geoms),
                tuple(g["contype"] for g in self.geoms),
                tuple(g["conaffinity"] for g in self.geoms),
                tuple(excl),
                tuple(p["geoms"] for p in pairs),
                filter_parent="filterparent" not in self.disabled,
            ),
        )
        problems = contact.check_supported(sys_)
        if problems:
            raise self.error(None, "; ".join(problems))
        sys_ = self.with_hulls(sys_)
        sys_ = dataclasses.replace(sys_, tendon_lengthspring=self.spring_lengths(sys_))
        given = tuple(e["given"] for e in eqs)
        sys_ = dataclasses.replace(
            sys_,
            eq_data=floats(equality.compiled_data(sys_, given)),
            eq_ref=floats(equality.reference_values(sys_)),
        )
        weights = contact.invweights(sys_)
        self.warn_singular(sys_, weights.singular_dofs)
        sys_ = dataclasses.replace(
            sys_,
            body_invweight0=weights.body,
            dof_invweight0=weights.dof,
            eq_invweight0=weights.eq,
            tendon_invweight0=weights.tendon,
        )
        return self.with_muscles(self.with_damping_ratios(self.with_spring_dampers(sys_)))

    def with_damping_ratios(self, sys: S.System) -> S.System:
        """<position dampratio>: kv = dampratio 2 sqrt(kp m), m the actuator's inertia at qpos0,
        1 / (J M^-1 J^T) with J its moment arms (gear included), as MuJoCo's mj_setConst."""
        wanted = [i for i, u in enumerate(self.actuators) if u["dampratio"] > 0]
        if not wanted:
            return sys
        moment, minv = lengthrange.moments_and_inverse_mass(sys)
        bias = np.array(sys.actuator_bias)
        for i in wanted:
            j = moment[i]
            inertia = 1 / max(_MINVAL, float(j @ minv @ j))
            kp = float(sys.actuator_gain[i, 0])
            bias[i, 2] = -self.actuators[i]["dampratio"] * 2 * math.sqrt(kp * inertia)
        return dataclasses.replace(sys, actuator_bias=jnp.asarray(bias, float_dtype()))

    def with_muscles(self, sys: S.System) -> S.System:
        """Muscles' constants, as MuJoCo's compiler sets them: a peak force of scale / acc0
        where force < 0 (lengthrange.unit_force_acceleration), and the length range of each
        muscle that does not give one (<compiler><lengthrange>: its useexisting, uselimit and
        otherwise MuJoCo's simulation, lengthrange.lengthranges)."""
        muscles = sorted(set(sys.actuator_muscle_gain) | set(sys.actuator_muscle_bias))
        if not muscles:
            return sys
        acc0 = lengthrange.unit_force_acceleration(sys)
        prms = []
        for prm in (np.array(sys.actuator_muscle_gainprm), np.array(sys.actuator_muscle_biasprm)):
            unset = prm[:, 2] < 0
            prm[unset, 2] = prm[unset, 3] / np.maximum(_MINVAL, acc0[unset])
            prms.append(jnp.asarray(prm, float_dtype()))
        ranges = np.array(sys.actuator_lengthrange, np.float64)
        options, simulate = self.lengthrange, []
        for i in muscles if options.mode != "none" else []:
            if options.useexisting and ranges[i, 0] < ranges[i, 1]:
                continue
            if options.uselimit and self.actuators[i]["limit"] is not None:
                ranges[i] = self.actuators[i]["limit"]
                continue
            simulate.append(i)
        if simulate:
            try:
                ranges[simulate] = lengthrange.lengthranges(sys, simulate, options)
            except lengthrange.LengthRangeError as e:
                raise self.error(None, f"muscle length range: {e}") from None
        return dataclasses.replace(
            sys,
            actuator_muscle_gainprm=prms[0],
            actuator_muscle_biasprm=prms[1],
            actuator_lengthrange=jnp.asarray(ranges, float_dtype()),
        )

    def with_spring_dampers(self, sys: S.System) -> S.System:
        """MuJoCo's springdamper="timeconst dampratio": the stiffness and damping that give a
        joint that time constant and damping ratio for its inertia at qpos0 (1/dof_invweight0),
        in place of the stiffness and damping it states."""
        stiffness, damping = np.array(sys.jnt_stiffness), np.array(sys.dof_damping)
        invweight = np.asarray(sys.dof_invweight0, np.float64)
        for j, joint in enumerate(self.joints):
            timeconst, dampratio = joint["springdamper"]
            if timeconst > 0:
                dof = sys.topology.jnt_dofadr[j]
                inertia = 1 / max(_MINVAL, invweight[dof])
                stiffness[j] = inertia / max(_MINVAL, (timeconst * dampratio) ** 2)
                damping[dof] = 2 * inertia / max(_MINVAL, timeconst)
        return dataclasses.replace(
            sys, jnt_stiffness=jnp.asarray(stiffness), dof_damping=jnp.asarray(damping)
        )

    def warn_singular(self, sys: S.System, dofs: np.ndarray) -> None:
        """The mass matrix at qpos0 is (near) singular at `dofs`: MuJoCo loads such a model
        with a warning and its steps give accelerations of ~1e14 along the free direction;
        ours give NaN. Named, so the joints can be fixed."""
        if not dofs.size:
            return
        joints = sorted({int(j) for j in sys.topology.dof_jnt[dofs]})
        names = ", ".join(repr(sys.jnt_names[j] or f"joint {j}") for j in joints)
        warnings.warn(
            f"{self.source}: the mass matrix at qpos0 is singular at the dofs of {names}: "
            "these joints move their bodies along directions that other joints already span "
            "(or move nothing with mass), so accelerations there are undefined and steps give "
            "NaN (MuJoCo warns 'Inertia matrix is too close to singular'); remove the "
            "redundant joint or give it armature",
            MJCFWarning,
            stacklevel=4,
        )

    def warn_uncollided(self, pairs: list[tuple[int, int]]) -> None:
        """A model's geom pairs that have no collision function here are left out, with a
        warning naming them (unless contacts are off anyway)."""
        if "contact" in self.disabled:
            return
        names = ", ".join(
            f"({self.geoms[a]['name'] or a!r}, {self.geoms[b]['name'] or b!r})" for a, b in pairs
        )
        warnings.warn(
            f"{self.source}: no collision function for geom pair(s) {names}; they are not collided",
            MJCFWarning,
            stacklevel=4,
        )

    def supported_pairs(self) -> list[dict]:
        """The explicit pairs the narrow phase has a function for (the others: a warning)."""
        types = tuple(g["type"] for g in self.geoms)
        bad = contact.unsupported_pairs(types, tuple(p["geoms"] for p in self.pairs))
        if bad:
            self.warn_uncollided(bad)
        return [p for p in self.pairs if p["geoms"] not in bad]

    def terrain(self, topo: S.Topology) -> dict:
        """The System's height-field fields: the heights of the hfields geoms use (padded to
        one shape), their grids and sizes, each geom's hfield and bounding radius."""
        names = sorted({g["hfield"] for g in self.geoms if g["hfield"]})
        weld = contact.body_weldid(topo)
        for g in self.geoms:
            if g["hfield"] and weld[g["body"]] != 0:
                raise self.error(
                    g["elem"], "hfield geoms must not move (on the world or a body without joints)"
                )
        fields = [self.hfields[n] for n in names]
        shape = tuple(max((f[0].shape[k] for f in fields), default=2) for k in (0, 1))
        data = np.zeros((len(fields), *shape), float_dtype())
        for k, (heights, _) in enumerate(fields):
            data[k, : heights.shape[0], : heights.shape[1]] = heights
        radius = [
            hfield.rbound(
                g["type"], g["size"], self.meshes[g["mesh"]].vertices if g["mesh"] else None
            )
            for g in self.geoms
        ]
        return {
            "hfield_data": jnp.asarray(data),
            "hfield_grid": tuple(f[0].shape for f in fields),
            "hfield_size": tuple(tuple(float(v) for v in f[1]) for f in fields),
            "geom_hfield": tuple(
                names.index(g["hfield"]) if g["hfield"] else -1 for g in self.geoms
            ),
            "geom_rbound": tuple(radius),
        }

    def with_hulls(self, sys: S.System) -> S.System:
        """The convex hulls of the mesh geoms that collide, one row per mesh."""
        colliding = {g for pair in sys.contact_pairs for g in pair}
        names = sorted(
            {g["mesh"] for i, g in enumerate(self.geoms) if g["mesh"] and i in colliding}
        )
        for name in names:
            if self.meshes[name].hull is None:
                raise self.error(
                    self.mesh_elems[name], "a flat mesh cannot collide (set contype/conaffinity 0)"
                )
            limit = int(self.attrs(self.mesh_elems[name], "main").get("maxhullvert", -1))
            if 0 < limit < len(self.meshes[name].hull.vertices):
                warnings.warn(
                    f"{self.source}: mesh {name!r} collides with its full convex hull of "
                    f"{len(self.meshes[name].hull.vertices)} vertices; MuJoCo cuts it to "
                    f"maxhullvert={limit}, so its contacts differ",
                    MJCFWarning,
                    stacklevel=4,
                )
        tables = mesh.hull_tables([self.meshes[n].hull for n in names])
        return dataclasses.replace(
            sys,
            mesh_hull=mesh.Hull(
                *(
                    jnp.asarray(x, float_dtype() if x.dtype == np.float64 else jnp.int32)
                    for x in tables
                )
            ),
            geom_hull=tuple(
                names.index(g["mesh"]) if g["mesh"] in names else -1 for g in self.geoms
            ),
        )

    def spring_lengths(self, sys: S.System) -> jax.Array:
        """tendon_lengthspring, MuJoCo's default (the length at qpos_spring) filled in."""
        spring = sys.tendon_lengthspring
        rest = [i for i, t in enumerate(self.spring_tendons) if t["lengthspring"] is None]
        if not rest:
            return spring
        kin = kinematics.forward_kinematics(sys, sys.qpos_spring)
        length, _ = tendon.lengths_and_jacobian(sys, kin, sys.qpos_spring, sys.spring_tendons)
        return spring.at[np.asarray(rest)].set(length[np.asarray(rest), None])

    def check_masses(self, topo: S.Topology, mass: np.ndarray) -> None:
        """A jointed body whose subtree has no mass would make the mass matrix singular."""
        subtree = topo.body_ancestor @ mass
        for j in self.joints:
            b = j["body"]
            if subtree[b] < _MINVAL and j["armature"] <= 0:
                raise self.error(
                    self.bodies[b]["elem"], f"moving body has zero mass (joint {j['name']!r})"
                )


def _read_xml(path: str, name: str) -> ET.Element:
    try:
        with open(path) as f:
            return ET.fromstring(f.read())
    except OSError as e:
        raise MJCFError(f"{name}: cannot read {path}: {e.strerror}") from e
    except ET.ParseError as e:
        raise MJCFError(f"{name}: invalid XML in {path}: {e}") from e


def _expand_includes(elem: ET.Element, base: str, name: str, chain: tuple[str, ...]) -> None:
    """Replaces each <include file=...> below `elem` by the children of that file's <mujoco>
    root, recursively; relative paths are resolved against `base` (the main model's directory,
    as MuJoCo does)."""
    for i, child in enumerate(list(elem)):
        if child.tag != "include":
            _expand_includes(child, base, name, chain)
            continue
        if "file" not in child.attrib:
            raise MJCFError(f"{name}: <include> needs a file attribute")
        path = os.path.normpath(os.path.join(base, child.attrib["file"]))
        if path in chain:
            raise MJCFError(f"{name}: <include> cycle: {' -> '.join((*chain, path))}")
        root = _read_xml(path, name)
        if root.tag != "mujoco":
            raise MJCFError(f"{name}: included {path} must have a <mujoco> root, got <{root.tag}>")
        _expand_includes(root, base, name, (*chain, path))
        elem.remove(child)
        for k, included in enumerate(root):
            elem.insert(i + k, included)


def _parse(source: str | os.PathLike) -> tuple[ET.Element, str, str]:
    text = os.fspath(source)
    name = "<xml string>" if text.lstrip().startswith("<") else text
    if name == text:
        root = _read_xml(text, name)
        base = os.path.dirname(os.path.abspath(text))
    else:
        try:
            root = ET.fromstring(text)
        except ET.ParseError as e:
            raise MJCFError(f"{name}: invalid XML: {e}") from e
        base = os.getcwd()
    _expand_includes(root, base, name, (os.path.join(base, name),))
    return root, name, base


FOLLOWED_LS_ITERATIONS = 16
"""The most line-search evaluations (<option ls_iterations>) for which a capped Newton solve
follows MuJoCo's own search (load_mjcf). With more, MuJoCo's search nearly always meets its
tolerance first, where it agrees with this engine's exact searches, which cost far less than
that many fixed evaluations."""


def load_mjcf(
    source: str | os.PathLike,
    *,
    max_contacts: int | None = None,
    newton_steps: int = contact.NEWTON_STEPS,
    hessian_form: str = "broadcast",
) -> S.System:
    """Builds a System from an MJCF file path or XML string (numpy, once per model).

    ``max_contacts``: solve only that many deepest contacts per substep (faster; the same as
    solving all while no more are active); None solves every active contact, as MuJoCo does.
    ``newton_steps``: Newton steps of each constraint solve; fewer run faster, and are enough
    for soft contacts (see ``physics.contact.NEWTON_STEPS``: the gymnasium models need 4).
    A model whose ``<option>`` asks MuJoCo's Newton solver for fewer ``iterations`` gets
    that many (at least 1): MuJoCo stops there, short of the optimum (MJX-tuned models ask for
    1-4), and further steps would leave its trajectory. Where that cap holds and the model
    also limits MuJoCo's line search to at most ``FOLLOWED_LS_ITERATIONS`` evaluations
    (``ls_iterations``, with its ``tolerance`` and ``ls_tolerance``), the solve uses MuJoCo's
    own line search too (``System.mujoco_search``), which then stops short of the exact
    minimum that this engine's searches find. PGS and CG iteration counts measure other
    solvers' work and cap nothing.
    ``hessian_form``: how the constraint solver forms J^T D J, one of
    ``physics.constraints.HESSIAN_FORMS`` (the same results; a speed choice per device).

    The System's arrays are float32, or float64 where ``jax_enable_x64`` is on when it is built
    (as MJX and Brax do); its States and steps keep that type.
    """
    if max_contacts is not None and (isinstance(max_contacts, bool) or max_contacts < 1):
        raise ValueError(f"max_contacts must be a positive int or None, got {max_contacts!r}")
    if isinstance(newton_steps, bool) or not isinstance(newton_steps, int) or newton_steps < 1:
        raise ValueError(f"newton_steps must be a positive int, got {newton_steps!r}")
    if hessian_form not in con.HESSIAN_FORMS:
        raise ValueError(f"hessian_form must be one of {con.HESSIAN_FORMS}, got {hessian_form!r}")
    root, name, base = _parse(source)
    if root.tag != "mujoco":
        raise MJCFError(f"{name}: root element must be <mujoco>, got <{root.tag}>")
    loader = _Loader(root, name, base)
    try:
        sys_ = loader.build()
    except MJCFError:
        raise
    except ValueError as error:  # float()/int() of a malformed number, e.g. pos="0,0,1"
        raise loader.error(loader.current, f"invalid attribute value: {error}") from None
    if max_contacts is None and (slots := contact._layout(sys_).ncon) > _MANY_SLOTS:
        warnings.warn(
            f"{name}: {slots} contact slots from {len(sys_.contact_pairs)} geom pairs; with "
            "max_contacts=None every slot's rows enter each constraint solve, which is slow for "
            "a model this size: load_mjcf(..., max_contacts=K) solves only the K deepest (the "
            "same while at most K are active), or exclude pairs that never touch (<contact>"
            "<exclude>, contype/conaffinity)",
            MJCFWarning,
            stacklevel=2,
        )
    search = None
    capped = loader.solver == "Newton" and loader.iterations <= newton_steps
    if capped:
        if loader.ls_iterations <= FOLLOWED_LS_ITERATIONS:
            tolerance = loader.tolerance * loader.ls_tolerance
            inertia = None  # per island: the trace of its M
            if sys_.disable_island:  # all dofs at once: MuJoCo's meaninertia * nv, at qpos0
                inertia = float(jnp.trace(contact._at_qpos0(sys_)[1]))
            search = con.MujocoSearch(loader.ls_iterations, tolerance, inertia)
        newton_steps = max(loader.iterations, 1)
    return dataclasses.replace(
        sys_,
        max_contacts=max_contacts,
        newton_steps=newton_steps,
        hessian_form=hessian_form,
        capped_solve=capped,
        mujoco_search=search,
    )
