"""The bridge actor: steps E CPU environments and asks the learner for their actions.

Imports numpy, grpcio and the environment only (never JAX), so it runs in whatever Python the
game needs:

    python -m accelrl.bridge.actor --server HOST:PORT --env gymnasium:ALE/Pong-v5 --num-envs 8
    accelrl actor --server HOST:PORT --env gymnasium:CartPole-v1 --num-envs 16

Each tick sends ONE message with the steps of all E envs (the observation to act on, the reward
of the previous action, terminated and truncated kept apart, and the final observation of
every env whose episode just ended, so the learner can bootstrap a truncated one) and waits for
the E actions. With `--groups K` the E envs are split into K groups with one message each in
flight (Sample Factory's double-buffered sampling): while the learner chooses one group's
actions, the actor steps another's, so env stepping overlaps with inference and the round
trip. After a disconnect (learner restart) it reconnects with exponential backoff and
resets its envs: the server resets their recurrent state too. A learner with no room for its
envs (RESOURCE_EXHAUSTED) is retried the same way, as room frees when other actors leave, and
the actor says so. It exits when the server says training is done, or after `--give-up-after`
seconds without a connection, naming the last refusal.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import deque
from typing import Any, NamedTuple

import grpc
import numpy as np

from accelrl.bridge import bridge_pb2_grpc as pb_grpc
from accelrl.bridge.address import check_server_target
from accelrl.bridge.codec import (
    EnvSpec,
    ProtocolError,
    decode_tensor,
    encode_steps,
    handshake_message,
)
from accelrl.bridge.envs import UnsupportedEnv, env_spec, make_env
from accelrl.bridge.event_loop import use_uvloop

FATAL_CODES = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNIMPLEMENTED,
)
"""Errors that retrying cannot fix: the actor stops with the server's message."""


class ActorRejected(RuntimeError):
    """The server refused this actor (bad token, spec mismatch, malformed data)."""


def channel_options(spec: EnvSpec, num_envs: int) -> list[tuple[str, Any]]:
    """Message limits derived from the spec (pitfall: gRPC's 4 MiB default)."""
    limit = spec.max_steps_message_bytes(num_envs)
    return [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
    ]


class Steps(NamedTuple):
    """What a group of envs sends: see `encode_steps`."""

    observation: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_observation: np.ndarray


