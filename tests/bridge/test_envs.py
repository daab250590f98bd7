"""Which gymnasium spaces actors can carry: non-Box observations are flattened (as SB3 does),
Discrete actions with a start are shifted, MultiDiscrete, MultiBinary and Box actions of any
shape travel flat, anything else is refused with a clear message."""

import gymnasium
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium import spaces

from accelrl.bridge.envs import UnsupportedEnv, env_spec, make_env
from accelrl.bridge.run_setup import server_spec
from accelrl.bridge.vtrace_learner import make_bridge_agent
from accelrl.config import ConfigError, apply_overrides
from agents import ClippedGaussian, UnboundedActions
from configs import load_preset


class SpacesEnv(gymnasium.Env):
    """Observations and actions of given spaces; records the last action it was stepped with."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self.observation_space, self.action_space = observation_space, action_space
        self.last_action = None

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action: object) -> tuple:
        assert self.action_space.contains(action), action
        self.last_action = action
        return self.observation_space.sample(), 1.0, False, False, {}


@pytest.fixture
def spaces_env_id():
    """Registers `SpacesEnv` under a fresh id for the spaces given; unregisters afterwards."""
    ids = []

    def register(observation_space: spaces.Space, action_space: spaces.Space) -> str:
        env_id = f"accelrl-test/Spaces{len(ids)}-v0"
        gymnasium.register(
            env_id,
            entry_point=SpacesEnv,
            kwargs={"observation_space": observation_space, "action_space": action_space},
        )
        ids.append(env_id)
        return f"gymnasium:{env_id}"

    yield register
    for env_id in ids:
        gymnasium.registry.pop(env_id)


def test_tuple_and_discrete_observations_are_flattened():
    # Blackjack: Tuple(Discrete(32), Discrete(11), Discrete(2)) -> one-hot parts, 45 values
    env = make_env("gymnasium:Blackjack-v1")
    spec = env_spec(env)
    assert spec.observation_shape == (45,) and spec.num_actions == 2
    obs, _ = env.reset(seed=0)
    assert obs.shape == (45,) and obs.sum() == 3  # one hot value per part
    # FrozenLake: Discrete(16) -> one-hot of 16
    lake = make_env("gymnasium:FrozenLake-v1")
    assert env_spec(lake).observation_shape == (16,)
    assert make_env("gymnasium:FrozenLake-v1").reset(seed=0)[0].tolist() == [1] + [0] * 15


def test_dict_observations_and_discrete_actions_with_a_start(spaces_env_id):
    observations = spaces.Dict({"position": spaces.Box(-1, 1, (2,)), "mode": spaces.Discrete(3)})
    env = make_env(spaces_env_id(observations, spaces.Discrete(3, start=-1)))
    spec = env_spec(env)
    assert spec.observation_shape == (5,) and spec.num_actions == 3
    env.reset(seed=0)
    for action, expected in [(0, -1), (1, 0), (2, 1)]:
        env.step(np.int32(action))  # what the actor sends: 0..n-1
        assert env.unwrapped.last_action == expected


def test_multi_discrete_and_multi_binary_actions_travel_as_a_flat_vector_from_0(spaces_env_id):
    """The actor sends 0..n-1 per component: shifted by the space's start and reshaped to its
    nvec's shape on the way in; MultiBinary is MultiDiscrete of twos."""
    nvec = np.array([[2, 3], [4, 5]])
    space = spaces.MultiDiscrete(nvec, start=np.array([[1, -1], [0, 10]]))
    env = make_env(spaces_env_id(spaces.Box(-1, 1, (3,)), space))
    assert env_spec(env).action_nvec == (2, 3, 4, 5)
    env.reset(seed=0)
    env.step(np.array([1, 2, 3, 0], np.int32))
    np.testing.assert_array_equal(env.unwrapped.last_action, [[2, 1], [3, 10]])
    binary = make_env(spaces_env_id(spaces.Box(-1, 1, (3,)), spaces.MultiBinary(3)))
    assert env_spec(binary).action_nvec == (2, 2, 2)
    binary.reset(seed=0)
    binary.step(np.array([1, 0, 1], np.int32))  # the env asserts that it is in its space
    np.testing.assert_array_equal(binary.unwrapped.last_action, [1, 0, 1])
    assert env_spec(binary).describe().endswith("multi-discrete actions nvec=[2, 2, 2]")


def test_an_unbounded_box_action_gets_a_clipped_gaussian_policy(spaces_env_id):
    """Box(-inf, inf) actions (and one-sided bounds) travel as they are; the V-trace agent's
    policy is then a Gaussian whose samples the env gets clipped to the finite bounds."""
    space = spaces.Box(np.array([-np.inf, 0.0]), np.array([np.inf, np.inf]), dtype=np.float32)
    env_id = spaces_env_id(spaces.Box(-1, 1, (3,)), space)
    spec = env_spec(make_env(env_id))
    assert spec.action_low == (-np.inf, 0.0) and spec.action_high == (np.inf, np.inf)
    config = apply_overrides(load_preset("cartpole_vtrace_bridge"), [f"bridge.env={env_id}"])
    agent = make_bridge_agent(config, server_spec(config))
    assert isinstance(agent.actions, UnboundedActions)
    loc = jnp.array([[-5.0, -5.0], [5.0, 5.0]])
    dist = agent.distribution((loc, jnp.zeros_like(loc)))
    assert isinstance(dist, ClippedGaussian)
    np.testing.assert_array_equal(dist.to_env(dist.mode()), [[-5.0, 0.0], [5.0, 5.0]])


