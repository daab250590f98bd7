"""Locomotion envs: API and specs, clipping, reward terms recomputed independently, MuJoCo parity.

Each env is compiled once (reset + a few steps, jit over vmap) and every check of that env
runs on that one rollout. Actions are uniform in 100x the action bounds, so every step exercises the
clipping. Reward terms are recomputed with numpy from the rollout's qpos/qvel, with body and
site positions from MuJoCo's own kinematics of our model file, never from the env's code.
"""

import functools

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import physics
from accelrl.checkpoint import Checkpointer
from accelrl.envs import registry
from accelrl.envs.locomotion import LocomotionEnv

STEPS = 4
BATCH = 2

# name -> (observation size, action size, dt)
SPECS = {
    "ant": (27, 8, 0.05),
    "halfcheetah": (17, 6, 0.05),
    "hopper": (11, 3, 0.008),
    "walker2d": (17, 6, 0.008),
    "humanoid": (276, 17, 0.015),
    "humanoidstandup": (276, 17, 0.015),
    "reacher": (11, 2, 0.02),
    "pusher": (23, 7, 0.05),
    "swimmer": (8, 2, 0.04),
    "inverted_pendulum": (4, 1, 0.04),
    "inverted_double_pendulum": (8, 1, 0.05),
}


@functools.cache
def rollout(name: str, **kwargs):
    """(env, raw actions [T, B, nu], reset output, per-step states and timesteps), on host."""
    env = registry.make(name, **kwargs)
    bound = np.maximum(np.abs(env.action_space.low), np.abs(env.action_space.high))
    rng = np.random.default_rng(0)
    actions = (100 * bound * rng.uniform(-1, 1, (STEPS, BATCH, env.sys.nu))).astype(np.float32)

    @jax.jit
    def run(key, actions):
        state, first = jax.vmap(env.reset)(jax.random.split(key, BATCH))

        def body(state, action):
            state, timestep = jax.vmap(env.step)(state, action)
            return state, (state, timestep)

        _, (states, timesteps) = jax.lax.scan(body, state, actions)
        return state, first, states, timesteps

    return env, actions, jax.device_get(run(jax.random.PRNGKey(0), actions))


def mujoco_model(env: LocomotionEnv) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(env.mjcf_xml)


def trajectory(name: str):
    """qpos [T+1, B, nq], qvel [T+1, B, nv], clipped actions [T, B, nu], timesteps, env."""
    env, actions, (state0, _, states, timesteps) = rollout(name)
    q = np.concatenate([state0.pipeline.q[None], states.pipeline.q])
    qd = np.concatenate([state0.pipeline.qd[None], states.pipeline.qd])
    low, high = env.action_space.low, env.action_space.high
    return q, qd, np.clip(actions, low, high), timesteps, env


def kinematics(model: mujoco.MjModel, q: np.ndarray):
    """MuJoCo's body and site positions (mj_kinematics) at every [..., nq] configuration."""
    data = mujoco.MjData(model)
    out = np.empty(q.shape[:-1], object)
    for idx in np.ndindex(*q.shape[:-1]):
        data.qpos[:] = q[idx]
        mujoco.mj_kinematics(model, data)
        out[idx] = {
            "xpos": data.xpos.copy(),
            "xipos": data.xipos.copy(),
            "site_xpos": data.site_xpos.copy(),
        }
    return out


def field(frames: np.ndarray, key: str) -> np.ndarray:
    return np.stack([f[key] for f in frames.ravel()]).reshape(
        *frames.shape, *frames.flat[0][key].shape
    )


def check_specs(name):
    env, actions, (state0, first, states, timesteps) = rollout(name)
    obs_size, act_size, dt = SPECS[name]
    assert env.observation_space.shape == (obs_size,)
    assert env.action_space.shape == (act_size,) and env.action_space.bounded
    assert env.dt == pytest.approx(dt)
    assert env.default_max_steps == 1000
    assert first.observation.shape == (BATCH, obs_size)
    assert timesteps.observation.shape == (STEPS, BATCH, obs_size)
    assert first.observation.dtype == timesteps.observation.dtype == np.float32
    assert timesteps.reward.shape == (STEPS, BATCH) and timesteps.reward.dtype == np.float32
    assert timesteps.terminated.dtype == timesteps.truncated.dtype == np.bool_
    assert not timesteps.truncated.any()  # truncation is TimeLimit's job
    assert set(first.info["metrics"]) == set(timesteps.info["metrics"])
    assert all(np.all(v == 0) for v in first.info["metrics"].values())
    # batch members got different reset noise, and qpos(state) is the physics qpos
    assert not np.allclose(state0.pipeline.q[0], state0.pipeline.q[1])
    np.testing.assert_array_equal(env.qpos(state0), state0.pipeline.q)


