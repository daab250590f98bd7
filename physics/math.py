"""Quaternion and spatial-vector algebra (MuJoCo conventions), batched over leading axes.

Quaternions are (w, x, y, z). Spatial vectors are 6-vectors ordered (angular; linear), expressed
in world orientation at a reference point, as MuJoCo's ``cdof``/``cvel``/``cinert``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp
import numpy as np

F = TypeVar("F", bound=Callable)


def float_dtype() -> np.dtype:
    """The float type the physics computes in: float64 where ``jax_enable_x64`` is on (as MJX
    and Brax do), float32 otherwise. Read when a System is built; its arrays carry it after."""
    return np.dtype(jax.dtypes.canonicalize_dtype(np.float64))


def full_precision(fn: F) -> F:
    """Traces ``fn`` with float32 matrix products. On GPUs JAX's default precision lets XLA
    use TF32 (a 10-bit mantissa), which is fine for networks but breaks dynamics that must
    match MuJoCo to 1e-4; the tiny per-world products cost the same either way."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        with jax.default_matmul_precision("float32"):
            return fn(*args, **kwargs)

    return wrapped  # type: ignore[return-value]


def jit_when_eager(fn: F, **jit_kwargs) -> F:  # noqa: ANN003
    """``fn`` jitted (``jit_kwargs`` as for jax.jit) where no argument is a tracer, ``fn``
    itself inside a transformation.

    An eager call is then one compiled program, not hundreds of operations each compiled on
    its own; inside the caller's jit, vmap or grad, ``fn`` traces inline as it would anyway
    (and its derivatives keep :func:`full_precision`: a nested jit's derivative would be
    traced outside it).

    An eager call copies numpy arguments first: on the CPU a jitted call can share a numpy
    array's memory (jax-ml/jax#37830) and read it when the computation runs, after the call
    has returned. A caller that reuses the array then changes the result, as ``mj_step`` did
    to a State built from MuJoCo's ``d.qpos`` under ``jax_enable_x64`` (dtypes alike).
    """
    jitted = jax.jit(fn, **jit_kwargs)

    @functools.wraps(fn)
    def call(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        leaves, tree = jax.tree.flatten((args, kwargs))
        if any(isinstance(x, jax.core.Tracer) for x in leaves):
            return fn(*args, **kwargs)
        owned = [np.array(x) if isinstance(x, np.ndarray) else x for x in leaves]
        args, kwargs = jax.tree.unflatten(tree, owned)
        return jitted(*args, **kwargs)

    return call  # type: ignore[return-value]


def quat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    """Hamilton product a * b."""
    aw, ax, ay, az = jnp.moveaxis(a, -1, 0)
    bw, bx, by, bz = jnp.moveaxis(b, -1, 0)
    return jnp.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conj(q: jax.Array) -> jax.Array:
    """Conjugate (the inverse of a unit quaternion)."""
    return q * jnp.array([1.0, -1.0, -1.0, -1.0])


def quat_to_mat(q: jax.Array) -> jax.Array:
    """Rotation matrix of a unit quaternion; columns are the rotated frame's axes."""
    w, x, y, z = jnp.moveaxis(q, -1, 0)
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
    return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)


def quat_normalize(q: jax.Array) -> jax.Array:
    """Unit quaternion (q must be nonzero, as MuJoCo's qpos quaternions are)."""
    return q / jnp.sqrt(jnp.sum(q * q, axis=-1, keepdims=True))


def quat_integrate(q: jax.Array, omega: jax.Array, dt: float | jax.Array) -> jax.Array:
    """q * exp(omega * dt / 2) with omega in the local frame (MuJoCo's mju_quatIntegrate).

    Written with sinc so that value and gradient stay finite at omega = 0.
    """
    n2 = jnp.sum(omega * omega, axis=-1, keepdims=True)
    theta = dt * jnp.sqrt(jnp.where(n2 > 0, n2, 1.0)) * (n2 > 0)
    # sin(theta/2)/|omega| = dt/2 * sinc(theta/2) with jnp.sinc(x) = sin(pi x)/(pi x)
    dq = jnp.concatenate(
        [jnp.cos(0.5 * theta), 0.5 * dt * jnp.sinc(theta / (2 * jnp.pi)) * omega], axis=-1
    )
    return quat_normalize(quat_mul(quat_normalize(q), dq))


def cross_motion(v: jax.Array, u: jax.Array) -> jax.Array:
    """Spatial motion cross product v x u (MuJoCo's mju_crossMotion)."""
    w, vl = v[..., :3], v[..., 3:]
    ur, ul = u[..., :3], u[..., 3:]
    return jnp.concatenate([jnp.cross(w, ur), jnp.cross(w, ul) + jnp.cross(vl, ur)], axis=-1)


def cross_force(v: jax.Array, f: jax.Array) -> jax.Array:
    """Spatial force cross product v x* f (MuJoCo's mju_crossForce)."""
    w, vl = v[..., :3], v[..., 3:]
    fr, fl = f[..., :3], f[..., 3:]
    return jnp.concatenate([jnp.cross(w, fr) + jnp.cross(vl, fl), jnp.cross(w, fl)], axis=-1)


def skew(v: jax.Array) -> jax.Array:
    """[v]x, the matrix with skew(v) @ u = v x u."""
    x, y, z = jnp.moveaxis(v, -1, 0)
    o = jnp.zeros_like(x)
    return jnp.stack(
        [jnp.stack([o, -z, y], -1), jnp.stack([z, o, -x], -1), jnp.stack([-y, x, o], -1)], -2
    )


