"""numpy <-> protobuf for the bridge, with validation. JAX-free (the actor imports it).

Tensors travel as raw C-order little-endian bytes + dtype name + shape; nothing is ever
unpickled. `decode_tensor` checks dtype, shape and byte count against what the handshake
declared before it touches the bytes, and `decode_steps` checks every field of a Steps message
(ids owned by the sender and unique, finite rewards, sizes). Problems raise `ProtocolError`,
which the server turns into an INVALID_ARGUMENT status for that actor only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from accelrl.bridge import bridge_pb2 as pb

ALLOWED_DTYPES = (
    "bool",
    "uint8",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "float16",
    "float32",
    "float64",
)
"""dtype names a Tensor may carry (no object/void/string dtypes: nothing that needs pickle)."""

_LITTLE = {name: np.dtype(name).newbyteorder("<") for name in ALLOWED_DTYPES}
_NAMES = {np.dtype(name).newbyteorder(order): name for name in ALLOWED_DTYPES for order in "<>"}
"""Each allowed dtype, in either byte order, to its name: a dict lookup costs 0.1 us where
numpy's `dtype.name` (Python code) costs ~4, and encoding fills five tensors per message."""

MAX_TENSOR_BYTES = 512 * 1024 * 1024
"""Absolute cap on one decoded tensor, whatever the spec says."""


class ProtocolError(ValueError):
    """A message that does not follow the protocol or the handshake's spec."""


@dataclass(frozen=True)
class EnvSpec:
    """What one environment step looks like, as declared in the handshake.

    `num_actions > 0` means discrete actions 0..n-1; a non-empty `action_nvec` an integer
    vector whose component i is in 0..action_nvec[i]-1 (gymnasium's MultiDiscrete); otherwise
    a continuous box `[action_low, action_high]`.
    """

    observation_shape: tuple[int, ...]
    observation_dtype: str
    num_actions: int = 0
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()
    action_nvec: tuple[int, ...] = ()

    @property
    def discrete(self) -> bool:
        """One integer action (num_actions > 0)."""
        return self.num_actions > 0

    @property
    def integer_actions(self) -> bool:
        """Actions are integers: one (discrete) or a vector of them (action_nvec)."""
        return self.discrete or bool(self.action_nvec)

    @cached_property
    def observation_bytes(self) -> int:
        return (
            int(np.prod(self.observation_shape, dtype=np.int64))
            * np.dtype(self.observation_dtype).itemsize
        )

    @property
    def action_shape(self) -> tuple[int, ...]:
        if self.discrete:
            return ()
        return (len(self.action_nvec or self.action_low),)

    @property
    def action_dtype(self) -> str:
        return "int32" if self.integer_actions else "float32"

    def max_steps_message_bytes(self, num_envs: int) -> int:
        """Upper bound on a valid Steps message for `num_envs` envs (obs + final obs + small)."""
        return 2 * num_envs * self.observation_bytes + 64 * num_envs + 4096

    def describe(self) -> str:
        if self.discrete:
            actions = f"{self.num_actions} discrete actions"
        elif self.action_nvec:
            actions = f"multi-discrete actions nvec={list(self.action_nvec)}"
        else:
            actions = f"box actions low={list(self.action_low)} high={list(self.action_high)}"
        return f"observation {self.observation_dtype}{list(self.observation_shape)}, {actions}"


def encode_tensor(array: np.ndarray) -> pb.Tensor:
    """A Tensor message holding `array`'s bytes (little-endian, C order)."""
    return fill_tensor(pb.Tensor(), array)


def fill_tensor(tensor: pb.Tensor, array: np.ndarray) -> pb.Tensor:
    """Write `array` into `tensor`, a field of a message being built (protobuf copies a
    submessage passed to a constructor: filling the field in place saves that copy)."""
    array = np.asarray(array)
    name = _NAMES.get(array.dtype)
    if name is None:
        raise ProtocolError(f"dtype {array.dtype.name!r} cannot travel over the bridge")
    if array.dtype.byteorder == ">":
        array = array.astype(_LITTLE[name])
    tensor.dtype = name
    tensor.shape.extend(array.shape)
    tensor.data = array.tobytes()  # C order
    return tensor


def decode_tensor(
    tensor: pb.Tensor,
    name: str,
    dtype: str | None = None,
    shape: tuple[int | None, ...] | None = None,
    max_bytes: int = MAX_TENSOR_BYTES,
) -> np.ndarray:
    """The array in `tensor`, checked against the expected `dtype` and `shape` (None: any size).

    The result is a read-only view of the message's bytes (no copy).
    """
    dims = tuple(tensor.shape)
    found = tensor.dtype  # each access of a field builds a new Python object: read once
    if found != dtype or dims != shape:  # else both are the caller's valid ones
        _check_header(tensor, name, dtype, shape, dims)
    little = _LITTLE[found]
    size = math.prod(dims) * little.itemsize
    if size > max_bytes:
        raise ProtocolError(f"{name}: {size} bytes exceed the limit of {max_bytes}")
    data = tensor.data  # (a bytes field's access may also copy it)
    if len(data) != size:
        raise ProtocolError(
            f"{name}: {len(data)} bytes of data for shape {list(dims)} {found} ({size} expected)"
        )
    array = np.frombuffer(data, dtype=little)
    return array if len(dims) == 1 else array.reshape(dims)


