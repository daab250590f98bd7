"""The bridge learner server: central inference, trajectory assembly and V-trace learning.

One grpc.aio server; each actor holds one bidirectional stream (`Act`). The event loop thread
validates messages, keeps per-env state in numpy arrays indexed by env slot (previous
observation/action, frame stacks, unroll buffers, episode statistics) and hands the
observations to the `Batcher`. The batcher runs jitted `agent.act` on the device for up to
`max_batch` envs at once, or for what has arrived `deadline_ms` after the first request of the
batch (so a dead actor never stalls the others); the recurrent carry of every slot stays on
the device. Finished `[T]` unrolls go through a bounded queue (backpressure) to the learner
thread, which stacks `batch_unrolls` of them into a time-major `Trajectory` and runs the same
`VTraceLearner.update` as the fused path, then publishes the parameters. Every step records the
policy version that acted; the learner logs the lag.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import hmac
import itertools
import math
import os
import queue
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from accelrl.bridge import bridge_pb2 as pb
from accelrl.bridge.codec import (
    EnvSpec,
    ProtocolError,
    decode_steps,
    encode_tensor,
    spec_from_handshake,
)
from accelrl.checkpoint import Checkpointer
from accelrl.config import ConfigError, TrainConfig, save_config
from accelrl.fused import vtrace_config
from accelrl.logger import Progress, RunLogger
from accelrl.train import TrainingDiverged
from agents import ActorCriticAgent, BoundedActions, DiscreteActions, Trajectory, make_optimizer
from agents.learner import VTraceLearner

METHOD = "/accelrl.bridge.ActorBridge/Act"


class BridgeTrainState(struct.PyTreeNode):
    """What a bridge run needs to resume: the learner's state (actors hold no state)."""

    params: Any
    opt_state: Any
    key: jax.Array
    iteration: jax.Array  # learner updates done (int32); also the policy version
    env_steps: jax.Array  # env steps trained on (int32)


def server_spec(config: TrainConfig) -> EnvSpec:
    """The env spec actors must declare: from the config, or from a local copy of the env."""
    b = config.bridge
    if b.observation_shape:
        return EnvSpec(tuple(b.observation_shape), b.observation_dtype or "float32", b.num_actions)
    from accelrl.bridge.envs import env_spec, make_env

    env = make_env(b.env, b.sticky_actions)
    try:
        return env_spec(env)
    finally:
        env.close()


def agent_observation_shape(spec: EnvSpec, frame_stack: int) -> tuple[int, ...]:
    """Per-step observation -> what the agent sees (frames stacked along the last axis)."""
    shape = spec.observation_shape
    if frame_stack <= 1:
        return shape
    if len(shape) == 2:
        return (*shape, frame_stack)
    return (*shape[:-1], shape[-1] * frame_stack)


def make_bridge_agent(config: TrainConfig, spec: EnvSpec) -> ActorCriticAgent:
    actions = (
        DiscreteActions(spec.num_actions)
        if spec.discrete
        else BoundedActions(spec.action_low, spec.action_high)
    )
    a = config.agent
    return ActorCriticAgent(
        obs_shape=agent_observation_shape(spec, config.bridge.frame_stack),
        actions=actions,
        hidden_sizes=tuple(a.hidden_sizes),
        activation=a.activation,
        lstm_size=a.lstm_size,
    )