def test_a_box_action_of_any_shape_travels_flat(spaces_env_id):
    space = spaces.Box(np.array([[-1, 0], [2, 3]]), np.array([[1, 1], [4, 5]]), dtype=np.float32)
    env = make_env(spaces_env_id(spaces.Box(-1, 1, (3,)), space))
    spec = env_spec(env)
    assert spec.action_low == (-1, 0, 2, 3) and spec.action_high == (1, 1, 4, 5)
    env.reset(seed=0)
    env.step(np.array([0.5, 0.25, 3.0, 4.5], np.float32))  # the env asserts its space
    np.testing.assert_array_equal(env.unwrapped.last_action, [[0.5, 0.25], [3.0, 4.5]])


@pytest.mark.parametrize(
    "action_space, fragment",
    [
        (spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))), "Tuple"),
        (spaces.Dict({"steer": spaces.Discrete(2)}), "Dict"),
    ],
)
def test_unsupported_action_spaces_are_refused_by_name(spaces_env_id, action_space, fragment):
    env_id = spaces_env_id(spaces.Box(-1, 1, (3,)), action_space)
    with pytest.raises(UnsupportedEnv, match=fragment):
        make_env(env_id)
    # the server refuses the preset the same way, as a config error (exit 2 from the CLI)
    config = apply_overrides(load_preset("cartpole_vtrace_bridge"), [f"bridge.env={env_id}"])
    with pytest.raises(ConfigError, match=f"bridge.env: .*{fragment}"):
        server_spec(config)


def test_unknown_gymnasium_id_is_refused_by_name():
    with pytest.raises(UnsupportedEnv, match="NoSuchEnv"):
        make_env("gymnasium:NoSuchEnv-v0")


def _needs_a_package(**kwargs):
    raise ImportError("this env needs `pip install some-package`")


def test_an_env_that_cannot_import_its_dependency_is_refused_with_its_message():
    """gymnasium raises a plain ImportError for envs moved out of it (Hopper-v2, the gym
    compatibility envs) or missing their package: the actor and the server say why."""
    gymnasium.register("accelrl-test/NeedsPackage-v0", entry_point=_needs_a_package)
    try:
        with pytest.raises(UnsupportedEnv, match="NeedsPackage-v0: .*pip install some-package"):
            make_env("gymnasium:accelrl-test/NeedsPackage-v0")
        config = apply_overrides(
            load_preset("cartpole_vtrace_bridge"),
            ["bridge.env=gymnasium:accelrl-test/NeedsPackage-v0"],
        )
        with pytest.raises(ConfigError, match="bridge.env: .*pip install some-package"):
            server_spec(config)
    finally:
        gymnasium.registry.pop("accelrl-test/NeedsPackage-v0")


def test_atari_ids_of_every_form_get_the_atari_preprocessing():
    pytest.importorskip("ale_py", reason="ale-py is not installed (pip install 'accelrl[atari]')")
    for env_id in ("gymnasium:ALE/Pong-v5", "atari:Pong", "gymnasium:PongNoFrameskip-v4"):
        env = make_env(env_id)
        assert isinstance(env, gymnasium.wrappers.AtariPreprocessing), env_id
        spec = env_spec(env)
        assert (spec.observation_shape, spec.observation_dtype) == ((84, 84), "uint8"), env_id
        env.close()
    with pytest.raises(UnsupportedEnv, match="Pongg.*Did you mean.*Pong"):
        make_env("gymnasium:ALE/Pongg-v5")