class Actor:
    """E environments of `env_id`, driven by the learner at `server`."""

    def __init__(
        self,
        server: str,
        env_id: str,
        num_envs: int,
        token: str = "",
        seed: int = 0,
        tls_ca: bytes | None = None,
        sticky_actions: float = 0.25,
        give_up_after: float = 300.0,
        name: str = "",
        groups: int = 1,
    ) -> None:
        """`groups`: messages in flight at once, each with the steps of E/groups envs."""
        if not 1 <= groups <= num_envs:
            raise ValueError(f"groups must be in 1..num_envs ({num_envs}), got {groups}")
        self.server = server
        self.env_id = env_id
        self.envs = [make_env(env_id, sticky_actions) for _ in range(num_envs)]
        self.spec = env_spec(self.envs[0])
        self.token = token
        self.seed = seed
        self.tls_ca = tls_ca
        self.give_up_after = give_up_after
        self.name = name or f"{os.uname().nodename}:{os.getpid()}"
        self.groups = np.array_split(np.arange(num_envs), groups)
        self.connections = 0
        self.env_steps = 0
        self._resets = 0
        self.last_contact = time.monotonic()
        self.connected_since_backoff = False

    def _channel(self) -> grpc.aio.Channel:
        options = channel_options(self.spec, len(self.envs))
        if self.tls_ca is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates=self.tls_ca)
            return grpc.aio.secure_channel(self.server, credentials, options=options)
        return grpc.aio.insecure_channel(self.server, options=options)

    def _reset_all(self) -> np.ndarray:
        observations = []
        for i, env in enumerate(self.envs):
            seed = self.seed * 100_003 + i if self._resets == 0 else None
            observations.append(np.asarray(env.reset(seed=seed)[0]))
        self._resets += 1
        return np.stack(observations).astype(self.spec.observation_dtype, copy=False)

    async def run(self) -> None:
        """Act until the server says done; reconnect with backoff after disconnects."""
        backoff = 0.05
        self.last_contact = time.monotonic()
        last_error = ""
        while True:
            try:
                async with self._channel() as channel:
                    done = await self._session(pb_grpc.ActorBridgeStub(channel))
                if done:
                    return
            except grpc.aio.AioRpcError as error:
                if error.code() in FATAL_CODES:
                    raise ActorRejected(f"{error.code().name}: {error.details()}") from None
                # otherwise the learner is gone or restarting (UNAVAILABLE, CANCELLED...), or
                # full for now (RESOURCE_EXHAUSTED: room frees when other actors leave)
                reason = f"{error.code().name}: {error.details()}"
                if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and reason != last_error:
                    print(f"accelrl actor: {reason}; retrying", file=sys.stderr, flush=True)
                last_error = reason
            if self.connected_since_backoff:
                backoff, self.connected_since_backoff = 0.05, False
            if time.monotonic() - self.last_contact > self.give_up_after:
                raise ConnectionError(
                    f"could not reach a learner at {self.server} that takes this actor for "
                    f"{self.give_up_after:.0f} s; giving up"
                    + (f" (last refusal: {last_error})" if last_error else "")
                )
            await asyncio.sleep(backoff * (0.5 + np.random.random()))
            backoff = min(backoff * 2, 2.0)

    async def _session(self, stub: pb_grpc.ActorBridgeStub) -> bool:
        """One connection: handshake, then tick until the stream ends. True when done."""
        call = stub.Act()
        message = handshake_message(self.spec, self.env_id, len(self.envs), self.token, self.name)
        await call.write(message)
        reply = await call.read()
        if reply is not grpc.aio.EOF and reply.HasField("actions") and reply.actions.done:
            return True  # training already finished
        if reply is grpc.aio.EOF or not reply.HasField("handshake_reply"):
            await call.code()  # raises the status the server ended with
            return False
        self.connections += 1
        self.connected_since_backoff = True
        self.last_contact = time.monotonic()
        ids = np.asarray(reply.handshake_reply.env_ids, np.int32)
        first = self._reset_all()
        in_flight: deque[np.ndarray] = deque()
        for group in self.groups:
            n = len(group)
            await call.write(
                encode_steps(
                    ids[group],
                    first[group],
                    np.zeros(n, np.float32),
                    np.zeros(n, bool),
                    np.zeros(n, bool),
                    first[:0],
                )
            )
            in_flight.append(group)
        while True:  # replies come in the order of the messages
            response = await call.read()
            if response is grpc.aio.EOF:
                await call.code()
                return False
            self.last_contact = time.monotonic()
            actions = response.actions
            if actions.done:
                return True
            group = in_flight.popleft()
            action = decode_tensor(
                actions.action,
                "action",
                self.spec.action_dtype,
                (len(group), *self.spec.action_shape),
            )
            await call.write(encode_steps(ids[group], *self._step(group, action)))
            in_flight.append(group)

    def _step(self, group: np.ndarray, action: np.ndarray) -> Steps:
        """Step the envs of `group` with their actions; reset those whose episode ended.

        Per env only the env's own calls and list appends: the arrays are built once per
        group (per-element numpy writes cost more than a trivial env's step)."""
        actions = action.tolist() if self.spec.discrete else list(action)
        rewards, terminated, truncated, observations, finals = [], [], [], [], []
        for i, a in zip(group.tolist(), actions, strict=True):
            env = self.envs[i]
            obs, r, term, trunc, _ = env.step(a)
            rewards.append(r)
            terminated.append(term)
            truncated.append(trunc)
            if term or trunc:
                finals.append(np.array(obs))  # a copy: reset may rewrite the env's buffer
                obs, _ = env.reset()
            observations.append(obs)
        self.env_steps += len(actions)
        dtype = self.spec.observation_dtype
        final = (
            np.stack(finals).astype(dtype, copy=False)
            if finals
            else np.zeros((0, *self.spec.observation_shape), dtype)
        )
        return Steps(
            np.stack(observations).astype(dtype, copy=False),
            np.asarray(rewards, np.float32),
            np.asarray(terminated, bool),
            np.asarray(truncated, bool),
            final,
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelrl actor", description="Step CPU envs for an accelrl bridge learner."
    )
    parser.add_argument(
        "--server", required=True, help="HOST:PORT of `accelrl serve` (or a proxy's unix:PATH)"
    )
    parser.add_argument("--env", required=True, help="e.g. gymnasium:CartPole-v1")
    parser.add_argument("--num-envs", type=int, default=8, help="envs of this actor (E)")
    parser.add_argument(
        "--groups",
        type=int,
        default=1,
        help="messages in flight, each with E/groups envs: 2 overlaps env stepping with "
        "inference (double-buffered sampling)",
    )
    parser.add_argument("--token", default=os.environ.get("ACCELRL_BRIDGE_TOKEN", ""))
    parser.add_argument("--tls-ca", help="PEM root certificate: connect with TLS")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sticky-actions", type=float, default=0.25, help="Atari only")
    parser.add_argument("--give-up-after", type=float, default=300.0, help="seconds")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `accelrl actor`; exit 0 when training is done, 1 on refusal/give-up."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.num_envs < 1:
        parser.error(f"--num-envs must be at least 1, got {args.num_envs}")
    if not 1 <= args.groups <= args.num_envs:
        parser.error(f"--groups must be in 1..--num-envs ({args.num_envs}), got {args.groups}")
    try:
        check_server_target(args.server)
    except ValueError as error:
        parser.error(f"--server: {error}")
    if args.tls_ca and not os.path.isfile(args.tls_ca):
        parser.error(f"--tls-ca: no file {args.tls_ca!r}")
    use_uvloop()
    tls_ca = open(args.tls_ca, "rb").read() if args.tls_ca else None
    try:
        actor = Actor(
            args.server,
            args.env,
            args.num_envs,
            token=args.token,
            seed=args.seed,
            tls_ca=tls_ca,
            sticky_actions=args.sticky_actions,
            give_up_after=args.give_up_after,
            groups=args.groups,
        )
        asyncio.run(actor.run())
    except (ActorRejected, ConnectionError, ProtocolError, UnsupportedEnv) as error:
        print(f"accelrl actor: {error}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
