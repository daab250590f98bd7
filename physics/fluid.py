"""Fluid forces: MuJoCo's inertia-box model of a medium (``<option density viscosity wind>``).

Each body with mass is treated as the uniform box that has its mass and principal moments of
inertia, aligned with its principal axes (MuJoCo's inertial frame). In that frame, with the
body's angular velocity w and the linear velocity v of its centre of mass relative to the
wind, the medium pushes back with

    viscous (Stokes, for the sphere of diameter d = mean box side):
        torque -pi d^3 viscosity w,    force -3 pi d viscosity v
    quadratic drag, per axis i (the other two axes j, k):
        torque_i -density b_i (b_j^4 + b_k^4) |w_i| w_i / 64
        force_i  -density b_j b_k |v_i| v_i / 2

applied at the centre of mass (MuJoCo's mj_inertiaBoxFluidModel, part of qfrc_passive).
MuJoCo's other model, per-geom ellipsoids (``fluidshape="ellipsoid"``), is refused at load.
Swimmer-style models (Gymnasium's Swimmer, dm_control's swimmer and fish) use this one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from physics import math
from physics.kinematics import Kinematics
from physics.system import System

MINVAL = 1e-15  # MuJoCo's mjMINVAL: bodies lighter than this feel no fluid


@math.full_precision
def fluid_force(sys: System, kin: Kinematics, cvel: jax.Array) -> jax.Array:
    """Generalized fluid forces [nv] (MuJoCo's qfrc_fluid) at the state's kinematics and cvel."""
    topo = sys.topology
    mass = sys.body_mass
    moving = mass >= MINVAL
    safe_mass = jnp.where(moving, mass, 1.0)
    frame = sys.body_iframe  # principal axes in the body frame (columns)
    principal = jnp.einsum("bji,bjk,bki->bi", frame, sys.body_inertia, frame)
    i0, i1, i2 = principal[:, 0], principal[:, 1], principal[:, 2]
    spread = jnp.stack([i1 + i2 - i0, i0 + i2 - i1, i0 + i1 - i2], axis=-1)
    box = jnp.sqrt(jnp.maximum(spread, MINVAL) / safe_mass[:, None] * 6.0)

    ximat = jnp.einsum("bij,bjk->bik", kin.xmat, frame)  # inertial frame in the world
    ref = kin.subtree_com[topo.body_root]
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
    # the wrench about the tree's com (cdof's reference point), summed over each subtree
    torque_ref = torque_w + jnp.cross(kin.xipos - ref, force_w)
    wrench = jnp.where(moving[:, None], jnp.concatenate([torque_ref, force_w], -1), 0.0)
    subtree = math.static_matmul(topo.body_ancestor, wrench)
    return jnp.sum(kin.cdof * subtree[topo.dof_body], axis=-1)