def test_local_actors_that_cannot_all_fit_are_a_config_error(tmp_path):
    from accelrl.bridge.local import train_bridge

    config = apply_overrides(load_preset("cartpole_vtrace_bridge"), ["bridge.max_envs=4"])
    with pytest.raises(ConfigError, match="exceed bridge.max_envs=4"):
        train_bridge(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    config = apply_overrides(load_preset("cartpole_vtrace_bridge"), ["bridge.actor_groups=9"])
    with pytest.raises(ConfigError, match="actor_groups=9 must be in 1..envs_per_actor"):
        train_bridge(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_actor_command_line_errors(capsys):
    from accelrl.bridge.actor import main

    common = ["--server", "127.0.0.1:1", "--give-up-after", "1"]
    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        main([*common, "--env", "gymnasium:CartPole-v1", "--num-envs", "0"])
    assert exited.value.code == 2
    assert "--num-envs must be at least 1" in capsys.readouterr().err
    for groups in ("0", "5"):
        with pytest.raises(SystemExit) as exited:
            main([*common, "--env", "gymnasium:CartPole-v1", "--num-envs", "4", "--groups", groups])
        assert exited.value.code == 2
        assert f"--groups must be in 1..--num-envs (4), got {groups}" in capsys.readouterr().err
    for option, value, message in [
        ("--server", "localhost", "--server: 'localhost' is not HOST:PORT"),
        ("--server", "localhost:99999", "--server: port 99999 is not in 1..65535"),
        ("--tls-ca", "no-such-ca.pem", "--tls-ca: no file 'no-such-ca.pem'"),
    ]:
        with pytest.raises(SystemExit) as exited:
            main([*common, "--env", "gymnasium:CartPole-v1", option, value])
        assert exited.value.code == 2
        assert message in capsys.readouterr().err
    assert main([*common, "--env", "gymnasium:NoSuchEnv-v0"]) == 1
    assert "NoSuchEnv" in capsys.readouterr().err


def test_an_actor_the_learner_has_no_room_for_retries_and_gives_up_saying_why(tmp_path):
    """RESOURCE_EXHAUSTED (room may free up as other actors leave) is retried, not fatal, but
    the actor says so at once and names the refusal when it gives up."""
    import subprocess
    import sys

    from bridge_helpers import ROOT, child_env, serve

    server, port = serve(tmp_path / "run", "bridge.max_envs=4", "total_env_steps=100000000")
    try:
        out = subprocess.run(
            [sys.executable, "-m", "accelrl.bridge.actor", "--server", f"127.0.0.1:{port}"]
            + ["--env", "gymnasium:CartPole-v1", "--num-envs", "8", "--give-up-after", "2"],
            cwd=ROOT,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 1, out.stderr
        assert "RESOURCE_EXHAUSTED: no room for 8 more envs on this learner; retrying" in out.stderr
        assert "giving up (last refusal: RESOURCE_EXHAUSTED: no room for 8" in out.stderr
        assert server.alive()
    finally:
        server.stop()


@pytest.mark.parametrize("env_id", ["gymnasium:CartPole-v1", "gymnasium:Pendulum-v1"])
def test_actor_steps_a_group_as_its_envs_step_alone(env_id):
    """`Actor._step` against the same envs stepped by hand: observations, rewards, the end of
    episodes kept apart (terminated, truncated), each ended episode's final observation, and
    the reset observation in its place."""
    from accelrl.bridge.actor import Actor

    actor = Actor("127.0.0.1:1", env_id, 3, seed=7)
    actor._reset_all()
    reference = [make_env(env_id) for _ in range(3)]
    for i, env in enumerate(reference):
        env.reset(seed=7 * 100_003 + i)
    rng = np.random.default_rng(0)
    group = np.array([2, 0])  # a group in any order, leaving env 1 alone
    ends = 0
    for _ in range(250):
        if actor.spec.discrete:
            action = rng.integers(0, 2, 2).astype(np.int32)
        else:
            action = rng.uniform(-2, 2, (2, 1)).astype(np.float32)
        steps = actor._step(group, action)
        finals = []
        for row, i in enumerate(group):
            a = int(action[row]) if actor.spec.discrete else action[row]
            obs, reward, term, trunc, _ = reference[i].step(a)
            assert steps.reward[row] == np.float32(reward)
            assert (steps.terminated[row], steps.truncated[row]) == (term, trunc)
            if term or trunc:
                finals.append(obs)
                obs, _ = reference[i].reset()
            np.testing.assert_allclose(steps.observation[row], obs, rtol=1e-6)
        assert steps.observation.dtype == np.float32 and steps.observation.shape[0] == 2
        assert steps.final_observation.shape == (len(finals), *actor.spec.observation_shape)
        for got, want in zip(steps.final_observation, finals, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)
        ends += len(finals)
    assert ends > 0 and actor.env_steps == 500


class _InPlaceEnv:
    """Counts steps in ONE observation buffer that reset rewrites (as envs that reuse their
    buffers do); episodes end every 3 steps."""

    def __init__(self) -> None:
        self.buffer = np.zeros(4, np.float32)

    def reset(self, seed=None):
        self.buffer[:] = 0
        return self.buffer, {}

    def step(self, action):
        self.buffer += 1
        return self.buffer, 1.0, bool(self.buffer[0] >= 3), False, {}


def test_actor_keeps_the_final_observation_of_an_env_that_reuses_its_buffer():
    from accelrl.bridge.actor import Actor

    actor = Actor("127.0.0.1:1", "trivial:4", 2)
    actor.envs = [_InPlaceEnv(), _InPlaceEnv()]
    actor._reset_all()
    group, action = np.array([0, 1]), np.zeros(2, np.int32)
    for _ in range(2):
        actor._step(group, action)
    steps = actor._step(group, action)
    assert steps.terminated.all()
    np.testing.assert_array_equal(steps.final_observation, np.full((2, 4), 3.0))
    np.testing.assert_array_equal(steps.observation, np.zeros((2, 4)))
