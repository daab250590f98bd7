"""Dynamic batching of actors' inference requests on the server's event loop.

A batch runs when `max_batch` env steps wait, when every connected env is waiting (waiting
longer could not fill it), or `deadline` seconds after its first request arrived, whichever is
first, so a dead actor never stalls the others. On the CPU backend inference runs inline on the
event loop (a thread hop per batch costs more than the tiny inference itself); on accelerators
it runs on one worker thread, so batches execute in order while the loop keeps parsing
messages.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from accelrl.bridge.inference import Inference


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
        seed: int,
        active_envs: Callable[[], int] | None = None,
    ) -> None:
        self.inference = inference
        self.active_envs = active_envs or (lambda: max_batch)
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

    async def submit(self, slots: np.ndarray, inputs: dict[str, np.ndarray]) -> tuple:
        """`(outputs, carry0, policy version)` for these slots' inputs."""
        future = asyncio.get_running_loop().create_future()
        await self._queue.put(_Request(slots, inputs, time.perf_counter(), future))
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
        inputs = {k: np.concatenate([r.inputs[k] for r in batch]) for k in batch[0].inputs}
        counter = next(self._counter) % (2**31 - 1)
        return self.inference.act(params, slots, inputs, self._key, counter), version

    def _deliver(self, task: asyncio.Future, batch: list[_Request]) -> None:
        self._in_flight.release()
        if task.exception() is not None:
            for r in batch:
                if not r.future.done():
                    r.future.set_exception(task.exception())
            return
        result, version = task.result()
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
                outputs, carry0 = jax.tree.map(lambda x, s=start, e=end: x[s:e], result)
                r.future.set_result((outputs, carry0, version))
            start = end

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