def _check_header(
    tensor: pb.Tensor,
    name: str,
    dtype: str | None,
    shape: tuple[int | None, ...] | None,
    dims: tuple[int, ...],
) -> None:
    """Raise ProtocolError unless `tensor`'s dtype and `dims` are allowed and as expected."""
    if tensor.dtype not in ALLOWED_DTYPES:
        raise ProtocolError(f"{name}: dtype {tensor.dtype!r} is not allowed")
    if dtype is not None and tensor.dtype != dtype:
        raise ProtocolError(f"{name}: dtype {tensor.dtype} where {dtype} was expected")
    if len(dims) > 8 or (dims and min(dims) < 0):
        raise ProtocolError(f"{name}: invalid shape {list(dims)}")
    if shape is not None and not _shape_matches(dims, shape):
        expected = ["*" if e is None else e for e in shape]
        raise ProtocolError(f"{name}: shape {list(dims)} where {expected} was expected")


def _shape_matches(dims: tuple[int, ...], shape: tuple[int | None, ...]) -> bool:
    """Whether `dims` fits `shape`, where None in `shape` matches any size."""
    return len(dims) == len(shape) and all(
        e is None or d == e for d, e in zip(dims, shape, strict=True)
    )


def spec_from_handshake(handshake: pb.Handshake) -> EnvSpec:
    """The EnvSpec an actor declared; malformed declarations raise ProtocolError."""
    if handshake.observation_dtype not in ALLOWED_DTYPES:
        raise ProtocolError(f"observation dtype {handshake.observation_dtype!r} is not allowed")
    shape = tuple(int(d) for d in handshake.observation_shape)
    if any(d <= 0 for d in shape) or len(shape) > 6:
        raise ProtocolError(f"invalid observation shape {list(shape)}")
    low, high = tuple(handshake.action_low), tuple(handshake.action_high)
    nvec = tuple(int(n) for n in handshake.action_nvec)
    if handshake.num_actions < 0:
        raise ProtocolError(f"num_actions {handshake.num_actions} is negative")
    kinds = (handshake.num_actions > 0) + bool(nvec) + bool(low or high)
    if kinds != 1:
        raise ProtocolError(
            "declare one action space: num_actions > 0, action_nvec, or action_low/high"
        )
    if nvec and (min(nvec) < 1 or len(nvec) > 64):
        raise ProtocolError(f"action_nvec {list(nvec)}: 1 to 64 entries, each >= 1")
    if (low or high) and len(low) != len(high):
        raise ProtocolError("a continuous action space needs action_low/high of equal length")
    return EnvSpec(shape, handshake.observation_dtype, handshake.num_actions, low, high, nvec)


def handshake_message(
    spec: EnvSpec, env_id: str, num_envs: int, token: str = "", actor_name: str = ""
) -> pb.ActorMessage:
    """The first message of a stream."""
    return pb.ActorMessage(
        handshake=pb.Handshake(
            token=token,
            env_id=env_id,
            observation_dtype=spec.observation_dtype,
            observation_shape=spec.observation_shape,
            num_actions=spec.num_actions,
            action_low=spec.action_low,
            action_high=spec.action_high,
            num_envs=num_envs,
            actor_name=actor_name,
            action_nvec=spec.action_nvec,
        )
    )


class DecodedSteps(NamedTuple):
    env_ids: np.ndarray  # [n] int32
    observation: np.ndarray  # [n, *obs]
    reward: np.ndarray  # [n] float32
    terminated: np.ndarray  # [n] bool
    truncated: np.ndarray  # [n] bool
    final_observation: np.ndarray  # [d, *obs], d = number of done envs


def concatenate_steps(parts: list[DecodedSteps]) -> DecodedSteps:
    """The steps of several messages as one (their env ids are distinct slots)."""
    if len(parts) == 1:
        return parts[0]
    return DecodedSteps(*(np.concatenate(field) for field in zip(*parts, strict=True)))