def check_finite_under_actions_far_out_of_bounds(name):
    _, actions, (_, _, states, timesteps) = rollout(name)
    assert np.abs(actions).max() > 10  # really out of bounds
    for leaf in (states.pipeline.q, states.pipeline.qd, timesteps.observation, timesteps.reward):
        assert np.all(np.isfinite(leaf))
    assert all(np.all(np.isfinite(v)) for v in timesteps.info["metrics"].values())


def test_clip_action_bounds_and_non_finite():
    env = registry.make("reacher")  # bounds [-1, 1]
    raw = np.array([[5.0, -7.0], [0.3, np.nan], [np.inf, -np.inf]], np.float32)
    clipped = np.asarray(jax.jit(jax.vmap(env.clip_action))(raw))
    np.testing.assert_allclose(clipped, [[1.0, -1.0], [0.3, 0.0], [1.0, -1.0]])


def _check(metrics, expected):
    for key, value in expected.items():
        np.testing.assert_allclose(metrics[key], value, rtol=1e-4, atol=2e-3, err_msg=key)


def test_ant_contact_forces_option():
    """Gymnasium's Ant observation (with clipped cfrc_ext) and its contact cost."""
    env, _, (_, first, _, ts) = rollout("ant", use_contact_forces=True)
    assert env.observation_space.shape == (105,) and ts.observation.shape[-1] == 105
    forces = ts.observation[..., 27:]
    assert np.all(np.abs(forces) <= 1.0) and np.any(forces != 0)  # feet touch the floor
    cost = 5e-4 * np.sum(forces**2, -1)
    _check(ts.info["metrics"], {"reward_contact": -cost})
    metrics = ts.info["metrics"]
    total = metrics["reward_forward"] + metrics["reward_survive"] + metrics["reward_ctrl"]
    np.testing.assert_allclose(ts.reward, total - cost, rtol=1e-5, atol=1e-5)


def check_ant_rewards(name):
    q, qd, a, ts, env = trajectory(name)
    x = q[..., 0:2]  # free-joint position = torso position
    velocity = (x[1:] - x[:-1]) / 0.05
    ctrl = 0.5 * np.sum(a**2, -1)
    z = q[1:, :, 2]
    expected = {
        "reward_forward": velocity[..., 0],
        "y_velocity": velocity[..., 1],
        "reward_ctrl": -ctrl,
        "reward_survive": np.ones_like(ctrl),
        "reward_contact": np.zeros_like(ctrl),
    }
    _check(ts.info["metrics"], expected)
    np.testing.assert_allclose(ts.reward, velocity[..., 0] + 1 - ctrl, rtol=1e-4, atol=2e-3)
    np.testing.assert_array_equal(ts.terminated, (z < 0.2) | (z > 1.0))
    np.testing.assert_allclose(
        ts.observation, np.concatenate([q[1:, :, 2:], qd[1:]], -1), atol=1e-6
    )


def check_planar_rewards(name):
    q, qd, a, ts, env = trajectory(name)
    dt = SPECS[name][2]
    velocity = (q[1:, :, 0] - q[:-1, :, 0]) / dt  # rootx = torso x (joint at the torso origin)
    weight = {"halfcheetah": 0.1, "hopper": 1e-3, "walker2d": 1e-3}[name]
    ctrl = weight * np.sum(a**2, -1)
    metrics = ts.info["metrics"]
    if name == "halfcheetah":
        _check(metrics, {"reward_run": velocity, "reward_ctrl": -ctrl})
        np.testing.assert_allclose(ts.reward, velocity - ctrl, rtol=1e-4, atol=2e-3)
        assert not ts.terminated.any()
        return
    _check(
        metrics,
        {"reward_forward": velocity, "reward_ctrl": -ctrl, "reward_healthy": np.ones_like(ctrl)},
    )
    np.testing.assert_allclose(ts.reward, velocity + 1 - ctrl, rtol=1e-4, atol=2e-3)
    z, angle = q[1:, :, 1], q[1:, :, 2]  # rootz (ref 1.25 at body height 1.25) = torso z
    if name == "hopper":
        state = np.concatenate([q[1:, :, 2:], qd[1:]], -1)
        healthy = np.all(np.abs(state) < 100, -1) & (z > 0.7) & (np.abs(angle) < 0.2)
    else:
        healthy = (z > 0.8) & (z < 2.0) & (np.abs(angle) < 1.0)
    np.testing.assert_array_equal(ts.terminated, ~healthy)
    expected_obs = np.concatenate([q[1:, :, 1:], np.clip(qd[1:], -10, 10)], -1)
    np.testing.assert_allclose(ts.observation, expected_obs, atol=1e-5)


