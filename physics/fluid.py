"""Fluid forces of a medium (``<option density viscosity wind>``): MuJoCo's two models.

Inertia-box model (the default). Each body with mass is treated as the uniform box that has
its mass and principal moments of inertia, aligned with its principal axes (MuJoCo's inertial
frame). In that frame, with the body's angular velocity w and the linear velocity v of its
centre of mass relative to the wind, the medium pushes back with

    viscous (Stokes, for the sphere of diameter d = mean box side):
        torque -pi d^3 viscosity w,    force -3 pi d viscosity v
    quadratic drag, per axis i (the other two axes j, k):
        torque_i -density b_i (b_j^4 + b_k^4) |w_i| w_i / 64
        force_i  -density b_j b_k |v_i| v_i / 2

applied at the centre of mass (MuJoCo's mj_inertiaBoxFluidModel, part of qfrc_passive).
Swimmer-style models (Gymnasium's Swimmer, dm_control's swimmer and fish) use this one.

Ellipsoid model (``fluidshape="ellipsoid"`` on a geom; MuJoCo's mj_ellipsoidFluidModel). A
body with such a geom takes this model instead: each of its ellipsoid geoms, as the ellipsoid
of its semi-axes, feels in its own frame (w, v its angular velocity and the velocity of its
origin relative to the wind)

    added mass: with p = density m_v v and L = density I_v w (m_v, I_v the virtual mass and
        inertia of the fluid moved along, from the ellipsoid's shape at load time),
        force p x w, torque p x v + L x w
    Magnus lift: c_M density volume (w x v)
    Kutta lift: c_K density cos(alpha) A_proj ((n x v) x v), n the normal of the ellipsoid's
        cross-section seen along v, A_proj that cross-section's area
    drag: linear (Stokes, the sphere of the mean semi-axis) plus quadratic: blunt c_B on
        A_proj and slender c_S on the rest of the largest cross-section for the force; for the
        torque, angular c_A and slender c_S on the ellipsoid's moments about each axis

applied at the geom's origin. The coefficients are the geom's ``fluidcoef`` (c_B, c_S, c_A,
c_K, c_M). Forces are differentiable everywhere, at rest too (the norms' gradients are taken
as 0 at 0).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from physics import math
from physics.kinematics import Kinematics
from physics.system import GEOM_CAPSULE, GEOM_CYLINDER, GEOM_SPHERE, System

MINVAL = 1e-15  # MuJoCo's mjMINVAL: bodies lighter than this feel no fluid
EPS = 1e-14  # MuJoCo's mjEPS
FLUIDCOEF = (0.5, 0.25, 1.5, 1.0, 1.0)  # blunt, slender, angular drag; Kutta, Magnus lift

# The 15-point Gauss-Kronrod rule (QUADPACK's qk15) mapped onto [0, 1]: its nodes up to the
# midpoint and their weights, rounded to 8 decimals as MuJoCo tabulates them (so the virtual
# masses match MuJoCo's to rounding; the full-precision rule moves them by up to 5e-7).
_K15_NODES = np.array(
    [0.00427231, 0.02544604, 0.06756779, 0.12923441, 0.20695638, 0.29707742, 0.39610752, 0.5]
)
_K15_WEIGHTS = np.array(
    [0.01146766, 0.03154605, 0.05239501, 0.07032663, 0.08450236, 0.09517529, 0.10221647, 0.10474107]
)


def _quadrature() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lambda, d lambda / dx, weight) at the K15 nodes, mapped from [0, 1] onto [0, inf) by
    lambda = x^3 / (1 - x)^2."""
    x = np.concatenate([_K15_NODES, 1 - _K15_NODES[-2::-1]])
    w = np.concatenate([_K15_WEIGHTS, _K15_WEIGHTS[-2::-1]])
    return x**3 / (1 - x) ** 2, x * x * (3 - x) / (1 - x) ** 3, w


_LAMBDA, _DLAMBDA, _WEIGHT = _quadrature()


