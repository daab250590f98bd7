"""Convolutional torsos: output shapes, uint8 scaling, and gradients through both agents."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import ActorCriticAgent, DiscreteActions
from agents.r2d2 import R2D2Agent
from agents.torsos import ImpalaCNN, NatureCNN

ATARI = (84, 84, 4)
GRF_SMM = (72, 96, 16)
SMALL = (36, 44, 4)  # the smallest sizes the torsos accept, for quick forward/grad tests


@pytest.mark.parametrize(
    ("torso", "shape", "features", "conv_out"),
    [
        (NatureCNN(), ATARI, 512, (7, 7, 64)),  # the DQN paper's 7x7x64 before the dense layer
        (NatureCNN(), GRF_SMM, 512, (5, 8, 64)),
        (ImpalaCNN(), ATARI, 256, (11, 11, 32)),
        (ImpalaCNN(), GRF_SMM, 256, (9, 12, 32)),
    ],
)
def test_torso_shapes(torso, shape, features, conv_out):
    obs = jnp.zeros((3, *shape), jnp.uint8)
    params = jax.eval_shape(torso.init, jax.random.PRNGKey(0), obs)
    out = jax.eval_shape(torso.apply, params, obs)
    assert out.shape == (3, features) and out.dtype == jnp.float32
    dense_in = params["params"]["dense"]["kernel"].shape[0]
    assert dense_in == int(np.prod(conv_out))


def _finite_nonzero(grads):
    leaves = jax.tree.leaves(grads)
    assert all(np.all(np.isfinite(g)) for g in leaves)
    return sum(float(jnp.sum(jnp.abs(g))) for g in leaves) > 0


def test_actor_critic_conv_forward_and_grad():
    agent = ActorCriticAgent(SMALL, DiscreteActions(6), torso="nature_cnn")
    params = jax.jit(agent.init)(jax.random.PRNGKey(0))
    assert "torso" in params["params"] and "Conv_0" in params["params"]["torso"]
    obs = jax.random.randint(jax.random.PRNGKey(1), (4, *SMALL), 0, 256).astype(jnp.uint8)
    first = jnp.ones(4, bool)
    _, out = agent.act(params, agent.initial_carry(4), obs, first, jax.random.PRNGKey(2))
    assert out.action.shape == (4,) and out.value.shape == (4,)

    def loss(p):
        _, (logits, value) = agent.network.apply(p, (), obs, first)
        return jnp.mean(value**2) + jnp.mean(jax.nn.logsumexp(logits, axis=-1))

    grads = jax.jit(jax.grad(loss))(params)
    assert _finite_nonzero(grads["params"]["torso"])

    # uint8 frames are scaled to [0, 1] inside: they give what the scaled float32 frames give
    apply = jax.jit(lambda o: agent.network.apply(params, (), o, first)[1][1])
    scaled = obs.astype(jnp.float32) / 255.0
    np.testing.assert_allclose(apply(obs), apply(scaled), rtol=1e-5, atol=1e-6)
    assert not np.allclose(apply(obs), apply(255.0 * scaled))


def test_r2d2_conv_forward_and_grad():
    agent = R2D2Agent(SMALL, 19, lstm_size=32, head_size=32, torso="nature_cnn")
    params = jax.jit(agent.init)(jax.random.PRNGKey(0))
    t, b = 2, 2
    obs = jax.random.randint(jax.random.PRNGKey(1), (t, b, *SMALL), 0, 256).astype(jnp.uint8)
    zeros = jnp.zeros((t, b))
    first = jnp.zeros((t, b), bool).at[0].set(True)

    def loss(p):
        carry = agent.initial_carry(b)
        _, q, _ = agent.unroll(p, carry, obs, zeros.astype(jnp.int32), zeros, first)
        assert q.shape == (t, b, 19)
        return jnp.mean(q**2)

    assert jax.eval_shape(loss, params).shape == ()
    grads = jax.jit(jax.grad(loss))(params)
    assert _finite_nonzero(grads["params"]["torso"])


def test_unknown_torso_is_refused():
    with pytest.raises(ValueError, match="unknown torso 'resnet'"):
        ActorCriticAgent((4,), DiscreteActions(2), torso="resnet").init(jax.random.PRNGKey(0))
