"""An actor of someone else's: written from bridge.proto and docs/bridge-protocol.md alone (raw
messages, none of accelrl's codec), for an env the server cannot build, whose spec (float64
observations, a continuous action box) the learner's config declares."""

import re
import time

import grpc
import numpy as np
import pytest
from bridge_helpers import Stream, run_cli, serve

from accelrl.bridge import bridge_pb2 as pb
from accelrl.bridge.r2d2_learner import R2D2BridgeLearner
from accelrl.bridge.run_setup import server_spec
from accelrl.config import ConfigError, apply_overrides, save_config
from configs import load_preset

LOW, HIGH = [-1.0, -2.0], [1.0, 0.5]
DECLARED = [
    "bridge.env=robot:Arm",  # a label here: nothing on the server imports it
    "bridge.observation_shape=[3]",
    "bridge.observation_dtype=float64",
    f"bridge.action_low={LOW}",
    f"bridge.action_high={HIGH}",
]


def tensor(array: np.ndarray) -> pb.Tensor:
    array = np.ascontiguousarray(array)
    return pb.Tensor(
        dtype=array.dtype.name,
        shape=array.shape,
        data=array.astype("<" + array.dtype.str[1:]).tobytes(),
    )


def handshake(high=HIGH) -> pb.ActorMessage:
    return pb.ActorMessage(
        handshake=pb.Handshake(
            env_id="robot:Arm",
            observation_dtype="float64",
            observation_shape=[3],
            num_actions=0,
            action_low=LOW,
            action_high=high,
            num_envs=2,
            actor_name="foreign",
        )
    )


def steps_message(ids, rng, terminated=None, final_count=0):
    n = len(ids)
    terminated = np.zeros(n, bool) if terminated is None else terminated
    steps = pb.Steps(
        env_ids=ids,
        observation=tensor(rng.normal(size=(n, 3))),
        reward=tensor(rng.normal(size=n).astype(np.float32)),
        terminated=tensor(terminated),
        truncated=tensor(np.zeros(n, bool)),
        final_observation=tensor(rng.normal(size=(int(terminated.sum()), 3))),
    )
    return pb.ActorMessage(steps=steps)


def test_foreign_actor_with_declared_continuous_spec(tmp_path):
    # A batch waits at most `deadline_ms` for more envs; 30 s here, so a batch that waited for
    # envs that cannot arrive would show as a stalled stream.
    proc, port = serve(
        tmp_path / "run", "total_env_steps=100000000", "bridge.deadline_ms=30000", *DECLARED
    )
    rng = np.random.default_rng(0)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            mismatch = Stream(channel)
            mismatch.send(handshake(high=[1.0, 1.0]))
            with pytest.raises(grpc.RpcError) as refused:
                mismatch.read()
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "env spec mismatch" in refused.value.details()

            stream = Stream(channel)
            stream.send(handshake())
            reply = stream.read().handshake_reply
            ids = list(reply.env_ids)
            assert len(ids) == 2 and reply.max_message_bytes > 0
            actions = []
            for t in range(30):
                terminated = np.array([t % 7 == 6, False])  # env 0's episodes end every 7 steps
                stream.send(steps_message(ids, rng, terminated))
                answer = stream.read().actions
                assert answer.action.dtype == "float32" and list(answer.action.shape) == [2, 2]
                actions.append(np.frombuffer(answer.action.data, "<f4").reshape(2, 2))
                assert not answer.done and answer.policy_version >= 0
            stream.close()

            # Pipelined (docs/bridge-protocol.md): one message per env, both in flight; the
            # replies come in order, each as soon as its message is served.
            stream = Stream(channel)
            stream.send(handshake())
            ids = list(stream.read().handshake_reply.env_ids)
            started = time.monotonic()
            stream.send(steps_message(ids[:1], rng))
            for t in range(20):
                stream.send(steps_message(ids[1:] if t % 2 == 0 else ids[:1], rng))
                answer = stream.read().actions
                assert list(answer.action.shape) == [1, 2], answer
            assert time.monotonic() - started < 15, "a batch waited for envs still in flight"
            stream.close()
        actions = np.stack(actions)
        assert np.all(actions >= LOW) and np.all(actions <= HIGH)
        assert actions.std(axis=0).min() > 0.01  # sampled, not a constant
        assert proc.alive()
    finally:
        proc.kill()


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (["bridge.observation_shape=[3]"], "declare the actions"),
        (
            ["bridge.observation_shape=[3]", "bridge.num_actions=2", "bridge.action_low=[0]"],
            "not two of them",
        ),
        (
            ["bridge.observation_shape=[3]", "bridge.action_low=[1]", "bridge.action_high=[0]"],
            "low < high",
        ),
        (
            [
                "bridge.observation_shape=[3]",
                "bridge.num_actions=2",
                "bridge.observation_dtype=str",
            ],
            "str",
        ),
        (["bridge.num_actions=3"], "read only with bridge.observation_shape"),
    ],
)
def test_bad_declared_spec_is_a_config_error(overrides, fragment):
    config = apply_overrides(load_preset("cartpole_vtrace_bridge"), overrides)
    with pytest.raises(ConfigError, match=fragment):
        server_spec(config)


