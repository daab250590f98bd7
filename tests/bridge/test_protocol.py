"""The bridge protocol: generated code in sync with the .proto, a JAX-free actor, the codec."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accelrl.bridge import bridge_pb2 as pb
from accelrl.bridge.codec import (
    EnvSpec,
    ProtocolError,
    all_finite,
    decode_steps,
    decode_tensor,
    encode_steps,
    encode_tensor,
    handshake_message,
    spec_from_handshake,
)

ROOT = Path(__file__).resolve().parents[2]
SPEC = EnvSpec((4,), "float32", num_actions=2)


def test_generated_code_matches_proto(tmp_path):
    pytest.importorskip("grpc_tools")
    (tmp_path / "accelrl" / "bridge").mkdir(parents=True)
    (tmp_path / "accelrl/bridge/bridge.proto").write_bytes(
        (ROOT / "accelrl/bridge/bridge.proto").read_bytes()
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I.",
            "--python_out=.",
            "--grpc_python_out=.",
            "accelrl/bridge/bridge.proto",
        ],
        cwd=tmp_path,
        check=True,
        timeout=60,
    )
    for name in ("bridge_pb2.py", "bridge_pb2_grpc.py"):
        fresh = (tmp_path / "accelrl/bridge" / name).read_text()
        checked_in = (ROOT / "accelrl/bridge" / name).read_text()
        assert fresh == checked_in, f"{name} is stale: run `make proto`"


def test_actor_imports_without_jax():
    code = (
        "import sys\n"
        "for name in ('jax', 'jaxlib', 'flax', 'optax'):\n"
        "    sys.modules[name] = None  # any import of them raises ImportError\n"
        "import accelrl.bridge.actor as actor\n"
        "import accelrl.bridge.envs, accelrl.bridge.grf\n"
        "env = actor.make_env('gymnasium:CartPole-v1')\n"
        "print(actor.env_spec(env))\n"
        "assert not any(m.startswith('jax') for m in sys.modules if sys.modules[m])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "float32" in out.stdout


def test_tensor_roundtrip_and_checks():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = decode_tensor(encode_tensor(x), "x", "float32", (3, 4))
    np.testing.assert_array_equal(x, y)
    with pytest.raises(ProtocolError, match="dtype"):
        decode_tensor(encode_tensor(x), "x", "uint8", (3, 4))
    with pytest.raises(ProtocolError, match="shape"):
        decode_tensor(encode_tensor(x), "x", "float32", (4, 3))
    bad = encode_tensor(x)
    bad.data = bad.data[:-1]
    with pytest.raises(ProtocolError, match="bytes"):
        decode_tensor(bad, "x", "float32", (3, 4))
    with pytest.raises(ProtocolError, match="not allowed"):
        decode_tensor(pb.Tensor(dtype="object", shape=[1], data=b"x"), "x")
    with pytest.raises(ProtocolError, match="exceed"):
        decode_tensor(pb.Tensor(dtype="float32", shape=[1 << 40], data=b""), "x")


def test_tensor_encoding_sends_little_endian_and_refuses_other_dtypes():
    big = np.arange(6, dtype=">i4").reshape(2, 3)
    tensor = encode_tensor(big)
    assert tensor.dtype == "int32" and tensor.data == big.astype("<i4").tobytes()
    np.testing.assert_array_equal(decode_tensor(tensor, "x", "int32", (2, 3)), big)
    for dtype in ("O", "U3", "complex64", "datetime64[s]", [("a", "f4")]):
        with pytest.raises(ProtocolError, match="cannot travel"):
            encode_tensor(np.zeros(2, dtype))


def _steps(ids, reward=None, obs=None, terminated=None, final=None):
    n = len(ids)
    obs = np.zeros((n, 4), np.float32) if obs is None else obs
    reward = np.zeros(n, np.float32) if reward is None else reward
    terminated = np.zeros(n, bool) if terminated is None else terminated
    final = np.zeros((int(terminated.sum()), 4), np.float32) if final is None else final
    return encode_steps(np.asarray(ids), obs, reward, terminated, np.zeros(n, bool), final).steps


def test_decode_steps_validates():
    owned = np.zeros(16, bool)
    owned[[3, 4, 5]] = True
    ok = decode_steps(_steps([3, 5], terminated=np.array([True, False])), SPEC, owned)
    assert ok.final_observation.shape == (1, 4)
    cases = {
        "not yours": _steps([3, 6]),
        "repeat": _steps([3, 3]),
        "finite": _steps([3], reward=np.array([np.nan], np.float32)),
        "reward is not finite": _steps([3, 4], reward=np.array([0, -np.inf], np.float32)),
        "observation is not finite": _steps([3], obs=np.array([[0, 0, np.inf, 0]], np.float32)),
        "dtype": _steps([3], obs=np.zeros((1, 4), np.float64)),
        "shape": _steps([3], obs=np.zeros((1, 5), np.float32)),
        "final_observation": _steps(
            [3], terminated=np.array([True]), final=np.zeros((0, 4), np.float32)
        ),
    }
    usual = np.array([3, 4, 5], np.int32)  # the ids the actor was given
    for fragment, steps in cases.items():
        with pytest.raises(ProtocolError, match=fragment):
            decode_steps(steps, SPEC, owned)
        with pytest.raises(ProtocolError, match=fragment):
            decode_steps(steps, SPEC, owned, usual)
    # the usual ids in their usual order skip the per-id checks; any other list is checked
    fast = decode_steps(_steps([3, 4, 5]), SPEC, owned, usual)
    assert fast.env_ids is usual
    np.testing.assert_array_equal(decode_steps(_steps([5, 3]), SPEC, owned, usual).env_ids, [5, 3])
    with pytest.raises(ProtocolError, match="repeat"):
        decode_steps(_steps([3, 4, 4]), SPEC, owned, usual)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_all_finite_finds_every_non_finite_element(dtype):
    rng = np.random.default_rng(0)
    for size in [*range(1, 40), 255, 1000, 5000]:  # vector loops' bodies and tails
        x = rng.uniform(-1e3, 1e3, size).astype(dtype)
        x[rng.integers(size)] = np.finfo(dtype).max  # large but finite
        assert all_finite(x)
        for bad in (np.nan, np.inf, -np.inf):
            for i in {0, size // 2, size - 1}:
                y = x.copy()
                y[i] = bad
                assert not all_finite(y), (size, bad, i)
    assert all_finite(np.zeros((3, 0, 2), dtype))
    grid = np.ones((2, 3, 4), dtype)
    grid[1, 2, 3] = np.nan
    assert not all_finite(grid) and all_finite(grid[:, :, :3])  # any shape, views included


def test_handshake_spec_roundtrip():
    spec = EnvSpec((84, 84), "uint8", 6)
    assert spec_from_handshake(handshake_message(spec, "x", 8).handshake) == spec
    box = EnvSpec((3,), "float32", 0, (-2.0,), (2.0,))
    assert spec_from_handshake(handshake_message(box, "x", 8).handshake) == box
    multi = EnvSpec((7,), "float32", action_nvec=(3, 4))
    assert spec_from_handshake(handshake_message(multi, "x", 8).handshake) == multi
    assert multi.action_shape == (2,) and multi.action_dtype == "int32"
    for bad, fragment in [
        (EnvSpec((7,), "float32", 2, action_nvec=(3, 4)), "declare one action space"),
        (EnvSpec((7,), "float32"), "declare one action space"),
        (EnvSpec((7,), "float32", action_nvec=(3, 0)), "each >= 1"),
    ]:
        with pytest.raises(ProtocolError, match=fragment):
            spec_from_handshake(handshake_message(bad, "x", 8).handshake)


def test_server_frame_stack():
    """Frames stack on the server along a new last axis; an episode start repeats the frame."""
    from accelrl.bridge.slots import SlotTable

    table = SlotTable(4, (2, 2, 4), "uint8", 4, (), "int32", ())
    slots = np.array([1, 2])
    frames = np.stack([np.full((2, 2), 1, np.uint8), np.full((2, 2), 2, np.uint8)])
    first = table.stack(slots, frames, np.array([True, True]))
    assert first.shape == (2, 2, 2, 4) and np.all(first[0] == 1) and np.all(first[1] == 2)
    table.pending_obs[slots] = first
    nxt = table.stack(slots, frames + 10, np.array([False, True]))
    np.testing.assert_array_equal(nxt[0, 0, 0], [1, 1, 1, 11])
    np.testing.assert_array_equal(nxt[1, 0, 0], [12, 12, 12, 12])


@pytest.mark.parametrize(
    ("frame", "stack", "dtype"),
    [((5, 6), 4, np.uint8), ((5, 6, 2), 2, np.uint8), ((5, 6, 1), 2, np.uint16), ((3,), 2, "f4")],
)
def test_frame_stack_fast_path_matches_general(frame, stack, dtype):
    """Stacks of <= 8 bytes per pixel roll as integer words; any other stack (here float64,
    16 bytes) takes the general path: both give the same observations, episode starts included.
    """
    from accelrl.bridge.slots import SlotTable

    agent_obs = (*frame, stack) if len(frame) == 2 else (*frame[:-1], frame[-1] * stack)
    fast = SlotTable(8, agent_obs, dtype, stack, (), "int32", ())
    general = SlotTable(8, agent_obs, np.float64, stack, (), "int32", ())
    rng = np.random.default_rng(0)
    ids = np.array([1, 4, 6])
    for _ in range(6):
        frames = rng.integers(0, 200, (3, *frame)).astype(dtype)
        starts = rng.random(3) < 0.3
        a = fast.stack(ids, frames, starts)
        b = general.stack(ids, frames.astype(np.float64), starts)
        assert a.dtype == np.dtype(dtype) and a.shape == (3, *agent_obs)
        np.testing.assert_array_equal(a, b)
        fast.pending_obs[ids], general.pending_obs[ids] = a, b
