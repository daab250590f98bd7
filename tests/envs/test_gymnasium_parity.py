"""Our CartPole and Pendulum against gymnasium's own implementations, step by step.

Both envs start from equal states (gymnasium's float64 `.state` set from our float32 numbers)
and get equal random actions; observation, reward and termination are compared at every step,
and both are put in a fresh equal state when an episode ends (CartPole) or every 200 steps
(Pendulum, which never terminates).

CartPole runs free (float32 vs float64 stays ~1e-6 over whole random-action episodes).
Pendulum is re-synced every step, i.e. one-step transitions from the states along our
trajectory are compared: free-running, float32 rounding is amplified near the unstable upright
position and reaches ~5e-3 in some 200-step episodes, which says nothing about correctness.
"""

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from accelrl.envs.cartpole import CartPole, CartPoleState
from accelrl.envs.pendulum import Pendulum, PendulumState

NUM_STEPS = 600


def _sync(gym_env, numbers: np.ndarray) -> None:
    gym_env.state = numbers.astype(np.float64)
    gym_env.steps_beyond_terminated = None  # CartPole's post-termination bookkeeping.


def test_cartpole_matches_gymnasium():
    """Whole episodes without re-syncing: float32 vs float64 stays within 1e-5 (seen ~1e-6)."""
    rng = np.random.default_rng(0)
    ours = CartPole()
    step = jax.jit(ours.step)
    theirs = gymnasium.make("CartPole-v1").unwrapped
    theirs.reset(seed=0)

    def fresh_state() -> CartPoleState:
        numbers = rng.uniform(-0.05, 0.05, 4).astype(np.float32)
        _sync(theirs, numbers)
        return CartPoleState(*(jnp.float32(v) for v in numbers))

    state, episodes = fresh_state(), 0
    for t in range(NUM_STEPS):
        action = int(rng.integers(2))
        state, timestep = step(state, jnp.int32(action))
        observation, reward, terminated, truncated, _ = theirs.step(action)
        np.testing.assert_allclose(timestep.observation, observation, atol=1e-5, err_msg=f"{t}")
        assert timestep.observation.dtype == jnp.float32
        assert float(timestep.reward) == reward
        assert bool(timestep.terminated) == terminated, t
        assert not bool(timestep.truncated) and not truncated
        if terminated:
            state, episodes = fresh_state(), episodes + 1
    assert episodes > 10  # random actions end episodes quickly: terminations were compared
    assert ours.default_max_steps == gymnasium.spec("CartPole-v1").max_episode_steps == 500


def test_pendulum_matches_gymnasium():
    """Actions in [-2.5, 2.5] also exercise the clipping; one-step transitions match to 1e-5."""
    rng = np.random.default_rng(1)
    ours = Pendulum()
    step = jax.jit(ours.step)
    theirs = gymnasium.make("Pendulum-v1").unwrapped
    theirs.reset(seed=0)

    def to_ours(numbers: np.ndarray) -> PendulumState:
        _sync(theirs, numbers)
        return PendulumState(*(jnp.float32(v) for v in numbers))

    for t in range(NUM_STEPS):
        if t % 200 == 0:
            state = to_ours(rng.uniform([-np.pi, -1.0], [np.pi, 1.0]).astype(np.float32))
        else:
            to_ours(np.array([state.theta, state.theta_dot], np.float32))
        action = rng.uniform(-2.5, 2.5, (1,)).astype(np.float32)
        state, timestep = step(state, jnp.asarray(action))
        observation, reward, terminated, truncated, _ = theirs.step(action)
        np.testing.assert_allclose(timestep.observation, observation, atol=1e-5, err_msg=f"{t}")
        np.testing.assert_allclose(timestep.reward, reward, rtol=1e-5, atol=1e-5, err_msg=f"{t}")
        assert not bool(timestep.terminated) and not terminated
        assert not bool(timestep.truncated) and not truncated
    assert ours.default_max_steps == gymnasium.spec("Pendulum-v1").max_episode_steps == 200


def test_reset_distributions():
    cart_obs = jax.vmap(lambda k: CartPole().reset(k)[1].observation)(
        jax.random.split(jax.random.key(0), 1000)
    )
    assert cart_obs.dtype == jnp.float32 and cart_obs.shape == (1000, 4)
    assert float(jnp.abs(cart_obs).max()) <= 0.05 and float(jnp.abs(cart_obs).max()) > 0.049
    states = jax.vmap(lambda k: Pendulum().reset(k)[0])(jax.random.split(jax.random.key(1), 1000))
    assert float(jnp.abs(states.theta).max()) <= np.pi and float(jnp.abs(states.theta).max()) > 3.1
    assert float(jnp.abs(states.theta_dot).max()) <= 1.0
    assert float(jnp.abs(states.theta_dot).max()) > 0.99