def test_declared_multi_discrete_spec():
    config = apply_overrides(
        load_preset("cartpole_vtrace_bridge"),
        ["bridge.observation_shape=[7]", "bridge.action_nvec=[3,4]"],
    )
    spec = server_spec(config)
    assert spec.action_nvec == (3, 4) and spec.action_shape == (2,) and not spec.discrete
    for overrides, fragment in [
        (["bridge.action_nvec=[3,0]"], "every entry >= 1"),
        (["bridge.action_nvec=[3]", "bridge.num_actions=3"], "not two of them"),
    ]:
        bad = apply_overrides(config, overrides)
        with pytest.raises(ConfigError, match=fragment):
            server_spec(bad)
    # R2D2's Q-network picks one of n actions: a vector action is refused, naming the space
    with pytest.raises(ConfigError, match="one discrete action per step.*nvec=\\[3, 4\\]"):
        R2D2BridgeLearner(load_preset("cartpole_r2d2_bridge"), spec)


def test_declared_discrete_spec():
    config = apply_overrides(
        load_preset("cartpole_vtrace_bridge"),
        [
            "bridge.observation_shape=[84,84]",
            "bridge.observation_dtype=uint8",
            "bridge.num_actions=6",
        ],
    )
    spec = server_spec(config)
    assert spec.observation_shape == (84, 84) and spec.observation_dtype == "uint8"
    assert spec.num_actions == 6 and spec.discrete


def test_local_actors_that_cannot_build_the_env_stop_the_run(tmp_path):
    # `accelrl train` starts local actors; with a spec declared for an env they cannot build,
    # each fails at start-up. The run stops with an error (exit 1) instead of restarting them
    # forever.
    run = ["train", "cartpole_vtrace_bridge", "--run-dir", str(tmp_path / "run"), *DECLARED]
    out = run_cli(*run, timeout=300)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    # whichever local actor reaches its third start-up failure first stops the run, quoting
    # the end of its log (each actor's output goes to RUN_DIR/actors/actor-<i>.log)
    failed = re.search(r"local actor (\d+) exited with status 1 .* 3 times in a row", out.stderr)
    assert failed, out.stderr[-2000:]
    quoted = out.stderr[failed.end() :]
    assert "accelrl actor: unknown env family 'robot'" in quoted, out.stderr[-2000:]
    log = (tmp_path / "run" / "actors" / f"actor-{failed.group(1)}.log").read_text()
    assert log.count("--- accelrl: actor started") == 3
    assert log.count("unknown env family 'robot'") == 3


def test_eval_of_a_run_whose_env_only_actors_build_names_the_env(tmp_path):
    save_config(
        apply_overrides(load_preset("cartpole_vtrace_bridge"), DECLARED), tmp_path / "config.yaml"
    )
    out = run_cli("eval", str(tmp_path), "--episodes", "2", timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "bridge.env 'robot:Arm': accelrl eval steps the env in this process" in out.stderr
    assert "Traceback" not in out.stderr