def test_hopper_healthy_ranges():
    """The posture bounds on hand-made states (random rollouts rarely reach them)."""
    env = registry.make("hopper")
    q0, qd0 = np.asarray(env.sys.qpos0), np.zeros(env.sys.nv, np.float32)
    q, qd = np.tile(q0, (5, 1)), np.tile(qd0, (5, 1))
    q[1, 2], q[2, 2], q[3, 1] = 0.3, -0.3, 0.5  # pitch beyond +-0.2; torso z below 0.7
    qd[4] = 200.0  # a state entry beyond 100
    healthy = jax.jit(jax.vmap(lambda q, qd: env.is_healthy(physics.init(env.sys, q, qd))))
    assert np.asarray(healthy(q, qd)).tolist() == [True, False, False, False, False]


def check_humanoid_rewards_and_observation(name):
    q, qd, a, ts, env = trajectory(name)
    model = mujoco_model(env)
    frames = kinematics(model, q)
    mass = model.body_mass
    com = np.einsum("b,...bi->...i", mass, field(frames, "xipos")) / mass.sum()
    dt = 0.015
    metrics = ts.info["metrics"]
    z = q[1:, :, 2]
    if name == "humanoid":
        velocity = (com[1:] - com[:-1]) / dt
        ctrl = 0.1 * np.sum(a**2, -1)
        _check(
            metrics,
            {
                "forward_reward": 1.25 * velocity[..., 0],
                "y_velocity": velocity[..., 1],
                "reward_quadctrl": -ctrl,
                "reward_alive": 5 * np.ones_like(ctrl),
            },
        )
        np.testing.assert_allclose(
            ts.reward, 1.25 * velocity[..., 0] + 5 - ctrl, rtol=1e-4, atol=2e-3
        )
        np.testing.assert_array_equal(ts.terminated, (z < 1.0) | (z > 2.0))
    else:
        ctrl = 0.01 * np.sum(a**2, -1)
        _check(metrics, {"reward_linup": z / dt, "reward_quadctrl": -ctrl})
        np.testing.assert_allclose(ts.reward, z / dt + 1 - ctrl, rtol=1e-4, atol=2e-3)
        assert not ts.terminated.any()
    # observation blocks: qpos[2:], qvel, ..., masses, ..., qfrc_actuator (MuJoCo's)
    obs = ts.observation
    np.testing.assert_allclose(obs[..., :22], q[1:, :, 2:], atol=1e-6)
    np.testing.assert_allclose(obs[..., 22:45], qd[1:], atol=1e-5)
    masses = obs[..., 45:175].reshape(STEPS, BATCH, 13, 10)[..., 9]
    np.testing.assert_allclose(masses, np.broadcast_to(mass[1:], masses.shape), rtol=1e-5)
    data = mujoco.MjData(model)
    data.ctrl[:] = a[-1, 0]
    mujoco.mj_forward(model, data)
    np.testing.assert_allclose(obs[-1, 0, -23:], data.qfrc_actuator, rtol=1e-5, atol=1e-4)


def check_reacher_rewards(name):
    q, qd, a, ts, env = trajectory(name)
    model = mujoco_model(env)
    xpos = field(kinematics(model, q[1:]), "xpos")
    tip_to_target = xpos[..., model.body("fingertip").id, :] - xpos[..., model.body("target").id, :]
    dist = -np.linalg.norm(tip_to_target, axis=-1)
    ctrl = -np.sum(a**2, -1)
    _check(ts.info["metrics"], {"reward_dist": dist, "reward_ctrl": ctrl})
    np.testing.assert_allclose(ts.reward, dist + ctrl, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ts.observation[..., -3:], tip_to_target, atol=1e-5)
    # the target never moves and starts within 0.2 of the base
    np.testing.assert_allclose(q[:, :, 2:], np.broadcast_to(q[0, :, 2:], q[:, :, 2:].shape))
    assert np.all(np.linalg.norm(q[0, :, 2:], axis=-1) <= 0.2)


