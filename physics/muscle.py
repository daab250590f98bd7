"""MuJoCo's muscle model: activation dynamics, active (gain) and passive (bias) force curves.

A muscle's length is normalized so that its length range (the actuator lengths it reaches,
computed when the model is built) maps onto its operating `range` (0.75 to 1.05 by default)
of optimal lengths; its velocity is in optimal lengths per second over `vmax`. The force is
gain * act + bias: an active force -F FL(L) FV(V) scaled by the activation act in [0, 1],
and a passive force that stretches in past the optimal length. F is the peak force (`force`,
or `scale` over the actuator's acceleration per unit force at qpos0). Parameters are
MuJoCo's gainprm/biasprm order: (range lo, range hi, force, scale, lmin, lmax, vmax, fpmax,
fvmax).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

MINVAL = 1e-15  # MuJoCo's mjMINVAL


def _positive(x: jax.Array) -> jax.Array:
    return jnp.maximum(x, MINVAL)


def _normalized(
    length: jax.Array, velocity: jax.Array, lengthrange: jax.Array, prm: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(L, V): length in optimal lengths, velocity in optimal lengths per vmax seconds."""
    optimal = (lengthrange[..., 1] - lengthrange[..., 0]) / _positive(prm[..., 1] - prm[..., 0])
    norm_length = prm[..., 0] + (length - lengthrange[..., 0]) / _positive(optimal)
    return norm_length, velocity / _positive(optimal * prm[..., 6])


def length_curve(norm_length: jax.Array, lmin: jax.Array, lmax: jax.Array) -> jax.Array:
    """FL: 1 at the optimal length 1, 0 outside [lmin, lmax]; two half-parabolas on each side
    meeting halfway (MuJoCo's mju_muscleGainLength)."""
    a, b = 0.5 * (lmin + 1), 0.5 * (1 + lmax)
    x = jnp.select(
        [norm_length <= a, norm_length <= 1, norm_length <= b],
        [
            (norm_length - lmin) / _positive(a - lmin),
            (1 - norm_length) / _positive(1 - a),
            (norm_length - 1) / _positive(b - 1),
        ],
        (lmax - norm_length) / _positive(lmax - b),
    )
    outer = (norm_length <= a) | (norm_length > b)
    curve = jnp.where(outer, 0.5 * x * x, 1 - 0.5 * x * x)
    return jnp.where((lmin <= norm_length) & (norm_length <= lmax), curve, 0.0)


def velocity_curve(norm_velocity: jax.Array, fvmax: jax.Array) -> jax.Array:
    """FV: 0 shortening at vmax or faster, 1 at rest, up to fvmax lengthening."""
    y = fvmax - 1
    return jnp.select(
        [norm_velocity <= -1, norm_velocity <= 0, norm_velocity <= y],
        [
            jnp.zeros_like(norm_velocity),
            (norm_velocity + 1) ** 2,
            fvmax - (y - norm_velocity) ** 2 / _positive(y),
        ],
        fvmax,
    )


def gain(
    length: jax.Array, velocity: jax.Array, lengthrange: jax.Array, prm: jax.Array
) -> jax.Array:
    """Active force per unit activation, -F FL(L) FV(V) (MuJoCo's mju_muscleGain), from the
    actuator's length and velocity; `prm` [..., 9] with F resolved (prm[2] > 0)."""
    norm_length, norm_velocity = _normalized(length, velocity, lengthrange, prm)
    fl = length_curve(norm_length, prm[..., 4], prm[..., 5])
    return -prm[..., 2] * fl * velocity_curve(norm_velocity, prm[..., 8])


def bias(length: jax.Array, lengthrange: jax.Array, prm: jax.Array) -> jax.Array:
    """Passive force (MuJoCo's mju_muscleBias): 0 up to the optimal length, then a half
    parabola up to halfway to lmax, where it reaches -F fpmax / 2, and linear beyond."""
    norm_length, _ = _normalized(length, jnp.zeros_like(length), lengthrange, prm)
    b = 0.5 * (1 + prm[..., 5])
    x = (norm_length - jnp.where(norm_length <= b, 1.0, b)) / _positive(b - 1)
    stretch = jnp.where(norm_length <= b, 0.5 * x * x, 0.5 + x)
    return jnp.where(norm_length <= 1, 0.0, -prm[..., 2] * prm[..., 7] * stretch)


def smoothstep(x: jax.Array) -> jax.Array:
    """MuJoCo's mju_sigmoid: 0 below 0, 1 above 1, the quintic 6x^5 - 15x^4 + 10x^3 between."""
    x = jnp.clip(x, 0.0, 1.0)
    return x * x * x * (x * (6 * x - 15) + 10)


def activation_rate(ctrl: jax.Array, act: jax.Array, dynprm: jax.Array) -> jax.Array:
    """act_dot (MuJoCo's mju_muscleDynamics): act follows ctrl (clamped to [0, 1]) with the
    activation time constant dynprm[0] (0.5 + 1.5 act) when rising and the deactivation one
    dynprm[1] / (0.5 + 1.5 act) when falling; dynprm[2] > 0 blends the two smoothly over
    that width of ctrl - act (Millard et al. 2013)."""
    level = 0.5 + 1.5 * jnp.clip(act, 0.0, 1.0)
    tau_act, tau_deact, width = dynprm[..., 0] * level, dynprm[..., 1] / level, dynprm[..., 2]
    excess = jnp.clip(ctrl, 0.0, 1.0) - act
    smooth = width >= MINVAL
    blend = smoothstep(excess / jnp.where(smooth, width, 1.0) + 0.5)
    tau = jnp.where(
        smooth, tau_deact + (tau_act - tau_deact) * blend, jnp.where(excess > 0, tau_act, tau_deact)
    )
    return excess / _positive(tau)
