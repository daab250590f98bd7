"""agents.conv: the same values and gradients as lax's convolution, inside loops too."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from agents.conv import conv_general_dilated
from agents.torsos import ImpalaCNN, NatureCNN

NHWC = ("NHWC", "HWIO", "NHWC")


def _both(x, w, strides, padding, **kwargs):
    """(ours, lax's): output and the gradients of a weighted sum of it."""

    def loss(conv):
        def f(x, w):
            y = conv(x, w, strides, padding, dimension_numbers=NHWC, **kwargs)
            return jnp.sum(y * jnp.cos(jnp.arange(y.size, dtype=y.dtype).reshape(y.shape)))

        return jax.jit(jax.value_and_grad(f, argnums=(0, 1)))(x, w)

    return loss(conv_general_dilated), loss(lax.conv_general_dilated)


@pytest.mark.parametrize(
    "shape, kernel, strides, padding",
    [
        ((2, 17, 23, 3), (8, 8, 3, 5), (4, 4), "VALID"),  # Nature CNN's first layer, odd sizes
        ((2, 9, 11, 4), (4, 4, 4, 6), (2, 2), "VALID"),  # the stride leaves rows unused
        ((3, 8, 8, 2), (3, 3, 2, 4), (1, 1), "SAME"),  # IMPALA's
        ((2, 10, 7, 3), (3, 2, 3, 2), (2, 3), "SAME"),  # rectangular, uneven
        ((2, 6, 6, 2), (3, 3, 2, 2), (1, 1), [(1, 2), (0, 1)]),  # explicit padding
    ],
)
def test_values_and_gradients_match_lax(shape, kernel, strides, padding):
    kx, kw = jax.random.split(jax.random.PRNGKey(0))
    x, w = jax.random.normal(kx, shape), jax.random.normal(kw, kernel)
    (ours, ours_grads), (theirs, their_grads) = _both(x, w, strides, padding)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-4)
    for a, b in zip(ours_grads, their_grads, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_calls_it_does_not_cover_are_lax_s():
    """Dilated kernels and NCHW layouts go to lax unchanged."""
    x = jax.random.normal(jax.random.PRNGKey(1), (2, 9, 9, 3))
    w = jax.random.normal(jax.random.PRNGKey(2), (3, 3, 3, 4))
    (ours, grads), (theirs, their_grads) = _both(x, w, (1, 1), "VALID", rhs_dilation=(2, 2))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    np.testing.assert_allclose(grads[1], their_grads[1], rtol=1e-4, atol=1e-4)
    nchw = ("NCHW", "OIHW", "NCHW")
    xc, wc = x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1)
    np.testing.assert_allclose(
        conv_general_dilated(xc, wc, (1, 1), "SAME", dimension_numbers=nchw),
        lax.conv_general_dilated(xc, wc, (1, 1), "SAME", dimension_numbers=nchw),
        rtol=1e-5,
    )


@pytest.mark.parametrize("torso", [NatureCNN(dense_size=16), ImpalaCNN((4, 8), dense_size=16)])
def test_torso_gradients_in_a_scan_match_lax_s(torso):
    """Kernel gradients taken inside a loop body (where XLA:CPU does not rewrite lax's into
    the canonical layout) equal lax's, for the torsos that use it."""
    obs = jax.random.randint(jax.random.PRNGKey(3), (4, 36, 36, 4), 0, 256).astype(jnp.uint8)
    params = torso.init(jax.random.PRNGKey(4), obs)
    peer = torso.clone(conv=lax.conv_general_dilated)

    def summed_grads(module):
        def body(total, _):
            g = jax.grad(lambda p: jnp.sum(module.apply(p, obs) ** 2))(params)
            return jax.tree.map(jnp.add, total, g), None

        zeros = jax.tree.map(jnp.zeros_like, params)
        return jax.jit(lambda: lax.scan(body, zeros, None, length=2)[0])()

    ours, theirs = summed_grads(torso), summed_grads(peer)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4)
