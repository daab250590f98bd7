"""2-D convolution whose kernel gradient XLA:CPU computes fast inside loops.

XLA:CPU runs a convolution on its fast (Eigen) path only in the canonical NHWC x HWIO layout.
The kernel gradient that JAX derives for an NHWC convolution is a convolution in another
layout (feature and batch dimensions swapped); XLA rewrites it into the canonical one at the
top level of a program but not inside a loop body (jax-ml/jax#12868, open). There it falls
back to naive loops: a learner update of the Nature CNN on 256 frames of 72x96x16 took 19 s
instead of about 1 s, and every training loop runs its update inside a scan.

`conv_general_dilated` is a drop-in for `lax.conv_general_dilated` (flax's
`nn.Conv(conv_general_dilated=...)`) whose kernel gradient is written as the canonical
convolution itself: input transposed to [C, H, W, N] (channels as the batch, batch as the
features) against the output gradient [H', W', N, O] as the kernel, dilated by the stride.
Calls it does not cover (dilations, feature groups, other layouts or ranks) go to lax as they
are, and so does every call when JAX runs on an accelerator, whose compilers have their own
kernel-gradient convolutions (cuDNN's): the rewrite is for XLA:CPU. Like any custom VJP it is
differentiated in reverse mode only (grad, vjp; not jvp).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

_NHWC = ("NHWC", "HWIO", "NHWC")


def conv_general_dilated(
    lhs: jax.Array,
    rhs: jax.Array,
    window_strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    lhs_dilation: Sequence[int] | None = None,
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: Any = None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> jax.Array:
    """`lax.conv_general_dilated`, with a loop-friendly kernel gradient for plain 2-D NHWC
    convolutions (strided, SAME/VALID/explicit non-negative padding) on the CPU backend."""
    plain = (
        jax.default_backend() == "cpu"
        and lhs.ndim == 4
        and all(d == 1 for d in (lhs_dilation or (1, 1)))
        and all(d == 1 for d in (rhs_dilation or (1, 1)))
        and feature_group_count == 1
        and batch_group_count == 1
        and preferred_element_type is None
        and lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
        == lax.conv_dimension_numbers(lhs.shape, rhs.shape, _NHWC)
    )
    if plain:
        strides = tuple(window_strides)
        if isinstance(padding, str):
            pads = lax.padtype_to_pads(lhs.shape[1:3], rhs.shape[:2], strides, padding)
        else:
            pads = [tuple(p) for p in padding]
        if all(lo >= 0 and hi >= 0 for lo, hi in pads):
            if any(lo or hi for lo, hi in pads):
                lhs = jnp.pad(lhs, ((0, 0), *pads, (0, 0)))
            return _valid_conv(lhs, rhs, strides, precision)
    return lax.conv_general_dilated(
        lhs,
        rhs,
        window_strides,
        padding,
        lhs_dilation,
        rhs_dilation,
        dimension_numbers,
        feature_group_count,
        batch_group_count,
        precision,
        preferred_element_type,
    )


def _plain_conv(x: jax.Array, w: jax.Array, strides: tuple, precision: Any) -> jax.Array:
    return lax.conv_general_dilated(
        x, w, strides, "VALID", dimension_numbers=_NHWC, precision=precision
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _valid_conv(x: jax.Array, w: jax.Array, strides: tuple, precision: Any) -> jax.Array:
    return _plain_conv(x, w, strides, precision)


def _valid_conv_fwd(x: jax.Array, w: jax.Array, strides: tuple, precision: Any) -> tuple:
    return _plain_conv(x, w, strides, precision), (x, w)


def _valid_conv_bwd(strides: tuple, precision: Any, residuals: tuple, g: jax.Array) -> tuple:
    x, w = residuals
    _, input_vjp = jax.vjp(lambda x: _plain_conv(x, w, strides, precision), x)
    (dx,) = input_vjp(g)
    # dw[a, b, c, o] = sum_{n, i, j} x[n, a + s i, b + s j, c] g[n, i, j, o]: a VALID
    # convolution of x as [C, H, W, N] with g as an [H', W', N, O] kernel dilated by s
    dw = lax.conv_general_dilated(
        x.transpose(3, 1, 2, 0),
        g.transpose(1, 2, 0, 3),
        (1, 1),
        "VALID",
        rhs_dilation=strides,
        dimension_numbers=_NHWC,
        precision=precision,
    )
    kh, kw = w.shape[:2]
    # (where the stride does not divide H - kh, offsets past the kernel come out too: cut)
    dw = dw[:, :kh, :kw, :].transpose(1, 2, 0, 3)
    return dx, dw.astype(w.dtype)


_valid_conv.defvjp(_valid_conv_fwd, _valid_conv_bwd)