def check_pusher_rewards(name):
    q, qd, a, ts, env = trajectory(name)
    model = mujoco_model(env)
    com = field(kinematics(model, q[1:]), "xipos")
    tips, puck, goal = (com[..., model.body(b).id, :] for b in ("tips_arm", "object", "goal"))
    terms = {
        "reward_dist": -np.linalg.norm(puck - goal, axis=-1),
        "reward_ctrl": -0.1 * np.sum(a**2, -1),
        "reward_near": -0.5 * np.linalg.norm(tips - puck, axis=-1),
    }
    _check(ts.info["metrics"], terms)
    np.testing.assert_allclose(ts.reward, sum(terms.values()), rtol=1e-4, atol=1e-4)
    obs = np.concatenate([q[1:, :, :7], qd[1:, :, :7], tips, puck, goal], -1)
    np.testing.assert_allclose(ts.observation, obs, atol=1e-5)
    # reset: the arm at qpos0, the goal at its origin, the puck drawn > 0.17 from it, at rest
    np.testing.assert_array_equal(q[0, :, :7], np.broadcast_to(model.qpos0[:7], (BATCH, 7)))
    np.testing.assert_array_equal(q[0, :, -2:], 0.0)
    assert np.all(np.linalg.norm(q[0, :, -4:-2], axis=-1) > 0.17)
    y_slide, x_slide = q[0, :, -4], q[0, :, -3]
    assert np.all((-0.3 <= y_slide) & (y_slide <= 0) & (np.abs(x_slide) <= 0.2))
    np.testing.assert_array_equal(qd[0, :, -4:], 0.0)
    assert not np.any(ts.terminated)


def check_swimmer_rewards(name):
    q, qd, a, ts, env = trajectory(name)
    velocity = (q[1:, :, :2] - q[:-1, :, :2]) / 0.04  # the head's slide joints
    ctrl = 1e-4 * np.sum(a**2, -1)
    expected = {
        "reward_forward": velocity[..., 0],
        "y_velocity": velocity[..., 1],
        "reward_ctrl": -ctrl,
        "distance_from_origin": np.linalg.norm(q[1:, :, :2], axis=-1),
    }
    _check(ts.info["metrics"], expected)
    np.testing.assert_allclose(ts.reward, velocity[..., 0] - ctrl, rtol=1e-4, atol=2e-3)
    assert not ts.terminated.any()
    np.testing.assert_allclose(ts.observation, np.concatenate([q[1:, :, 2:], qd[1:]], -1))


def check_inverted_pendulum_rewards(name):
    q, qd, a, ts, env = trajectory(name)
    np.testing.assert_array_equal(ts.reward, np.ones_like(ts.reward))
    np.testing.assert_array_equal(ts.terminated, np.abs(q[1:, :, 1]) > 0.2)
    np.testing.assert_allclose(ts.observation, np.concatenate([q[1:], qd[1:]], -1), atol=1e-6)


