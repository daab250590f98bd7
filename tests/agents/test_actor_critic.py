"""ActorCriticAgent: shapes, recurrent resets, unroll vs step-by-step acting, loss gradients."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import (
    ActorCritic,
    ActorCriticAgent,
    BoundedActions,
    DiscreteActions,
    MultiDiscreteActions,
    Trajectory,
    UnboundedActions,
    VTraceConfig,
    VTraceReturns,
    vtrace_loss,
    vtrace_returns,
    vtrace_targets,
)

OBS_SHAPE = (3, 2)
T, B = 6, 4
ACTIONS = {
    "discrete": DiscreteActions(5),
    "bounded": BoundedActions(low=(-1.0, 0.0, -3.0), high=(1.0, 2.0, 3.0)),
    "multi": MultiDiscreteActions((3, 1, 4)),  # gymnasium's MultiDiscrete: a categorical each
    "unbounded": UnboundedActions(low=(-np.inf, 0.0), high=(np.inf, np.inf)),
}


@functools.cache
def make_agent(kind, lstm):
    """Agent, params and jitted act (cached: compiling is most of these tests' time)."""
    agent = ActorCriticAgent(
        OBS_SHAPE, ACTIONS[kind], hidden_sizes=(16, 16), lstm_size=8 if lstm else None
    )
    act = jax.jit(agent.act, static_argnames="deterministic")
    return agent, jax.jit(agent.init)(jax.random.key(0)), act


def random_carry(agent, key):
    carry = agent.initial_carry(B)
    leaves, treedef = jax.tree.flatten(carry)
    keys = jax.random.split(key, len(leaves))
    noise = [jax.random.normal(k, x.shape) for k, x in zip(keys, leaves, strict=True)]
    return treedef.unflatten(noise)


# The LSTM path does not depend on the action head: the recurrent cases run on two kinds.
RECURRENT_KINDS = ("discrete", "bounded")
CASES = [
    (kind, lstm)
    for kind in ACTIONS
    for lstm in (False, True)
    if kind in RECURRENT_KINDS or not lstm
]


@pytest.mark.parametrize("kind,lstm", CASES)
def test_act_shapes_and_bounds(kind, lstm):
    agent, params, act = make_agent(kind, lstm)
    obs = jax.random.normal(jax.random.key(1), (B, *OBS_SHAPE))
    carry, out = act(params, agent.initial_carry(B), obs, jnp.ones(B, bool), jax.random.key(2))
    assert jax.tree.map(jnp.shape, carry) == jax.tree.map(jnp.shape, agent.initial_carry(B))
    assert out.log_prob.shape == (B,) and out.value.shape == (B,)
    assert out.log_prob.dtype == jnp.float32 and out.value.dtype == jnp.float32
    if kind == "discrete":
        assert out.action.shape == (B,) and out.action.dtype == jnp.int32
        np.testing.assert_array_equal(out.env_action, out.action)
    elif kind == "multi":
        assert out.action.shape == (B, 3) and out.action.dtype == jnp.int32
        assert np.all((out.action >= 0) & (out.action < np.array(ACTIONS[kind].nvec)))
        np.testing.assert_array_equal(out.env_action, out.action)
    else:
        d = len(ACTIONS[kind].low)
        assert out.action.shape == (B, d) and out.env_action.shape == (B, d)
        low, high = np.array(ACTIONS[kind].low), np.array(ACTIONS[kind].high)
        assert np.all(out.env_action >= low) and np.all(out.env_action <= high)
    _, det = act(
        params,
        agent.initial_carry(B),
        obs,
        jnp.ones(B, bool),
        jax.random.key(3),
        deterministic=True,
    )
    first = jnp.ones(B, bool)
    mode = jax.jit(
        lambda p, o: agent.distribution(
            jax.tree.map(
                lambda x: x[0],  # the one time step
                agent.network.apply(p, agent.initial_carry(B), o[None], first[None])[1][0],
            )
        ).mode()
    )
    np.testing.assert_array_equal(det.action, mode(params, obs))


def test_network_layout_and_init():
    net = ActorCritic(action_dim=2, discrete=False, hidden_sizes=(8,))
    init = lambda net: jax.jit(net.init)(
        jax.random.key(0), (), jnp.zeros((1, 1, 4)), jnp.ones((1, 1), bool)
    )["params"]
    params = init(net)
    assert set(params) == {"actor_torso", "critic_torso", "policy_head", "value_head", "log_scale"}
    np.testing.assert_array_equal(params["log_scale"], 0.0)
    np.testing.assert_array_equal(params["policy_head"]["bias"], 0.0)
    w = np.asarray(params["value_head"]["kernel"])  # orthogonal, gain 1.0
    np.testing.assert_allclose(np.linalg.norm(w), 1.0, rtol=1e-5)
    shared = ActorCritic(action_dim=2, discrete=True, separate_value_torso=False)
    params = init(shared)
    assert set(params) == {"torso", "policy_head", "value_head"}
    with pytest.raises(ValueError, match="gelu"):
        init(ActorCritic(2, True, activation="gelu"))


@pytest.mark.parametrize("kind", RECURRENT_KINDS)
def test_lstm_carry_is_reset_where_first(kind):
    agent, params, act = make_agent(kind, lstm=True)
    obs = jax.random.normal(jax.random.key(1), (B, *OBS_SHAPE))
    carry = random_carry(agent, jax.random.key(2))
    is_first = jnp.array([True, False, True, False])
    key = jax.random.key(3)
    new, out = act(params, carry, obs, is_first, key)
    new_zero, out_zero = act(params, agent.initial_carry(B), obs, is_first, key)
    new_kept, out_kept = act(params, carry, obs, jnp.zeros(B, bool), key)
    first = np.asarray(is_first)
    for a, z, k in zip(
        jax.tree.leaves((new, out)),
        jax.tree.leaves((new_zero, out_zero)),
        jax.tree.leaves((new_kept, out_kept)),
        strict=True,
    ):
        np.testing.assert_allclose(a[first], z[first], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(a[~first], k[~first], rtol=1e-6, atol=1e-6)
    # The carry matters: without a reset the outputs differ.
    assert not np.allclose(out_kept.value[first], out_zero.value[first])


@functools.cache
def make_rollout(kind, lstm):
    """Acts step by step; episodes restart mid-unroll, next_observation is the next step's obs
    except at episode ends, where it is a distinct final observation."""
    agent, params, act = make_agent(kind, lstm)
    k_obs, k_final, k_act = jax.random.split(jax.random.key(1), 3)
    observation = jax.random.normal(k_obs, (T, B, *OBS_SHAPE))
    is_first = np.zeros((T, B), bool)
    is_first[0, :] = is_first[3, 1] = is_first[2, 2] = True
    done = np.concatenate([is_first[1:], np.zeros((1, B), bool)])
    finals = jax.random.normal(k_final, (T, B, *OBS_SHAPE))
    next_observation = jnp.concatenate([observation[1:], finals[-1:]])
    next_observation = jnp.where(done[..., None, None], finals, next_observation)
    carry0 = random_carry(agent, jax.random.key(9))
    carry, outs, next_values = carry0, [], []
    for t in range(T):
        step_key = jax.random.fold_in(k_act, t)
        carry, out = act(params, carry, observation[t], jnp.asarray(is_first[t]), step_key)
        _, nxt = act(params, carry, next_observation[t], jnp.zeros(B, bool), step_key)
        outs.append(out)
        next_values.append(nxt.value)
    outs = jax.tree.map(lambda *x: jnp.stack(x), *outs)
    terminated = np.zeros((T, B), bool)
    terminated[2, 1] = True
    traj = Trajectory(
        observation=observation,
        next_observation=next_observation,
        is_first=jnp.asarray(is_first),
        action=outs.action,
        behaviour_log_prob=outs.log_prob,
        reward=jax.random.normal(jax.random.key(5), (T, B)),
        terminated=jnp.asarray(terminated),
        truncated=jnp.asarray(done & ~terminated),
        initial_carry=carry0,
    )
    return traj, outs, jnp.stack(next_values)


@pytest.mark.parametrize("kind,lstm", CASES)
def test_unroll_matches_step_by_step_acting(kind, lstm):
    agent, params, _ = make_agent(kind, lstm)
    traj, outs, next_values = make_rollout(kind, lstm)
    unrolled = jax.jit(agent.unroll)(
        params, traj.initial_carry, traj.observation, traj.next_observation, traj.is_first
    )
    assert unrolled.values.shape == (T, B) and unrolled.next_values.shape == (T, B)
    np.testing.assert_allclose(unrolled.values, outs.value, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(unrolled.next_values, next_values, rtol=1e-5, atol=1e-5)
    log_prob = agent.distribution(unrolled.dist_params).log_prob(traj.action)
    np.testing.assert_allclose(log_prob, outs.log_prob, rtol=1e-4, atol=1e-4)
    # Inside an episode, V(next_observation[t]) is V(observation[t+1]).
    same = ~np.asarray(traj.is_first[1:])
    np.testing.assert_allclose(
        unrolled.next_values[:-1][same], unrolled.values[1:][same], rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("kind,lstm", CASES)
def test_vtrace_loss_gradient_is_finite_and_on_policy_rhos_are_one(kind, lstm):
    agent, params, _ = make_agent(kind, lstm)
    traj, _, _ = make_rollout(kind, lstm)
    cfg = VTraceConfig()
    targets = jax.jit(vtrace_targets, static_argnums=(0, 3))(agent, params, traj, cfg)
    loss_fn = jax.jit(
        jax.value_and_grad(vtrace_loss, argnums=1, has_aux=True), static_argnums=(0, 4)
    )
    (loss, metrics), grads = loss_fn(agent, params, traj, targets, cfg, jax.random.key(2))
    assert np.isfinite(loss)
    leaves = jax.tree.leaves(grads)
    assert all(np.all(np.isfinite(g)) for g in leaves)
    assert sum(float(jnp.sum(jnp.abs(g))) for g in leaves) > 0
    np.testing.assert_allclose(metrics.mean_rho, 1.0, rtol=1e-4)
    assert np.isfinite(metrics.entropy) and metrics.value_loss >= 0


@pytest.mark.parametrize("kind", ACTIONS)
def test_ppo_clip_is_impalas_gradient_on_policy_and_stops_past_the_clip(kind):
    agent, params, _ = make_agent(kind, False)
    traj, _, _ = make_rollout(kind, False)
    positive = jnp.ones((T, B))  # every advantage > 0: pushing pi up past 1 + clip earns nothing
    targets = VTraceReturns(vs=jnp.zeros((T, B)), pg_advantages=positive, q_advantages=positive)
    policy_only = dict(baseline_cost=0.0, entropy_cost=0.0)
    grad = jax.jit(
        jax.grad(lambda p, tr, cfg: vtrace_loss(agent, p, tr, targets, cfg, jax.random.key(3))[0]),
        static_argnums=2,
    )
    flat = lambda tree: np.concatenate([np.ravel(x) for x in jax.tree.leaves(tree)])

    impala = flat(grad(params, traj, VTraceConfig(**policy_only)))
    clipped = flat(grad(params, traj, VTraceConfig(ppo_clip=0.2, **policy_only)))
    np.testing.assert_allclose(clipped, impala, rtol=1e-4, atol=1e-6)
    assert np.abs(impala).sum() > 0

    moved = traj._replace(behaviour_log_prob=traj.behaviour_log_prob - 0.5)  # r = e^0.5 > 1.2
    np.testing.assert_array_equal(
        flat(grad(params, moved, VTraceConfig(ppo_clip=0.2, **policy_only))), 0.0
    )
    assert np.abs(flat(grad(params, moved, VTraceConfig(ppo_clip=0.7, **policy_only)))).sum() > 0


@pytest.mark.parametrize("kind,lstm", CASES)
def test_vtrace_targets_are_vtrace_of_the_unrolled_values(kind, lstm):
    """Targets use V(observation), V(next_observation) and rho = pi / mu under `params`."""
    agent, params, _ = make_agent(kind, lstm)
    traj, _, _ = make_rollout(kind, lstm)
    cfg = VTraceConfig(discount=0.9, lambda_=0.8)
    # A behaviour policy that differs from `params`' policy, so the rhos are not all one.
    shift = jnp.linspace(-0.5, 0.5, T * B).reshape(T, B)
    traj = traj._replace(behaviour_log_prob=traj.behaviour_log_prob + shift)
    targets = jax.jit(vtrace_targets, static_argnums=(0, 3))(agent, params, traj, cfg)
    out = jax.jit(agent.unroll)(
        params, traj.initial_carry, traj.observation, traj.next_observation, traj.is_first
    )
    log_prob = agent.distribution(out.dist_params).log_prob(traj.action)
    rhos = jnp.exp(log_prob - traj.behaviour_log_prob)
    expected = vtrace_returns(
        out.values, out.next_values, traj.reward, traj.terminated, traj.truncated, rhos, cfg
    )
    np.testing.assert_allclose(targets.vs, expected.vs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(targets.pg_advantages, expected.pg_advantages, rtol=1e-4, atol=1e-4)
