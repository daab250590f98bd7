"""Dynamic batching of actors' inference requests on the server's event loop.

A batch runs when `max_batch` env steps wait, when every connected actor's message is waiting
(waiting longer could not fill it: the server reads an actor's next message only after
answering its last), or `deadline` seconds after its first request arrived, whichever is
first, so a dead actor never stalls the others. The request that fills a batch launches it and
a timer launches a batch at its deadline: no batching task, queue or per-wait task on the hot
path. On the CPU backend inference runs inline on the event loop (a thread hop per batch costs
more than the tiny inference itself); on accelerators it runs on one worker thread with at most
two batches in flight, so batches execute in order while the loop keeps parsing messages (and
requests arriving meanwhile form the next, fuller batch).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from accelrl.bridge.inference import Inference

MAX_IN_FLIGHT = 2
"""Batches queued on the inference thread at once (accelerators only)."""


@dataclass
class _Request:
    slots: np.ndarray
    inputs: dict[str, np.ndarray]
    arrival: float
    future: asyncio.Future


class Batcher:
    """Collects requests into batches and delivers each actor its rows of the result."""

    def __init__(
        self,
        inference: Inference,
        get_params: Callable[[], tuple[Any, int]],
        max_batch: int,
        deadline: float,
        max_waiting: Callable[[], int] | None = None,
    ) -> None:
        """`max_waiting()`: the most env steps that can wait at once (one message per actor)."""
        self.inference = inference
        self.max_waiting = max_waiting or (lambda: max_batch)
        inline_env = os.environ.get("ACCELRL_BRIDGE_INLINE_INFERENCE")
        self.inline = (
            (jax.default_backend() == "cpu") if inline_env is None else (inline_env == "1")
        )
        self.get_params = get_params
        self.max_batch = max_batch
        self.deadline = deadline
        self._pending: collections.deque[_Request] = collections.deque()
        self._pending_envs = 0
        self._timer: asyncio.TimerHandle | None = None
        self._in_flight = 0
        self._max_in_flight = 1 if self.inline else MAX_IN_FLIGHT
        self._executor = concurrent.futures.ThreadPoolExecutor(1, "inference")
        # statistics since the last `take_stats`
        self.batches = 0
        self.batched_envs = 0
        self.max_fill_wait = 0.0  # from the first request's arrival to the batch's launch
        self.max_latency = 0.0  # from arrival to actions ready
        self.latencies: collections.deque[float] = collections.deque(maxlen=100_000)
        self.batch_sizes: collections.deque[int] = collections.deque(maxlen=100_000)

    async def submit(self, slots: np.ndarray, inputs: dict[str, np.ndarray]) -> tuple:
        """`(outputs, carry0, policy version)` for these slots' inputs."""
        future = asyncio.get_running_loop().create_future()
        self._pending.append(_Request(slots, inputs, time.perf_counter(), future))
        self._pending_envs += len(slots)
        self._launch_ready()
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

    def _target(self) -> int:
        return max(1, min(self.max_batch, self.max_waiting()))

    def _launch_ready(self, deadline_passed: bool = False) -> None:
        """Launch every batch that is full or past its deadline; arm the next deadline."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        target = self._target()
        while self._pending and self._in_flight < self._max_in_flight:
            wait = self._pending[0].arrival + self.deadline - time.perf_counter()
            if self._pending_envs < target and wait > 0 and not deadline_passed:
                break
            deadline_passed = False
            batch, n = [], 0
            while self._pending and n < target:
                request = self._pending.popleft()
                batch.append(request)
                n += len(request.slots)
            self._pending_envs -= n
            self._launch(batch)
        if self._pending and self._in_flight < self._max_in_flight:
            wait = self._pending[0].arrival + self.deadline - time.perf_counter()
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(max(wait, 0.0), self._launch_ready, True)

    def _launch(self, batch: list[_Request]) -> None:
        self.max_fill_wait = max(self.max_fill_wait, time.perf_counter() - batch[0].arrival)
        self._in_flight += 1
        if self.inline:
            try:
                result = self._infer(batch)
            except Exception as error:  # noqa: BLE001 - delivered to the waiting actors
                self._fail(batch, error)
            else:
                self._deliver(result, batch)
            return
        task = asyncio.get_running_loop().run_in_executor(self._executor, self._infer, batch)
        task.add_done_callback(lambda t, b=batch: self._finished(t, b))

    def _finished(self, task: asyncio.Future, batch: list[_Request]) -> None:
        if task.exception() is not None:
            self._fail(batch, task.exception())
        else:
            self._deliver(task.result(), batch)
        self._launch_ready()

    def _infer(self, batch: list[_Request]) -> tuple:
        params, version = self.get_params()
        if len(batch) == 1:
            slots, inputs = batch[0].slots, batch[0].inputs
        else:
            slots = np.concatenate([r.slots for r in batch])
            inputs = {k: np.concatenate([r.inputs[k] for r in batch]) for k in batch[0].inputs}
        return self.inference.act(params, slots, inputs), version

    def _fail(self, batch: list[_Request], error: BaseException) -> None:
        self._in_flight -= 1
        for r in batch:
            if not r.future.done():
                r.future.set_exception(error)

    def _deliver(self, result: tuple, batch: list[_Request]) -> None:
        self._in_flight -= 1
        packed, version = result
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
                outputs, carry0 = packed.rows(start, end)
                r.future.set_result((outputs, carry0, version))
            start = end

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)