def check_config(config: TrainConfig) -> None:
    b, a = config.bridge, config.agent
    checks = [
        (
            config.algorithm == "vtrace",
            f"the bridge trains V-trace only (algorithm={config.algorithm!r}); "
            "R2D2 over the bridge is not built yet",
        ),
        (bool(b.env), "bridge.env must name the actors' env (e.g. gymnasium:CartPole-v1)"),
        (b.max_batch > 0 and b.deadline_ms > 0, "bridge.max_batch and deadline_ms must be > 0"),
        (
            b.batch_unrolls % a.num_minibatches == 0,
            f"bridge.batch_unrolls={b.batch_unrolls} must divide by "
            f"agent.num_minibatches={a.num_minibatches}",
        ),
        (b.queue_size > 0 and b.max_envs > 0, "bridge.queue_size and max_envs must be > 0"),
        (1 <= b.envs_per_actor <= b.max_envs_per_actor, "bridge.envs_per_actor out of range"),
        (b.frame_stack >= 1, "bridge.frame_stack must be >= 1"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


def total_updates(config: TrainConfig) -> int:
    per_update = config.bridge.batch_unrolls * config.agent.unroll_length
    return max(1, math.ceil(config.total_env_steps / per_update))


# --------------------------------------------------------------------------- the learner core


class LearnerCore:
    """The JAX side: jitted inference with device-resident carries, and the V-trace update."""

    def __init__(self, config: TrainConfig, spec: EnvSpec) -> None:
        a, b = config.agent, config.bridge
        self.config = config
        self.spec = spec
        self.agent = make_bridge_agent(config, spec)
        optimizer, self.schedule = make_optimizer(
            learning_rate=a.learning_rate,
            max_grad_norm=a.max_grad_norm,
            schedule=a.lr_schedule,
            total_updates=total_updates(config) * a.num_epochs * a.num_minibatches,
        )
        self.learner = VTraceLearner(
            self.agent, optimizer, vtrace_config(config), a.num_epochs, a.num_minibatches
        )
        self.capacity = b.max_envs
        agent = self.agent

        def infer(
            params: Any,
            carries: Any,
            slots: jax.Array,
            obs: jax.Array,
            is_first: jax.Array,
            key: jax.Array,
            counter: jax.Array,
        ) -> tuple:
            key = jax.random.fold_in(key, counter)
            carry0 = jax.tree.map(lambda x: x[slots], carries)
            carry1, out = agent.act(params, carry0, obs, is_first, key)
            carries = jax.tree.map(lambda x, n: x.at[slots].set(n), carries, carry1)
            return carries, out.action, out.env_action, out.log_prob, carry0

        self._infer = jax.jit(infer, donate_argnums=1)
        self._update = jax.jit(self.learner.update, donate_argnums=1)
        # One spare slot (index `capacity`) absorbs the padding rows of a batch.
        self.carries = agent.initial_carry(self.capacity + 1)
        self.buckets = [m for m in _buckets(b.max_batch)]

    def init_state(self, seed: int) -> BridgeTrainState:
        param_key, key = jax.random.split(jax.random.PRNGKey(seed))
        params = self.agent.init(param_key)
        return BridgeTrainState(
            params=params,
            opt_state=self.learner.init(params),
            key=key,
            iteration=jnp.zeros((), jnp.int32),
            env_steps=jnp.zeros((), jnp.int32),
        )

    def bucket(self, n: int) -> int:
        for m in self.buckets:
            if m >= n:
                return m
        return n

    def act(
        self,
        params: Any,
        slots: np.ndarray,
        obs: np.ndarray,
        is_first: np.ndarray,
        key: jax.Array,
        counter: int = 0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
        """Actions for `len(slots)` envs (padded to a bucket size); runs on the device."""
        n = len(slots)
        m = self.bucket(n)
        if m > n:
            pad = m - n
            slots = np.concatenate([slots, np.full(pad, self.capacity, slots.dtype)])
            obs = np.concatenate([obs, np.zeros((pad, *obs.shape[1:]), obs.dtype)])
            is_first = np.concatenate([is_first, np.ones(pad, bool)])
        self.carries, action, env_action, log_prob, carry0 = self._infer(
            params, self.carries, slots, obs, is_first, key, np.int32(counter)
        )
        action, env_action, log_prob, carry0 = jax.device_get(
            (action, env_action, log_prob, carry0)
        )
        carry0 = jax.tree.map(lambda x: x[:n], carry0)
        return action[:n], env_action[:n], log_prob[:n], carry0

    def warm_up(self, state: BridgeTrainState, obs_dtype: str, update: bool = True) -> None:
        """Compile inference for every bucket size and the update, before serving (a compile
        mid-run would hold up every batch behind it)."""
        params = state.params
        shape = self.agent.obs_shape
        for m in self.buckets:
            slots = np.full(m, self.capacity, np.int32)
            self.act(
                params,
                slots,
                np.zeros((m, *shape), obs_dtype),
                np.ones(m, bool),
                jax.random.PRNGKey(0),
            )
        if not update:
            return
        t, b = self.config.agent.unroll_length, self.config.bridge.batch_unrolls
        action = np.zeros(
            (t, b, *self.spec.action_shape), np.int32 if self.spec.discrete else np.float32
        )
        dummy = Trajectory(
            observation=np.zeros((t, b, *shape), obs_dtype),
            next_observation=np.zeros((t, b, *shape), obs_dtype),
            is_first=np.zeros((t, b), bool),
            action=action,
            behaviour_log_prob=np.zeros((t, b), np.float32),
            reward=np.zeros((t, b), np.float32),
            terminated=np.zeros((t, b), bool),
            truncated=np.zeros((t, b), bool),
            initial_carry=jax.device_get(self.agent.initial_carry(b)),
        )
        self._update = self._update.lower(params, state.opt_state, dummy, state.key).compile()


def _buckets(max_batch: int) -> list[int]:
    sizes, m = [], 1
    while m < max_batch:
        sizes.append(m)
        m *= 2
    return [*sizes, max_batch]


# --------------------------------------------------------------------------- batching


@dataclass
class _Request:
    slots: np.ndarray
    obs: np.ndarray
    is_first: np.ndarray
    arrival: float
    future: asyncio.Future


class Batcher:
    """Dynamic batching: a batch runs when `max_batch` env steps wait, when every connected env
    is waiting (`active_envs()`; waiting longer could not fill it), or `deadline` seconds after
    its first request arrived, whichever is first. Inference runs on one worker thread
    (the device), so batches execute in order and collecting the next overlaps with it."""

    def __init__(
        self,
        core: LearnerCore,
        get_params: Any,
        max_batch: int,
        deadline: float,
        seed: int,
        active_envs: Any = None,
    ) -> None:
        self.core = core
        self.active_envs = active_envs or (lambda: max_batch)
        # On the CPU backend a thread hop per batch costs more than the tiny inference itself
        # (and, on busy cores, a scheduler wake-up); on accelerators a worker thread lets the
        # event loop keep parsing messages while the device computes.
        inline_env = os.environ.get("ACCELRL_BRIDGE_INLINE_INFERENCE")
        self.inline = (
            (jax.default_backend() == "cpu") if inline_env is None else (inline_env == "1")
        )
        self.get_params = get_params
        self.max_batch = max_batch
        self.deadline = deadline
        self._queue: asyncio.Queue[_Request] = asyncio.Queue()
        self._executor = concurrent.futures.ThreadPoolExecutor(1, "inference")
        self._key = jax.random.PRNGKey(seed + 1)
        self._counter = itertools.count()
        self._in_flight = asyncio.Semaphore(2)
        # statistics since the last `take_stats`
        self.batches = 0
        self.batched_envs = 0
        self.max_fill_wait = 0.0  # from the first request's arrival to the batch's launch
        self.max_latency = 0.0  # from arrival to actions ready
        self.latencies: collections.deque[float] = collections.deque(maxlen=100_000)
        self.batch_sizes: collections.deque[int] = collections.deque(maxlen=100_000)

    async def submit(self, slots: np.ndarray, obs: np.ndarray, is_first: np.ndarray) -> tuple:
        future = asyncio.get_running_loop().create_future()
        await self._queue.put(_Request(slots, obs, is_first, time.perf_counter(), future))
        return await future

    def take_stats(self) -> dict[str, float]:
        stats = {
            "bridge/inference_batches": float(self.batches),
            "bridge/inference_batch_mean": self.batched_envs / max(self.batches, 1),
            "bridge/batch_fill_wait_ms_max": 1000 * self.max_fill_wait,
            "bridge/act_latency_ms_max": 1000 * self.max_latency,
        }
        self.batches = self.batched_envs = 0
        self.max_fill_wait = self.max_latency = 0.0
        return stats

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            first = await self._queue.get()
            batch, n = [first], len(first.slots)
            target = max(1, min(self.max_batch, self.active_envs()))
            while n < target:
                remaining = first.arrival + self.deadline - time.perf_counter()
                if remaining <= 0:
                    break
                try:
                    request = self._queue.get_nowait()
                except asyncio.QueueEmpty:
                    try:
                        request = await asyncio.wait_for(self._queue.get(), remaining)
                    except asyncio.TimeoutError:
                        break
                batch.append(request)
                n += len(request.slots)
            launched = time.perf_counter()
            self.max_fill_wait = max(self.max_fill_wait, launched - first.arrival)
            await self._in_flight.acquire()
            if self.inline:
                task = loop.create_future()
                try:
                    task.set_result(self._infer(batch))
                except Exception as error:  # noqa: BLE001 - delivered to the waiting actors
                    task.set_exception(error)
                self._deliver(task, batch)
                await asyncio.sleep(0)  # let the handlers run
            else:
                task = loop.run_in_executor(self._executor, self._infer, batch)
                task.add_done_callback(lambda t, b=batch: self._deliver(t, b))

    def _infer(self, batch: list[_Request]) -> tuple:
        params, version = self.get_params()
        slots = np.concatenate([r.slots for r in batch])
        obs = np.concatenate([r.obs for r in batch])
        is_first = np.concatenate([r.is_first for r in batch])
        counter = next(self._counter) % (2**31 - 1)
        return self.core.act(params, slots, obs, is_first, self._key, counter), version

    def _deliver(self, task: asyncio.Future, batch: list[_Request]) -> None:
        self._in_flight.release()
        if task.exception() is not None:
            for r in batch:
                if not r.future.done():
                    r.future.set_exception(task.exception())
            return
        (action, env_action, log_prob, carry0), version = task.result()
        now = time.perf_counter()
        start = 0
        self.batches += 1
        self.batch_sizes.append(sum(len(r.slots) for r in batch))
        for r in batch:
            end = start + len(r.slots)
            self.batched_envs += end - start
            self.max_latency = max(self.max_latency, now - r.arrival)
            self.latencies.append(now - r.arrival)
            if not r.future.done():
                c0 = jax.tree.map(lambda x, s=start, e=end: x[s:e], carry0)
                r.future.set_result(
                    (action[start:end], env_action[start:end], log_prob[start:end], c0, version)
                )
            start = end

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


# --------------------------------------------------------------------------- env slots


class SlotTable:
    """Per-env-slot host state: ownership, frame stacks, pending step, unroll buffers."""

    def __init__(
        self,
        capacity: int,
        unroll: int,
        obs_shape: tuple[int, ...],
        obs_dtype: str,
        frame_stack: int,
        action_shape: tuple[int, ...],
        action_dtype: Any,
        carry_template: Any,
    ) -> None:
        c, t = capacity, unroll
        self.capacity, self.unroll, self.frame_stack = c, t, frame_stack
        self.owner = np.full(c, -1, np.int64)
        self.fresh = np.ones(c, bool)  # next observation starts an episode (slot just given)
        self.has_pending = np.zeros(c, bool)
        self.pending_obs = np.zeros((c, *obs_shape), obs_dtype)
        self.pending_action = np.zeros((c, *action_shape), action_dtype)
        self.pending_logp = np.zeros(c, np.float32)
        self.pending_first = np.zeros(c, bool)
        self.pending_version = np.zeros(c, np.int64)
        self.t = np.zeros(c, np.int64)
        self.obs = np.zeros((c, t, *obs_shape), obs_dtype)
        self.next_obs = np.zeros((c, t, *obs_shape), obs_dtype)
        self.first = np.zeros((c, t), bool)
        self.action = np.zeros((c, t, *action_shape), action_dtype)
        self.logp = np.zeros((c, t), np.float32)
        self.reward = np.zeros((c, t), np.float32)
        self.terminated = np.zeros((c, t), bool)
        self.truncated = np.zeros((c, t), bool)
        self.version = np.zeros((c, t), np.int64)
        self.carry0 = jax.tree.map(lambda x: np.zeros((c, *x.shape[1:]), x.dtype), carry_template)
        self.episode_return = np.zeros(c, np.float64)
        self.episode_length = np.zeros(c, np.int64)
        self._next_owner = itertools.count()

    def allocate(self, count: int) -> tuple[int, np.ndarray] | None:
        free = np.flatnonzero(self.owner < 0)
        if free.size < count:
            return None
        slots = free[:count]
        owner = next(self._next_owner)
        self.owner[slots] = owner
        self.fresh[slots] = True
        self.has_pending[slots] = False
        self.t[slots] = 0
        self.episode_return[slots] = 0
        self.episode_length[slots] = 0
        return owner, slots.astype(np.int32)

    def release(self, slots: np.ndarray) -> None:
        self.owner[slots] = -1
        self.has_pending[slots] = False

    def stack(self, slots: np.ndarray, frames: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Stacked observations after `frames` (fresh stacks where `starts`)."""
        k = self.frame_stack
        if k == 1:
            return frames
        if frames.ndim == 3:  # [n, H, W] -> new trailing axis
            frames = frames[..., None]
        prev = self.pending_obs[slots]
        if prev.ndim == frames.ndim:
            rolled = np.concatenate([prev[..., frames.shape[-1] :], frames], axis=-1)
        else:
            rolled = np.concatenate([prev[..., 1:], frames], axis=-1)
        fresh = np.concatenate([frames] * k, axis=-1)
        return np.where(starts.reshape(-1, *[1] * (frames.ndim - 1)), fresh, rolled)


# --------------------------------------------------------------------------- the server


class BridgeServer:
    """The gRPC service plus the learner thread, for one run."""

    def __init__(
        self,
        config: TrainConfig,
        run_dir: Path,
        resume: bool = False,
        progress: Progress | None = None,
        max_updates: int | None = None,
        learn: bool = True,
    ) -> None:
        """`learn=False` pauses the learner (unrolls are dropped; for benchmarks of acting)."""
        check_config(config)
        self.learn = learn
        self.config = config
        self.run_dir = Path(run_dir)
        self.progress = progress or Progress()
        b, a = config.bridge, config.agent
        self.spec = server_spec(config)
        self.core = LearnerCore(config, self.spec)
        self.token = b.token or os.environ.get("ACCELRL_BRIDGE_TOKEN", "")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        save_config(config, self.run_dir / "config.yaml")
        self.checkpointer = Checkpointer(self.run_dir / "checkpoints", keep=config.keep_checkpoints)
        state = self.core.init_state(config.seed)
        if resume:
            state = self.checkpointer.restore_latest(state)
        self.state = state
        self.start_iteration = int(state.iteration)
        self.total_updates = total_updates(config)
        if max_updates is not None:
            self.total_updates = min(self.total_updates, self.start_iteration + max_updates)
        self._published = (state.params, self.start_iteration)
        obs_shape = self.core.agent.obs_shape
        self.obs_dtype = self.spec.observation_dtype
        carry_template = self.core.agent.initial_carry(1)
        self.slots = SlotTable(
            b.max_envs,
            a.unroll_length,
            obs_shape,
            self.obs_dtype,
            b.frame_stack,
            self.spec.action_shape,
            self.spec.action_dtype,
            carry_template,
        )
        self.unrolls: queue.Queue = queue.Queue(maxsize=b.queue_size)
        self.max_message_bytes = self.spec.max_steps_message_bytes(b.max_envs_per_actor)
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.actors = 0
        self.actor_connections = 0
        self.refused = 0
        self.env_steps_received = 0
        self.episodes: list[tuple[float, int]] = []
        self.logger = RunLogger(self.run_dir, purge_step=int(state.env_steps) if resume else None)
        self.run_id = f"{self.run_dir.name}:{self.start_iteration}"
        self.progress.line(
            f"accelrl bridge: {b.env} ({self.spec.describe()}), agent obs {list(obs_shape)}, "
            f"{a.unroll_length} x {b.batch_unrolls} steps per update on "
            f"{jax.devices()[0].platform}"
            + (f", resuming at update {self.start_iteration}" if resume else ""),
            force=True,
        )
        started = time.perf_counter()
        self.core.warm_up(state, self.obs_dtype, update=learn)
        self.compile_seconds = time.perf_counter() - started
        self.progress.line(
            f"compiled inference and update in {self.compile_seconds:.1f} s", force=True
        )

    # ---- parameters shared with the inference thread
    def published(self) -> tuple[Any, int]:
        return self._published

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

    async def act(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ServerMessage]:
        """One actor's stream: handshake, then one Actions reply per Steps message."""
        allocated = None
        try:
            iterator = requests.__aiter__()
            try:
                raw = await iterator.__anext__()
            except StopAsyncIteration:
                return
            message = self._parse(raw)
            if isinstance(message, str):
                await self._refuse(context, grpc.StatusCode.INVALID_ARGUMENT, message)
            if message.WhichOneof("kind") != "handshake":
                await self._refuse(
                    context,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "the first message must be a handshake",
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
            num_envs = hs.num_envs
            if not 1 <= num_envs <= self.config.bridge.max_envs_per_actor:
                await self._refuse(
                    context,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"num_envs {num_envs} outside 1..{self.config.bridge.max_envs_per_actor}",
                )
            if self.done.is_set():
                yield pb.ServerMessage(actions=pb.Actions(done=True))
                return
            allocated = self.slots.allocate(num_envs)
            if allocated is None:
                await self._refuse(
                    context,
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"no room for {num_envs} more envs on this learner",
                )
            owner, slots = allocated
            self.actors += 1
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
                    steps = decode_steps(message.steps, self.spec, owned)
                except ProtocolError as error:
                    await self._refuse(context, grpc.StatusCode.INVALID_ARGUMENT, str(error))
                if self.done.is_set():
                    yield pb.ServerMessage(actions=pb.Actions(done=True))
                    return
                reply = await self._step(steps)
                yield reply
        finally:
            if allocated is not None:
                self.slots.release(allocated[1])
                self.actors -= 1

    def _parse(self, raw: bytes) -> pb.ActorMessage | str:
        try:
            message = pb.ActorMessage.FromString(raw)
        except Exception as error:  # noqa: BLE001 - any parse failure is the sender's
            return f"malformed message: {type(error).__name__}"
        if message.WhichOneof("kind") is None:
            return "empty message"
        return message

    async def _step(self, steps: Any) -> pb.ServerMessage:
        s = self.slots
        ids = steps.env_ids
        done = steps.terminated | steps.truncated
        starts = done | s.fresh[ids]
        observation = s.stack(ids, steps.observation, starts)
        # 1. complete the transitions the previous actions started
        pend = s.has_pending[ids]
        if np.any(pend):
            p = ids[pend]
            next_obs = observation[pend].copy()
            done_p = done[pend]
            if np.any(done_p):
                final = s.stack(ids[done], steps.final_observation, np.zeros(done.sum(), bool))
                # rows of `final` follow the order of done envs among all ids
                final_rows = np.cumsum(done) - 1
                next_obs[done_p] = final[final_rows[pend][done_p]]
            t = s.t[p]
            s.obs[p, t] = s.pending_obs[p]
            s.next_obs[p, t] = next_obs
            s.first[p, t] = s.pending_first[p]
            s.action[p, t] = s.pending_action[p]
            s.logp[p, t] = s.pending_logp[p]
            s.reward[p, t] = steps.reward[pend]
            s.terminated[p, t] = steps.terminated[pend]
            s.truncated[p, t] = steps.truncated[pend]
            s.version[p, t] = s.pending_version[p]
            s.t[p] = t + 1
            s.episode_return[p] += steps.reward[pend]
            s.episode_length[p] += 1
            ended = p[done_p]
            if ended.size:
                self.episodes.extend(
                    zip(
                        s.episode_return[ended].tolist(),
                        s.episode_length[ended].tolist(),
                        strict=True,
                    )
                )
                s.episode_return[ended] = 0
                s.episode_length[ended] = 0
            self.env_steps_received += int(p.size)
            full = p[s.t[p] == s.unroll]
            if full.size:
                unrolls = self._take_unrolls(full)
                if self.learn:
                    await self._enqueue(unrolls)
        # 2. act on the new observations
        action, env_action, log_prob, carry0, version = await self.core_batcher.submit(
            ids, observation, starts
        )
        new_unroll = s.t[ids] == 0
        if np.any(new_unroll) and jax.tree.leaves(carry0):
            rows = ids[new_unroll]
            jax.tree.map(lambda buf, c: buf.__setitem__(rows, c[new_unroll]), s.carry0, carry0)
        s.pending_obs[ids] = observation
        s.pending_action[ids] = action
        s.pending_logp[ids] = log_prob
        s.pending_first[ids] = starts
        s.pending_version[ids] = version
        s.has_pending[ids] = True
        s.fresh[ids] = False
        return pb.ServerMessage(
            actions=pb.Actions(
                action=encode_tensor(np.asarray(env_action, self.spec.action_dtype)),
                policy_version=version,
            )
        )

    def _take_unrolls(self, rows: np.ndarray) -> dict[str, Any]:
        s = self.slots
        s.t[rows] = 0
        return {
            "observation": s.obs[rows],
            "next_observation": s.next_obs[rows],
            "is_first": s.first[rows],
            "action": s.action[rows],
            "behaviour_log_prob": s.logp[rows],
            "reward": s.reward[rows],
            "terminated": s.terminated[rows],
            "truncated": s.truncated[rows],
            "initial_carry": jax.tree.map(lambda x: x[rows], s.carry0),
            "version": s.version[rows],
        }

    async def _enqueue(self, item: dict[str, Any]) -> None:
        """Put finished unrolls on the learner queue; while it is full, wait (backpressure)."""
        while True:
            try:
                self.unrolls.put_nowait(item)
                return
            except queue.Full:
                if self.done.is_set():
                    return
                await asyncio.sleep(0.002)

    # ---- the learner thread
    def learner_loop(self) -> None:
        try:
            self._learn()
        except BaseException as error:  # noqa: BLE001 - reported by serve()
            self.error = error
        finally:
            self.done.set()

    def _learn(self) -> None:
        cfg = self.config
        b, a = cfg.bridge, cfg.agent
        rows_needed = b.batch_unrolls
        held: list[dict[str, Any]] = []
        held_rows = 0
        state = self.state
        iteration = int(state.iteration)
        last_log = time.perf_counter()
        steps_at_log = self.env_steps_received
        started = time.perf_counter()
        recent_return = None
        while iteration < self.total_updates:
            while held_rows < rows_needed:
                try:
                    item = self.unrolls.get(timeout=0.1)
                except queue.Empty:
                    if self._stopping:
                        return
                    continue
                held.append(item)
                held_rows += len(item["reward"])
            batch, held, held_rows = _take_rows(held, rows_needed)
            version = batch.pop("version")
            carry = batch.pop("initial_carry")
            time_major = {k: np.swapaxes(v, 0, 1) for k, v in batch.items()}
            time_major["reward"] = time_major["reward"] * a.reward_scale
            traj = Trajectory(**time_major, initial_carry=carry)
            key, update_key = jax.random.split(state.key)
            params, opt_state, metrics = self.core._update(
                state.params, state.opt_state, traj, update_key
            )
            metrics = jax.device_get(metrics)
            if not bool(metrics.finite):
                raise TrainingDiverged(
                    f"non-finite loss or gradients at update {iteration}; training stopped. The "
                    f"last good checkpoint in {self.run_dir / 'checkpoints'} is intact."
                )
            iteration += 1
            env_steps = int(state.env_steps) + rows_needed * a.unroll_length
            state = BridgeTrainState(
                params=params,
                opt_state=opt_state,
                key=key,
                iteration=jnp.asarray(iteration, jnp.int32),
                env_steps=jnp.asarray(env_steps, jnp.int32),
            )
            self.state = state
            self._published = (params, iteration)
            lag = iteration - 1 - version
            now = time.perf_counter()
            last = iteration == self.total_updates
            if now - last_log >= 1.0 or last:
                episodes, self.episodes = self.episodes, []
                values = {
                    "charts/SPS": (self.env_steps_received - steps_at_log) / (now - last_log),
                    "charts/learning_rate": float(
                        self.core.schedule(iteration * a.num_epochs * a.num_minibatches)
                    ),
                    **{
                        f"losses/{k}": float(v)
                        for k, v in metrics._asdict().items()
                        if k != "finite"
                    },
                    "bridge/policy_lag_mean": float(lag.mean()),
                    "bridge/policy_lag_max": float(lag.max()),
                    "bridge/actors": float(self.actors),
                    "bridge/queue_size": float(self.unrolls.qsize()),
                    "bridge/refused_streams": float(self.refused),
                    **self.core_batcher.take_stats(),
                }
                if episodes:
                    returns = [r for r, _ in episodes]
                    values["charts/episodic_return"] = float(np.mean(returns))
                    values["charts/episodic_length"] = float(np.mean([n for _, n in episodes]))
                    recent_return = values["charts/episodic_return"]
                self.last_values = values
                self.logger.scalars(env_steps, values)
                last_log, steps_at_log = now, self.env_steps_received
                ret = "   n/a" if recent_return is None else f"{recent_return:8.2f}"
                self.progress.line(
                    f"update {iteration:>6} / {self.total_updates} | step {env_steps:>10,} | "
                    f"SPS {values['charts/SPS']:>8,.0f} | return {ret} | actors {self.actors} "
                    f"| lag {values['bridge/policy_lag_mean']:.1f} "
                    f"| batch {values['bridge/inference_batch_mean']:.1f} "
                    f"| wait {values['bridge/batch_fill_wait_ms_max']:.1f} ms",
                    force=last,
                )
            if last or iteration % b.checkpoint_every_updates == 0:
                self.checkpointer.save(iteration, state)
        self.train_seconds = time.perf_counter() - started

    _stopping = False
    last_values: dict[str, float] = {}
    train_seconds = 0.0

    # ---- lifecycle
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
        address = f"{bind}:{port}" if ":" not in bind else f"[{bind}]:{port}"
        if b.tls_cert:
            key = Path(b.tls_key).read_bytes()
            cert = Path(b.tls_cert).read_bytes()
            bound = server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
        else:
            bound = server.add_insecure_port(address)
        self.core_batcher = Batcher(
            self.core,
            self.published,
            b.max_batch,
            b.deadline_ms / 1000.0,
            self.config.seed,
            active_envs=lambda: int(np.count_nonzero(self.slots.owner >= 0)),
        )
        batcher_task = asyncio.create_task(self.core_batcher.run())
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
            self._stopping = True
            self.done.set()
            await server.stop(grace=0.5)
            batcher_task.cancel()
            self.core_batcher.close()
            if learner.is_alive():
                learner.join(timeout=30)
            self.logger.close()
            self.checkpointer.close()
        if self.error is not None:
            raise self.error


def _take_rows(held: list[dict[str, Any]], rows: int) -> tuple[dict[str, Any], list, int]:
    """`rows` unrolls from the held items (splitting one if needed) and what remains."""
    merged = jax.tree.map(lambda *xs: np.concatenate(xs), *held)
    batch = jax.tree.map(lambda x: x[:rows], merged)
    remaining = len(merged["reward"]) - rows
    rest = [jax.tree.map(lambda x: x[rows:], merged)] if remaining else []
    return batch, rest, remaining


def run_server(
    config: TrainConfig,
    run_dir: Path,
    bind: str = "127.0.0.1",
    port: int = 0,
    resume: bool = False,
    on_listening: Any = None,
    progress: Progress | None = None,
) -> BridgeServer:
    """Build a server and serve until training is done; returns the finished server."""
    server = BridgeServer(config, run_dir, resume=resume, progress=progress)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(server.serve(bind, port, on_listening))
    return server
