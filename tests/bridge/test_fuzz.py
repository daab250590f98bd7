"""Malformed traffic is refused with INVALID_ARGUMENT; the server keeps serving a good actor."""

import time

import grpc
import numpy as np
import pytest
from bridge_helpers import Stream, serve

from accelrl.bridge.codec import EnvSpec, encode_steps, handshake_message

SPEC = EnvSpec((4,), "float32", num_actions=2)


def steps(ids, obs=None, reward=None, final=None, terminated=None):
    n = len(ids)
    obs = np.zeros((n, 4), np.float32) if obs is None else obs
    reward = np.ones(n, np.float32) if reward is None else reward
    term = np.zeros(n, bool) if terminated is None else terminated
    final = np.zeros((int(term.sum()), 4), np.float32) if final is None else final
    return encode_steps(np.asarray(ids), obs, reward, term, np.zeros(n, bool), final)


def handshake(stream, num_envs=2):
    stream.send(handshake_message(SPEC, "gymnasium:CartPole-v1", num_envs))
    return list(stream.read().handshake_reply.env_ids)


def garbage_cases(own_ids, foreign_ids):
    bad_dtype = steps(own_ids, obs=np.zeros((2, 4), np.float64))
    bad_shape = steps(own_ids, obs=np.zeros((2, 3), np.float32))
    truncated = steps(own_ids)
    truncated.steps.observation.data = truncated.steps.observation.data[:-3]
    huge = steps(own_ids)
    huge.steps.observation.shape[:] = [2, 1 << 30]
    over_actor_limit = steps(own_ids)  # within the transport limit (16 envs), over this actor's
    over_actor_limit.steps.observation.data = b"\0" * 5000
    return {
        "wrong dtype": [bad_dtype],
        "wrong shape": [bad_shape],
        "truncated bytes": [truncated],
        "nan reward": [steps(own_ids, reward=np.array([np.nan, 0], np.float32))],
        "huge shape": [huge],
        "over the actor's size limit": [over_actor_limit],
        "foreign env ids": [steps(foreign_ids)],
        "garbage protobuf": [b"\xff\xfe\x00garbage\x12\x99"],
        "truncated protobuf": [steps(own_ids).SerializeToString()[:-5]],
        "second handshake": [handshake_message(SPEC, "x", 2)],
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc, port = serve(
        tmp_path_factory.mktemp("fuzz"),
        "total_env_steps=100000000",
        "bridge.max_envs_per_actor=16",
        "bridge.handshake_timeout_s=1.5",
    )
    yield proc, port
    proc.kill()


def test_fuzz_refused_while_good_actor_served(server):
    proc, port = server
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        good = Stream(channel)
        good_ids = handshake(good)

        def good_round_trip():
            good.send(steps(good_ids))
            reply = good.read()
            assert reply.actions.action.shape == [2]

        good_round_trip()
        # no handshake: a Steps message first, and an empty message first
        for first in (steps([0, 1]), b""):
            bad = Stream(channel)
            bad.send(first)
            with pytest.raises(grpc.RpcError) as info:
                bad.read()
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
            good_round_trip()
        # spec mismatch at handshake
        bad = Stream(channel)
        bad.send(handshake_message(EnvSpec((5,), "float32", 2), "x", 2))
        with pytest.raises(grpc.RpcError) as info:
            bad.read()
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "mismatch" in info.value.details()

        for name in garbage_cases([0, 1], good_ids):
            bad = Stream(channel)
            own = handshake(bad)
            cases = garbage_cases(own, good_ids)[name]
            for message in cases:
                bad.send(message)
            with pytest.raises(grpc.RpcError) as info:
                bad.read()
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (
                name,
                info.value.code(),
                info.value.details(),
            )
            good_round_trip()
        # beyond the transport limit gRPC itself refuses the message
        bad = Stream(channel)
        own = handshake(bad)
        huge = steps(own)
        huge.steps.observation.data = b"\0" * 200_000
        bad.send(huge)
        with pytest.raises(grpc.RpcError) as info:
            bad.read()
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        good_round_trip()
        good.close()
    assert proc.alive()


def test_silent_stream_dropped_after_handshake_timeout(server):
    """A stream that opens and sends nothing is dropped after bridge.handshake_timeout_s."""
    proc, port = server
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        silent = Stream(channel)
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as info:
            silent.read()
        waited = time.monotonic() - started
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, info.value.details()
        assert "no handshake within 1.5 s" in info.value.details()
        assert 1.0 < waited < 20.0, waited
        good = Stream(channel)  # the server still serves others
        ids = handshake(good)
        good.send(steps(ids))
        assert good.read().actions.action.shape == [2]
        good.close()
        silent.close()
    assert proc.alive()