def added_mass_kappa(a: float, b: float, c: float) -> float:
    """Lamb's alpha_0 = a b c int_0^inf dl / ((a^2 + l) ((a^2 + l) (b^2 + l) (c^2 + l))^(1/2))
    of the ellipsoid with semi-axes a, b, c: its virtual mass along a is volume alpha_0 /
    (2 - alpha_0). By K15 quadrature in l / s, s = (a^3 b c)^(2/5) (dimensionless)."""
    scale = (a**3 * b * c) ** 0.4
    lam = scale * _LAMBDA
    ia, ib, ic = 1 + lam / a**2, 1 + lam / b**2, 1 + lam / c**2
    return float(np.sum(scale * _DLAMBDA / (ia * np.sqrt(ia * ib * ic)) * _WEIGHT) / a**2)


def ellipsoid_coefficients(semiaxes: np.ndarray, fluidcoef: np.ndarray) -> np.ndarray:
    """[12] a geom's row of MuJoCo's geom_fluid for the ellipsoid model: 1, the five
    ``fluidcoef``, the virtual mass [3] and virtual inertia [3] of its ellipsoid."""
    dx, dy, dz = (float(s) for s in semiaxes)
    volume = 4.0 / 3.0 * np.pi * dx * dy * dz
    kx, ky, kz = (
        added_mass_kappa(dx, dy, dz),
        added_mass_kappa(dy, dz, dx),
        added_mass_kappa(dz, dx, dy),
    )

    def inertia_factor(b: float, c: float, kb: float, kc: float) -> float:
        # (b^2 - c^2)^2 |kc - kb| / |2 (b^2 - c^2) + (b^2 + c^2)(kb - kc)|: the numerator's
        # and the denominator's signs agree, so both are taken absolute
        diff = b * b - c * c
        return diff**2 * abs(kc - kb) / max(EPS, abs(2 * diff + (b * b + c * c) * (kb - kc)))

    mass = [volume * k / max(EPS, 2 - k) for k in (kx, ky, kz)]
    inertia = [
        volume * inertia_factor(dy, dz, ky, kz) / 5,
        volume * inertia_factor(dz, dx, kz, kx) / 5,
        volume * inertia_factor(dx, dy, kx, ky) / 5,
    ]
    return np.array([1.0, *fluidcoef, *mass, *inertia], np.float64)


def semiaxes(geom_type: int, size: np.ndarray | jax.Array) -> np.ndarray | jax.Array:
    """[..., 3] the semi-axes of a geom's equivalent ellipsoid (MuJoCo's mju_geomSemiAxes):
    a sphere's radius thrice, a capsule's radius, radius and half-length plus radius, a
    cylinder's radius, radius and half-length, the size of anything else."""
    r, h = size[..., 0], size[..., 1]
    xp = jnp if isinstance(size, jax.Array) else np
    if geom_type == GEOM_SPHERE:
        return xp.stack([r, r, r], axis=-1)
    if geom_type == GEOM_CAPSULE:
        return xp.stack([r, r, h + r], axis=-1)
    if geom_type == GEOM_CYLINDER:
        return xp.stack([r, r, h], axis=-1)
    return size


def _norm(x: jax.Array) -> jax.Array:
    """Euclidean norm over the last axis, with a zero (not NaN) gradient at exactly 0."""
    sq = jnp.sum(x * x, axis=-1)
    return jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0)


def _quotient(a: jax.Array, b: jax.Array) -> jax.Array:
    """a / b, and 0 (with zero gradients) where b is 0."""
    ok = b > 0
    return jnp.where(ok, a / jnp.where(ok, b, 1.0), 0.0)


