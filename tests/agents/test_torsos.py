"""Torsos: the convolutional ones' output shapes and uint8 scaling, a user's own module, and
gradients through both agents."""

import flax.linen as nn
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
        _, (logits, value), _ = agent.network.apply(p, (), obs[None], first[None])
        return jnp.mean(value**2) + jnp.mean(jax.nn.logsumexp(logits, axis=-1))

    grads = jax.jit(jax.grad(loss))(params)
    assert _finite_nonzero(grads["params"]["torso"])

    # uint8 frames are scaled to [0, 1] inside: they give what the scaled float32 frames give
    apply = jax.jit(lambda o: agent.network.apply(params, (), o[None], first[None])[1][1])
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


class OwnTorso(nn.Module):
    """A user's torso: what the config's `module:attribute` resolves to."""

    width: int = 12

    @nn.compact
    def __call__(self, obs):
        return nn.tanh(nn.Dense(self.width)(obs.reshape(obs.shape[0], -1)))


def test_own_module_torso_in_both_agents():
    actor_critic = ActorCriticAgent((3, 2), DiscreteActions(2), lstm_size=8, torso=OwnTorso())
    r2d2 = R2D2Agent((3, 2), 2, lstm_size=8, head_size=8, torso=OwnTorso(width=5))
    obs = jax.random.normal(jax.random.PRNGKey(1), (4, 3, 2))
    first, zeros = jnp.ones(4, bool), jnp.zeros(4)
    for agent, width in ((actor_critic, 12), (r2d2, 5)):
        params = agent.init(jax.random.PRNGKey(0))
        assert params["params"]["torso"]["Dense_0"]["kernel"].shape == (6, width)
        assert params["params"]["lstm"]["ii"]["kernel"].shape[0] == width + (
            3 if agent is r2d2 else 0  # R2D2's core also sees the previous action and reward
        )

        def loss(p, agent=agent):
            if agent is r2d2:
                _, q = agent.step(p, agent.initial_carry(4), obs, zeros.astype(int), zeros, first)
                return jnp.mean(q**2)
            carry = agent.initial_carry(4)
            _, (logits, value), _ = agent.network.apply(p, carry, obs[None], first[None])
            return jnp.mean(value**2) + jnp.mean(jax.nn.logsumexp(logits, axis=-1))

        assert _finite_nonzero(jax.grad(loss)(params)["params"]["torso"])


def test_torso_that_does_not_return_features_is_refused():
    class PerStep(nn.Module):
        @nn.compact
        def __call__(self, obs):
            return nn.Dense(4)(obs)  # [B, 3, 4]: no single feature vector per observation

    with pytest.raises(
        ValueError, match=r"PerStep returned shape \(1, 3, 4\).*\[batch, features\]"
    ):
        ActorCriticAgent((3, 2), DiscreteActions(2), torso=PerStep()).init(jax.random.PRNGKey(0))