def encode_steps(
    env_ids: np.ndarray,
    observation: np.ndarray,
    reward: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    final_observation: np.ndarray,
) -> pb.ActorMessage:
    """A Steps message (see bridge.proto for the meaning of each field)."""
    message = pb.ActorMessage()
    steps = message.steps
    steps.env_ids.extend(np.asarray(env_ids, np.int32).tolist())
    fill_tensor(steps.observation, observation)
    fill_tensor(steps.reward, np.asarray(reward, np.float32))
    fill_tensor(steps.terminated, np.asarray(terminated, bool))
    fill_tensor(steps.truncated, np.asarray(truncated, bool))
    fill_tensor(steps.final_observation, final_observation)
    return message


def actions_message(action: np.ndarray, policy_version: int) -> pb.ServerMessage:
    """The server's reply to a Steps message: one action per env, in the message's order."""
    message = pb.ServerMessage()
    message.actions.policy_version = policy_version
    fill_tensor(message.actions.action, action)
    return message


def decode_steps(
    steps: pb.Steps, spec: EnvSpec, owned: np.ndarray, usual: np.ndarray | None = None
) -> DecodedSteps:
    """Validate a Steps message against the actor's `spec` and its `owned` env ids.

    `owned` is a boolean mask over all env ids of the server (True where this actor owns it).
    `usual` (optional): the ids the actor was given, in order. A message listing exactly these
    (every message of the actor in this repo) skips the per-id ownership and uniqueness checks,
    which they pass by construction, and shares that array as `env_ids`.

    The server decodes every message of every actor, so the usual message (every tensor's
    header as the spec says, no episode ended) takes a path of few numpy calls: each costs
    about a microsecond whatever the size, more than the bytes of a small message.
    """
    n = len(steps.env_ids)
    if n == 0:
        raise ProtocolError("env_ids is empty")
    if usual is not None and n == len(usual) and steps.env_ids == usual.tolist():
        ids = usual
    else:
        ids = _checked_ids(steps, owned)
    obs_dims = spec.observation_shape
    limit = n * spec.observation_bytes
    observation = decode_tensor(
        steps.observation, "observation", spec.observation_dtype, (n, *obs_dims), limit
    )
    reward = decode_tensor(steps.reward, "reward", "float32", (n,))
    if not all_finite(reward):
        raise ProtocolError("reward is not finite")
    terminated = decode_tensor(steps.terminated, "terminated", "bool", (n,))
    truncated = decode_tensor(steps.truncated, "truncated", "bool", (n,))
    # bool tensors travel one byte per env: all zero bytes is the usual "no episode ended"
    nothing_done = steps.terminated.data.count(0) == n and steps.truncated.data.count(0) == n
    num_done = 0 if nothing_done else int(np.count_nonzero(terminated | truncated))
    final = decode_tensor(
        steps.final_observation,
        "final_observation",
        spec.observation_dtype,
        (num_done, *obs_dims),
        limit,
    )
    if observation.dtype.kind == "f":
        if not all_finite(observation) or (final.size and not all_finite(final)):
            raise ProtocolError("observation is not finite")
    return DecodedSteps(ids, observation, reward, terminated, truncated, final)


def all_finite(array: np.ndarray) -> bool:
    """Whether every element of the float `array` is finite, in one numpy call.

    Its dot product with zeros is 0 when every element is finite and NaN otherwise (inf * 0 and
    NaN * 0 are NaN, and a sum with a NaN is NaN): ~0.5 us for a small array, where
    `np.isfinite(array).all()` makes two calls and a temporary (~1.3 us). `np.vdot` (any shape,
    flattened) rather than `dot`, which turns the invalid inf * 0 into a RuntimeWarning: that
    would be an exception, not a refusal, where warnings are errors.
    """
    return math.isfinite(np.vdot(array, _zeros(array.dtype, array.size)))


def _zeros(dtype: np.dtype, size: int) -> np.ndarray:
    """A read-only zero vector of `dtype` with at least `size` elements (grown as needed)."""
    zeros = _ZEROS.get(dtype)
    if zeros is None or zeros.size < size:
        zeros = np.zeros(max(size, 1024), dtype)
        zeros.flags.writeable = False
        _ZEROS[dtype] = zeros
    return zeros[:size]


_ZEROS: dict[np.dtype, np.ndarray] = {}


def _checked_ids(steps: pb.Steps, owned: np.ndarray) -> np.ndarray:
    """`steps.env_ids` as an array, after checking each is owned and none repeats."""
    n = len(steps.env_ids)
    ids = np.fromiter(steps.env_ids, np.int32, n)
    if ids.min() < 0 or ids.max() >= owned.size or not owned[ids].all():
        raise ProtocolError(f"env_ids {sorted(set(ids.tolist()) - _owned(owned))} are not yours")
    ordered = np.sort(ids)
    if n > 1 and not (ordered[1:] != ordered[:-1]).all():
        raise ProtocolError("env_ids repeat an id")
    return ids


def _owned(owned: np.ndarray) -> set[int]:
    return set(np.flatnonzero(owned).tolist())