def check_inverted_double_pendulum_rewards(name):
    q, qd, a, ts, env = trajectory(name)
    model = mujoco_model(env)
    tip = field(kinematics(model, q[1:]), "site_xpos")[..., model.site("tip").id, :]
    x, z = tip[..., 0], tip[..., 2]
    distance = 0.01 * x**2 + (z - 2) ** 2
    velocity = 1e-3 * qd[1:, :, 1] ** 2 + 5e-3 * qd[1:, :, 2] ** 2
    terminated = z <= 1
    alive = np.where(terminated, 0.0, 10.0)
    _check(
        ts.info["metrics"],
        {"distance_penalty": -distance, "velocity_penalty": -velocity, "reward_survive": alive},
    )
    np.testing.assert_allclose(ts.reward, alive - distance - velocity, rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(ts.terminated, terminated)


# Largest |qpos difference| to MuJoCo (float64, converged solver) after STEPS steps of saturated
# random controls; measured at most 2e-6 on every model (contacts included).
QPOS_TOLERANCE = 1e-4


def check_model_file_matches_mujoco(name):
    q, qd, a, _, env = trajectory(name)
    model = mujoco_model(env)
    assert (model.nq, model.nv, model.nu) == (env.sys.nq, env.sys.nv, env.sys.nu)
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = q[0, 0], qd[0, 0]
    for t in range(STEPS):
        data.ctrl[:] = a[t, 0]
        mujoco.mj_step(model, data, nstep=env.frame_skip)
    np.testing.assert_allclose(q[-1, 0], data.qpos, atol=QPOS_TOLERANCE)


REWARD_CHECKS = {
    "ant": check_ant_rewards,
    "halfcheetah": check_planar_rewards,
    "hopper": check_planar_rewards,
    "walker2d": check_planar_rewards,
    "humanoid": check_humanoid_rewards_and_observation,
    "humanoidstandup": check_humanoid_rewards_and_observation,
    "reacher": check_reacher_rewards,
    "pusher": check_pusher_rewards,
    "swimmer": check_swimmer_rewards,
    "inverted_pendulum": check_inverted_pendulum_rewards,
    "inverted_double_pendulum": check_inverted_double_pendulum_rewards,
}


@pytest.mark.parametrize("name", list(SPECS))
def test_env(name):
    """Specs, finiteness, reward terms and MuJoCo parity, all from one compiled rollout (one
    test per env, so parallel test workers never compile an env twice)."""
    check_specs(name)
    check_finite_under_actions_far_out_of_bounds(name)
    REWARD_CHECKS[name](name)
    check_model_file_matches_mujoco(name)


def test_time_limit_truncates_and_termination_does_not():
    """Through the registry's training stack with a short limit: a pendulum left alone is
    truncated (not terminated) at the limit; one pushed hard terminates before it."""
    limit = 6
    env = registry.make_training_env("inverted_pendulum", 2, max_steps=limit)
    assert registry.make_training_env("ant", 1).default_max_steps == 1000
    action = jnp.array([[0.0], [300.0]])  # env 1: far beyond the bound, clipped to 3
    step = jax.jit(env.step)
    state, _ = jax.jit(env.reset)(jax.random.PRNGKey(1))
    flags = []
    for _ in range(limit):
        state, ts = step(state, action)
        flags.append((np.asarray(ts.terminated), np.asarray(ts.truncated)))
    terminated, truncated = map(np.array, zip(*flags, strict=True))
    assert not (terminated & truncated).any()
    assert not terminated[:, 0].any() and truncated[:, 0].tolist() == [False] * (limit - 1) + [True]
    assert terminated[:, 1].any() and not truncated[: np.argmax(terminated[:, 1]) + 1, 1].any()


def test_state_of_a_contact_free_model_checkpoints(tmp_path):
    """A contact-free model's state holds zero-size contact arrays, which orbax refuses to
    write; the checkpointer leaves them out and rebuilds them on restore."""
    env = registry.make("inverted_pendulum")
    state, _ = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), BATCH))
    assert any(leaf.size == 0 for leaf in jax.tree.leaves(state))
    checkpointer = Checkpointer(tmp_path)
    checkpointer.save(1, state)
    checkpointer.wait()
    restored = checkpointer.restore_latest(state)
    checkpointer.close()
    assert jax.tree.structure(restored) == jax.tree.structure(state)
    np.testing.assert_array_equal(env.qpos(restored), env.qpos(state))


def test_a_users_own_model_file(tmp_path):
    """`asset` may be the path of the user's own MJCF file: here InvertedPendulum's task on a
    copy of its model with a pole twice as long."""
    from accelrl.envs.locomotion import InvertedPendulum

    stock = InvertedPendulum()
    path = tmp_path / "long_pole.xml"
    path.write_text(stock.mjcf_xml.replace('0.001 0 0.6"', '0.001 0 1.2"'))
    assert path.read_text() != stock.mjcf_xml

    class LongPole(InvertedPendulum):
        asset = str(path)

    env = LongPole()
    assert env.mjcf_xml == path.read_text()
    assert env.observation_space.shape == stock.observation_space.shape
    # the pole (a capsule from its geom's density) is heavier: the model came from the file
    assert float(env.sys.body_mass.sum()) > float(stock.sys.body_mass.sum())
    with pytest.raises(FileNotFoundError, match="no_such_model.xml"):
        type("Missing", (InvertedPendulum,), {"asset": "no_such_model.xml"})()