def ellipsoid_wrench(
    w: jax.Array,
    v: jax.Array,
    size: jax.Array,
    fluid: jax.Array,
    density: jax.Array,
    viscosity: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """(torque, force) [..., 3] of the medium on an ellipsoid of semi-axes `size` moving with
    angular velocity w and velocity v (its own frame, relative to the wind); `fluid` its
    geom_fluid row (MuJoCo's mj_addedMassForces and mj_viscousForces)."""
    blunt, slender, angular, kutta, magnus = (fluid[..., i, None] for i in range(1, 6))
    virtual_mass, virtual_inertia = fluid[..., 6:9], fluid[..., 9:12]
    density, viscosity = density[..., None], viscosity[..., None]

    # added mass
    momentum, angular_momentum = density * virtual_mass * v, density * virtual_inertia * w
    force = jnp.cross(momentum, w)
    torque = jnp.cross(momentum, v) + jnp.cross(angular_momentum, w)

    s0, s1, s2 = size[..., 0], size[..., 1], size[..., 2]
    volume = (4.0 / 3.0 * jnp.pi * s0 * s1 * s2)[..., None]
    d_max, d_min = jnp.max(size, axis=-1), jnp.min(size, axis=-1)
    d_mid = jnp.sum(size, axis=-1) - d_max - d_min
    area_max = (jnp.pi * d_max * d_mid)[..., None]

    # the cross-section seen along v: (not unit) normal n, area, cos(angle between n and v)
    face = jnp.stack([s1 * s2, s2 * s0, s0 * s1], axis=-1)
    proj_denom = jnp.sum(face**4 * v * v, axis=-1, keepdims=True)
    proj_num = jnp.sum((face * v) ** 2, axis=-1, keepdims=True)
    # (guarded at v = 0 only: MuJoCo 4's forces stay quadratic in v down to the smallest
    # speeds, measured; a MINVAL floor under proj_num or speed * proj_denom would bend them)
    speed = _norm(v)[..., None]
    ratio = _quotient(proj_denom, proj_num)
    area = jnp.pi * jnp.where(ratio > 0, jnp.sqrt(jnp.where(ratio > 0, ratio, 1.0)), 0.0)
    normal = face**2 * v
    cos_alpha = _quotient(proj_num, speed * proj_denom)
    circulation = kutta * density * cos_alpha * area * jnp.cross(normal, v)
    lift = magnus * density * volume * jnp.cross(w, v) + jnp.cross(circulation, v)

    # linear (Stokes, on the sphere of the mean semi-axis) plus quadratic drag
    diameter = (2.0 / 3.0 * jnp.sum(size, axis=-1))[..., None]
    moment_max = (8.0 / 15.0 * jnp.pi * d_mid * d_max**4)[..., None]
    other = jnp.maximum(jnp.roll(size, -1, axis=-1), jnp.roll(size, -2, axis=-1))
    moment = 8.0 / 15.0 * jnp.pi * size * other**4  # about each axis, the widest way
    spin = w * (angular * moment + slender * (moment_max - moment))
    drag_force = viscosity * 3.0 * jnp.pi * diameter + density * speed * (
        area * blunt + slender * (area_max - area)
    )
    drag_torque = viscosity * jnp.pi * diameter**3 + density * _norm(spin)[..., None]
    return torque - drag_torque * w, force + lift - drag_force * v


def _box_wrenches(sys: System, kin: Kinematics, cvel: jax.Array, moving: jax.Array) -> jax.Array:
    """[nbody, 6] the inertia-box model's torque (about each tree's com) and force on each body
    where `moving`, 0 elsewhere."""
    mass = sys.body_mass
    safe_mass = jnp.where(moving, mass, 1.0)
    frame = sys.body_iframe  # principal axes in the body frame (columns)
    principal = jnp.einsum("bji,bjk,bki->bi", frame, sys.body_inertia, frame)
    i0, i1, i2 = principal[:, 0], principal[:, 1], principal[:, 2]
    spread = jnp.stack([i1 + i2 - i0, i0 + i2 - i1, i0 + i1 - i2], axis=-1)
    box = jnp.sqrt(jnp.maximum(spread, MINVAL) / safe_mass[:, None] * 6.0)

    ximat = jnp.einsum("bij,bjk->bik", kin.xmat, frame)  # inertial frame in the world
    ref = kin.subtree_com[sys.topology.body_root]
    ang_w = cvel[:, :3]
    lin_w = cvel[:, 3:] + jnp.cross(ang_w, kin.xipos - ref) - sys.wind
    to_local = jnp.swapaxes(ximat, -1, -2)
    w, v = math.mat_vec(to_local, ang_w), math.mat_vec(to_local, lin_w)

    diam = jnp.mean(box, axis=-1, keepdims=True)
    torque = -jnp.pi * diam**3 * sys.viscosity * w
    force = -3.0 * jnp.pi * diam * sys.viscosity * v
    b4 = box**4
    others4 = jnp.stack([b4[:, 1] + b4[:, 2], b4[:, 0] + b4[:, 2], b4[:, 0] + b4[:, 1]], -1)
    torque -= sys.density * box * others4 * jnp.abs(w) * w / 64.0
    face = jnp.stack([box[:, 1] * box[:, 2], box[:, 0] * box[:, 2], box[:, 0] * box[:, 1]], -1)
    force -= 0.5 * sys.density * face * jnp.abs(v) * v

    torque_w, force_w = math.mat_vec(ximat, torque), math.mat_vec(ximat, force)
    torque_ref = torque_w + jnp.cross(kin.xipos - ref, force_w)
    return jnp.where(moving[:, None], jnp.concatenate([torque_ref, force_w], -1), 0.0)


def _ellipsoid_wrenches(
    sys: System, kin: Kinematics, cvel: jax.Array, moving: jax.Array
) -> jax.Array:
    """[nbody, 6] the ellipsoid model's torque (about each tree's com) and force, summed over
    each body's fluid ellipsoids, on the bodies with mass."""
    geoms = np.asarray(sys.fluid_ellipsoids)
    body = np.asarray(sys.geom_body)[geoms]
    size = jnp.stack([semiaxes(sys.geom_type[g], sys.geom_size[g]) for g in geoms])
    rot, pos = kin.geom_xmat[geoms], kin.geom_xpos[geoms]
    ref = kin.subtree_com[sys.topology.body_root[body]]
    ang_w = cvel[body, :3]
    lin_w = cvel[body, 3:] + jnp.cross(ang_w, pos - ref) - sys.wind
    to_local = jnp.swapaxes(rot, -1, -2)
    w, v = math.mat_vec(to_local, ang_w), math.mat_vec(to_local, lin_w)
    fluid = sys.geom_fluid[geoms]
    torque, force = ellipsoid_wrench(w, v, size, fluid, sys.density, sys.viscosity)
    scale = fluid[:, :1]  # the geom's interaction coefficient (MuJoCo reads it as 0 or 1)
    torque_w, force_w = scale * math.mat_vec(rot, torque), scale * math.mat_vec(rot, force)
    wrench = jnp.concatenate([torque_w + jnp.cross(pos - ref, force_w), force_w], -1)
    wrench = jnp.where(moving[body][:, None], wrench, 0.0)
    return jnp.zeros((sys.nbody, 6), wrench.dtype).at[body].add(wrench)


@math.full_precision
def fluid_force(sys: System, kin: Kinematics, cvel: jax.Array) -> jax.Array:
    """Generalized fluid forces [nv] (MuJoCo's qfrc_fluid) at the state's kinematics and cvel:
    the ellipsoid model on the bodies with a fluid ellipsoid, the inertia-box one on the rest."""
    moving = sys.body_mass >= MINVAL
    by_ellipsoids = np.zeros(sys.nbody, bool)
    by_ellipsoids[np.asarray(sys.geom_body, np.int64)[list(sys.fluid_ellipsoids)]] = True
    wrench = _box_wrenches(sys, kin, cvel, moving & ~by_ellipsoids)
    if sys.fluid_ellipsoids:
        wrench = wrench + _ellipsoid_wrenches(sys, kin, cvel, moving)
    subtree = math.static_matmul(sys.topology.body_ancestor, wrench)  # about each tree's com
    return jnp.sum(kin.cdof * subtree[sys.topology.dof_body], axis=-1)