def spatial_inertia(mass: jax.Array, inertia: jax.Array, offset: jax.Array) -> jax.Array:
    """6x6 spatial inertia of a body with centre of mass at ``offset`` from the reference point.

    ``inertia`` is the 3x3 rotational inertia about the centre of mass in world orientation.
    Maps spatial velocity (angular; linear at the reference point) to momentum (angular about the
    reference point; linear).
    """
    r = skew(offset)
    m = mass[..., None, None]
    top = jnp.concatenate([inertia - m * mat_mul(r, r), m * r], axis=-1)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=inertia.dtype), r.shape)
    bottom = jnp.concatenate([-m * r, m * eye], axis=-1)
    return jnp.concatenate([top, bottom], axis=-2)


# Small matrix-vector products are a dot_general: XLA:CPU runs the vmapped batch of them faster
# than an unrolled multiply-add (Ant step 10-20% faster, its mass matrix 7 -> 4 us per world).
# Small matrix-matrix products are unrolled over the contracted axis, which XLA fuses into one
# loop (faster than a batched dot of tiny matrices, and more than 10x when one side is shared
# by all worlds under vmap).


def mat_vec(m: jax.Array, v: jax.Array) -> jax.Array:
    """m @ v for stacks of small matrices and vectors (broadcasting leading axes)."""
    return jnp.einsum("...ij,...j->...i", m, v)


def mat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    """a @ b for stacks of small matrices (broadcasting leading axes)."""
    return sum(a[..., :, k : k + 1] * b[..., k : k + 1, :] for k in range(a.shape[-1]))


def static_matmul(a: np.ndarray, x: jax.Array) -> jax.Array:
    """a @ x for a constant (numpy) matrix ``a`` and x of shape [k, ...], skipping zero columns.

    Used with the 0/1 tree matrices (subtree and ancestor sums).
    """
    out = jnp.zeros((a.shape[0], *x.shape[1:]), x.dtype)
    for k in np.nonzero(np.any(a != 0, axis=0))[0]:
        col = jnp.asarray(a[:, k], x.dtype).reshape((-1,) + (1,) * (x.ndim - 1))
        out = out + col * x[k]
    return out


def quat_to_rotvec(q: jax.Array) -> jax.Array:
    """Rotation vector (axis * angle, angle in (-pi, pi]) of unit quaternions [..., 4]
    (w first), as MuJoCo's mju_quat2Vel with dt = 1."""
    q = quat_normalize(q)
    xyz = q[..., 1:]
    sin_half = jnp.sqrt(jnp.sum(xyz * xyz, axis=-1) + 1e-30)
    angle = 2.0 * jnp.arctan2(sin_half, q[..., 0])
    angle = jnp.where(angle > jnp.pi, angle - 2.0 * jnp.pi, angle)
    return xyz * (angle / sin_half)[..., None]


def axis_angle_to_mat(axis: jax.Array, angle: jax.Array) -> jax.Array:
    """Rotation matrix about unit ``axis`` by ``angle`` (Rodrigues)."""
    k = skew(axis)
    s, c = jnp.sin(angle)[..., None, None], jnp.cos(angle)[..., None, None]
    return jnp.eye(3, dtype=axis.dtype) + s * k + (1 - c) * mat_mul(k, k)


def mat_to_quat(r: jax.Array) -> jax.Array:
    """Unit quaternion (w >= 0 where possible) of a rotation matrix, without branching.

    Each row of Shepperd's 4x4 matrix is proportional to q; the row with the largest diagonal
    is the best conditioned.
    """
    t = r[..., 0, 0] + r[..., 1, 1] + r[..., 2, 2]
    diag = jnp.stack(
        [1 + t, 1 + 2 * r[..., 0, 0] - t, 1 + 2 * r[..., 1, 1] - t, 1 + 2 * r[..., 2, 2] - t],
        axis=-1,
    )
    w = jnp.stack(
        [
            1 + t,
            r[..., 2, 1] - r[..., 1, 2],
            r[..., 0, 2] - r[..., 2, 0],
            r[..., 1, 0] - r[..., 0, 1],
        ],
        -1,
    )
    x = jnp.stack(
        [
            r[..., 2, 1] - r[..., 1, 2],
            1 + 2 * r[..., 0, 0] - t,
            r[..., 0, 1] + r[..., 1, 0],
            r[..., 0, 2] + r[..., 2, 0],
        ],
        -1,
    )
    y = jnp.stack(
        [
            r[..., 0, 2] - r[..., 2, 0],
            r[..., 0, 1] + r[..., 1, 0],
            1 + 2 * r[..., 1, 1] - t,
            r[..., 1, 2] + r[..., 2, 1],
        ],
        -1,
    )
    z = jnp.stack(
        [
            r[..., 1, 0] - r[..., 0, 1],
            r[..., 0, 2] + r[..., 2, 0],
            r[..., 1, 2] + r[..., 2, 1],
            1 + 2 * r[..., 2, 2] - t,
        ],
        -1,
    )
    cands = jnp.stack([w, x, y, z], axis=-2)  # [..., 4 candidates, 4 components]
    best = jnp.argmax(diag, axis=-1)
    q = jnp.take_along_axis(cands, best[..., None, None], axis=-2)[..., 0, :]
    q = q / jnp.linalg.norm(q, axis=-1, keepdims=True)
    return q * jnp.where(q[..., :1] < 0, -1.0, 1.0)
