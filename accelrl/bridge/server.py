"""The bridge learner server: the gRPC service, handshake and validation, and its lifecycle.

One grpc.aio server; each actor holds one bidirectional stream (`Act`). On the event loop a
stream is validated (handshake within `bridge.handshake_timeout_s`, token, env spec, then every
message, see codec.py; a refusal ends only that stream) and its messages are batched
(batching.py). A batch of messages, from one actor or several, is acted on as one: acting
inputs from the slots' state, inference (inference.py), one reply per message, and then, while
the actors step their envs, the bookkeeping that turns the batch's steps into transitions and
sequences (trajectories.py). Finished sequences go to a bounded queue for the learner thread
(learner_loop.py), which trains V-trace (vtrace_learner.py) or R2D2 (r2d2_learner.py) and
publishes the parameters; while the queue is full, streams wait before their next message
(backpressure).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import hmac
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import jax
import numpy as np

from accelrl.bridge import bridge_pb2 as pb
from accelrl.bridge.address import AddressUnavailable, check_bindable, grpc_address
from accelrl.bridge.batching import Batcher, Ran
from accelrl.bridge.codec import (
    DecodedSteps,
    ProtocolError,
    actions_message,
    concatenate_steps,
    decode_steps,
    spec_from_handshake,
)
from accelrl.bridge.event_loop import use_uvloop
from accelrl.bridge.inference import Inference, inline_cpu_dispatch
from accelrl.bridge.learner_loop import run_learner
from accelrl.bridge.run_setup import check_config, make_learner, server_spec
from accelrl.bridge.trajectories import TrajectoryBuilder
from accelrl.checkpoint import Checkpointer, abstract
from accelrl.config import TrainConfig, save_config
from accelrl.logger import Progress, RunLogger

METHOD = "/accelrl.bridge.ActorBridge/Act"


class BridgeServer:
    """The gRPC service plus the learner thread, for one run."""

    def __init__(
        self,
        config: TrainConfig,
        run_dir: Path,
        resume: bool = False,
        progress: Progress | None = None,
        learn: bool = True,
    ) -> None:
        """`learn=False` pauses the learner (sequences are dropped; for benchmarks of acting)."""
        check_config(config)
        inline_cpu_dispatch()  # before the first computation: it decides how XLA:CPU dispatches
        self.learn = learn
        self.config = config
        self.run_dir = Path(run_dir)
        self.progress = progress or Progress()
        b = config.bridge
        self.spec = server_spec(config)
        self.learner = make_learner(config, self.spec)
        agent = self.learner.agent
        self.token = b.token or os.environ.get("ACCELRL_BRIDGE_TOKEN", "")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.checkpointer = Checkpointer(self.run_dir / "checkpoints", keep=config.keep_checkpoints)
        if resume:  # (a CheckpointMismatch leaves the run's config.yaml as it was)
            # the fresh state lends its shapes and is freed before the restored arrays come
            state = self.checkpointer.restore_latest(abstract(self.learner.init_state(config.seed)))
        else:
            state = self.learner.init_state(config.seed)
        save_config(config, self.run_dir / "config.yaml")
        self.state = state
        self.start_iteration = int(state.iteration)
        self._published = (state.params, self.start_iteration)
        obs_shape = agent.obs_shape
        self.obs_dtype = self.spec.observation_dtype
        self.builder = TrajectoryBuilder.create(
            b.max_envs,
            b.frame_stack,
            (obs_shape, self.obs_dtype),
            (self.spec.action_shape, self.spec.action_dtype),
            agent.initial_carry(1),
            self.learner,
        )
        self.slots = self.builder.slots
        self.inference = Inference(
            self.learner.policy_step,
            agent.initial_carry,
            b.max_envs,
            b.max_batch,
            self.learner.slot_constants,
            seed=config.seed + 1,
        )
        self.sequences: queue.Queue = queue.Queue(maxsize=b.queue_size)
        self._backlog: collections.deque = collections.deque()  # sequences the full queue refused
        self.max_message_bytes = self.spec.max_steps_message_bytes(b.max_envs_per_actor)
        self.done = threading.Event()
        self.stopping = False
        self.error: BaseException | None = None
        self.actors = 0
        # Env steps in the latest message of each connected actor, summed: the most that can
        # wait for one inference batch (an actor's next message is read once its last is
        # answered; actors that keep several messages in flight send fewer envs in each).
        self.message_envs = 0
        self.actor_connections = 0
        self.refused = 0
        self.last_values: dict[str, float] = {}
        self.train_seconds = 0.0
        self.logger = RunLogger(self.run_dir, purge_step=int(state.env_steps) if resume else None)
        self.run_id = f"{self.run_dir.name}:{self.start_iteration}"
        self.progress.line(
            f"accelrl bridge: {b.env} ({self.spec.describe()}), {config.algorithm}, agent obs "
            f"{list(obs_shape)}, sequences of {self.learner.sequence_length} steps every "
            f"{self.learner.sequence_period}, {self.learner.rows_per_step} per learner step on "
            f"{jax.devices()[0].platform}"
            + (f", resuming at update {self.start_iteration}" if resume else ""),
            force=True,
        )
        started = time.perf_counter()
        self.inference.warm_up(state.params, self._example_inputs)
        if learn:
            self.learner.warm_up(state)
        self.compile_seconds = time.perf_counter() - started
        self.progress.line(
            f"compiled inference and update in {self.compile_seconds:.1f} s", force=True
        )

    @property
    def env_steps_received(self) -> int:
        return self.builder.transitions

    def _example_inputs(self, m: int) -> dict[str, np.ndarray]:
        s = self.slots
        return {
            "observation": np.zeros((m, *s.pending_obs.shape[1:]), self.obs_dtype),
            "is_first": np.ones(m, bool),
            "prev_action": np.zeros((m, *s.pending_action.shape[1:]), s.pending_action.dtype),
            "prev_reward": np.zeros(m, np.float32),
        }

    # ---- parameters shared with inference
    def publish(self, params: Any, version: int) -> None:
        self._published = (params, version)

    # ---- gRPC
    def handlers(self) -> grpc.GenericRpcHandler:
        handler = grpc.stream_stream_rpc_method_handler(
            self.act,
            request_deserializer=None,  # raw bytes: parsed (and refused) by us
            response_serializer=pb.ServerMessage.SerializeToString,
        )
        return grpc.method_handlers_generic_handler("accelrl.bridge.ActorBridge", {"Act": handler})

    async def _refuse(
        self, context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str
    ) -> None:
        self.refused += 1
        await context.abort(code, message)

    async def _handshake(
        self, iterator: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> Any:
        """The stream's validated Handshake; None when the stream closed before sending one."""
        timeout = self.config.bridge.handshake_timeout_s
        try:
            raw = await asyncio.wait_for(iterator.__anext__(), timeout)
        except StopAsyncIteration:
            return None
        except asyncio.TimeoutError:
            await self._refuse(
                context, grpc.StatusCode.DEADLINE_EXCEEDED, f"no handshake within {timeout:g} s"
            )
        message = self._parse(raw)
        if isinstance(message, str):
            await self._refuse(context, grpc.StatusCode.INVALID_ARGUMENT, message)
        if message.WhichOneof("kind") != "handshake":
            await self._refuse(
                context, grpc.StatusCode.INVALID_ARGUMENT, "the first message must be a handshake"
            )
        hs = message.handshake
        if self.token and not hmac.compare_digest(hs.token.encode(), self.token.encode()):
            await self._refuse(context, grpc.StatusCode.UNAUTHENTICATED, "bad token")
        try:
            spec = spec_from_handshake(hs)
        except ProtocolError as error:
            await self._refuse(context, grpc.StatusCode.INVALID_ARGUMENT, str(error))
        if spec != self.spec:
            await self._refuse(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"env spec mismatch: actor has {spec.describe()}, "
                f"learner expects {self.spec.describe()}",
            )
        if not 1 <= hs.num_envs <= self.config.bridge.max_envs_per_actor:
            await self._refuse(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"num_envs {hs.num_envs} outside 1..{self.config.bridge.max_envs_per_actor}",
            )
        return hs

    async def act(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ServerMessage]:
        """One actor's stream: handshake, then one Actions reply per Steps message."""
        allocated = None
        message_envs = 0  # this actor's share of self.message_envs
        try:
            iterator = requests.__aiter__()
            hs = await self._handshake(iterator, context)
            if hs is None:
                return
            if self.done.is_set():
                yield pb.ServerMessage(actions=pb.Actions(done=True))
                return
            num_envs = hs.num_envs
            allocated = self.builder.allocate(num_envs)
            if allocated is None:
                await self._refuse(
                    context,
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"no room for {num_envs} more envs on this learner",
                )
            owner, slots = allocated
            self.actors += 1
            message_envs = num_envs
            self.message_envs += message_envs
            self.actor_connections += 1
            owned = self.slots.owner == owner
            limit = self.spec.max_steps_message_bytes(num_envs)
            yield pb.ServerMessage(
                handshake_reply=pb.HandshakeReply(
                    env_ids=slots.tolist(), max_message_bytes=limit, run_id=self.run_id
                )
            )
            async for raw in iterator:
                if len(raw) > limit:
                    await self._refuse(
                        context,
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"message of {len(raw)} bytes exceeds {limit}",
                    )
                message = self._parse(raw)
                if isinstance(message, str) or message.WhichOneof("kind") != "steps":
                    await self._refuse(
                        context,
                        grpc.StatusCode.INVALID_ARGUMENT,
                        message if isinstance(message, str) else "expected a Steps message",
                    )
                try:
                    steps = decode_steps(message.steps, self.spec, owned, slots)
                except ProtocolError as error:
                    await self._refuse(context, grpc.StatusCode.INVALID_ARGUMENT, str(error))
                self.message_envs += len(steps.env_ids) - message_envs
                message_envs = len(steps.env_ids)
                if self.done.is_set():
                    yield pb.ServerMessage(actions=pb.Actions(done=True))
                    return
                if self._backlog:
                    await self._drain_backlog()  # backpressure: the learner is behind
                yield await self.batcher.submit(steps, message_envs)
                self.batcher.catch_up()  # the batch's bookkeeping, now that the reply is sent
        finally:
            if allocated is not None:
                # after any batch with these slots has recorded its steps, so a new actor
                # given them finds them clean
                self.batcher.after_launched(self.slots.release, allocated[1])
                self.actors -= 1
                self.message_envs -= message_envs

    def _parse(self, raw: bytes) -> pb.ActorMessage | str:
        try:
            message = pb.ActorMessage.FromString(raw)
        except Exception as error:  # noqa: BLE001 - any parse failure is the sender's
            return f"malformed message: {type(error).__name__}"
        if message.WhichOneof("kind") is None:
            return "empty message"
        return message

    # ---- one batch of messages (batching.py runs it on the event loop or its worker thread)
    def act_on_batch(self, messages: list[DecodedSteps]) -> Ran:
        """Act on the steps of `messages` at once; one Actions reply per message."""
        steps = concatenate_steps(messages)
        inputs = self.builder.acting_inputs(steps)
        params, version = self._published
        packed = self.inference.act(params, steps.env_ids, inputs)
        outputs, carry0 = packed.rows(0, len(steps.env_ids))
        action = np.asarray(outputs["env_action"], self.spec.action_dtype)
        replies, start = [], 0
        for message in messages:
            end = start + len(message.env_ids)
            replies.append(actions_message(action[start:end], version))
            start = end
        complete = functools.partial(self.builder.complete, steps, inputs, outputs, carry0, version)
        return Ran(replies, functools.partial(self._record, complete))

    def _record(self, complete: Callable[[], dict | None]) -> None:
        """A batch's bookkeeping: `complete()` (its transitions, sequences and new pending
        steps), then the finished sequences to the learner's queue (or the backlog)."""
        try:
            sequences = complete()
        except Exception as error:  # noqa: BLE001 - a bug: stop the run and report it
            self.abort(error)
            return
        if sequences is None or not self.learn:
            return
        if not self._backlog:
            try:
                self.sequences.put_nowait(sequences)
                return
            except queue.Full:
                pass
        self._backlog.append(sequences)

    async def _drain_backlog(self) -> None:
        """Move refused sequences to the learner queue, waiting while it is full."""
        while self._backlog:
            if self.done.is_set():
                self._backlog.clear()
                return
            try:
                self.sequences.put_nowait(self._backlog[0])
            except queue.Full:
                await asyncio.sleep(0.002)
            else:
                self._backlog.popleft()

    # ---- the learner thread
    def learner_loop(self) -> None:
        try:
            run_learner(self)
        except BaseException as error:  # noqa: BLE001 - reported by serve()
            self.error = error
        finally:
            self.done.set()

    # ---- lifecycle
    def abort(self, error: BaseException) -> None:
        """Stop serving from any thread; `serve` then raises `error` (unless one came first)."""
        if self.error is None:
            self.error = error
        self.done.set()

    async def serve(self, bind: str = "127.0.0.1", port: int = 0, on_listening: Any = None) -> None:
        """Serve until training is done (or fails); `on_listening(host, port)` once bound."""
        b = self.config.bridge
        options = [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.aio.server(options=options)
        server.add_generic_rpc_handlers((self.handlers(),))
        try:
            bound = self._add_port(server, bind, port)
        except AddressUnavailable:
            self.close()
            raise
        self.batcher = Batcher(
            self.act_on_batch,
            b.max_batch,
            b.deadline_ms / 1000.0,
            max_waiting=lambda: self.message_envs,
        )
        await server.start()
        self.port = bound
        learner = threading.Thread(target=self.learner_loop, name="learner", daemon=True)
        if self.learn:
            learner.start()
        if on_listening is not None:
            on_listening(bind, bound)
        try:
            while not self.done.is_set():
                await asyncio.sleep(0.05)
            # Tell actors training is over (their next reply says done), then stop.
            await asyncio.sleep(0.3)
        finally:
            self.stopping = True
            self.done.set()
            await server.stop(grace=0.5)
            self.batcher.close()
            if learner.is_alive():
                learner.join(timeout=30)
            self.close()
        if self.error is not None:
            raise self.error

    def _add_port(self, server: grpc.aio.Server, bind: str, port: int) -> int:
        """Listen on bind:port (TLS when configured); the port bound, or AddressUnavailable."""
        check_bindable(bind, port)
        b, address = self.config.bridge, grpc_address(bind, port)
        try:
            if b.tls_cert:
                pair = (Path(b.tls_key).read_bytes(), Path(b.tls_cert).read_bytes())
                return server.add_secure_port(address, grpc.ssl_server_credentials([pair]))
            return server.add_insecure_port(address)
        except RuntimeError as error:  # taken between the check and now
            raise AddressUnavailable(f"cannot listen on {address}: {error}") from None

    def close(self) -> None:
        """Close the run's event file and checkpointer (pending saves complete)."""
        self.logger.close()
        self.checkpointer.close()


def run_server(
    config: TrainConfig,
    run_dir: Path,
    bind: str = "127.0.0.1",
    port: int = 0,
    resume: bool = False,
    on_listening: Any = None,
    progress: Progress | None = None,
) -> BridgeServer:
    """Build a server and serve until training is done; returns the finished server.

    The address is checked first, so a taken port fails before anything is compiled or written.
    """
    check_bindable(bind, port)
    server = BridgeServer(config, run_dir, resume=resume, progress=progress)
    serve_until_done(server, bind, port, on_listening)
    return server


def serve_until_done(
    server: BridgeServer, bind: str = "127.0.0.1", port: int = 0, on_listening: Any = None
) -> None:
    """Run `server.serve` on a fresh event loop (uvloop's when installed) until it ends."""
    use_uvloop()
    asyncio.run(server.serve(bind, port, on_listening))
