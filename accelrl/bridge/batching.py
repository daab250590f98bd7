"""Dynamic batching of actors' messages on the server's event loop.

A batch runs when `max_batch` env steps wait, when every connected actor's message is waiting
(waiting longer could not fill it: the server reads an actor's next message only after
answering its last), or `deadline` seconds after its first request arrived, whichever is
first, so a dead actor never stalls the others. The request that fills a batch launches it and
a timer launches a batch at its deadline: no batching task, queue or per-wait task on the hot
path.

The whole batch is one call of `run` (the server's: acting inputs, inference, trajectory
bookkeeping for all the batch's envs at once, so the per-call numpy and dispatch costs are
paid once per batch rather than once per actor message). `run` returns each request's reply
and the bookkeeping the replies do not wait for, which runs after the replies go out and
before the next batch: every batch sees the slots as the previous one left them, and
`after_launched` puts other slot-table work (freeing a gone actor's slots) in that same order.

On the CPU backend batches run inline on the event loop (a thread hop per batch costs more
than the tiny inference itself); on accelerators they run on one worker thread with at most
two batches in flight, so they execute in order while the loop keeps parsing messages (and
requests arriving meanwhile form the next, fuller batch). `ACCELRL_BRIDGE_INLINE_INFERENCE=1`
or `0` overrides that choice.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax

MAX_IN_FLIGHT = 2
"""Batches queued on the worker thread at once (accelerators only)."""


class Ran(NamedTuple):
    """What `run` gives for one batch."""

    replies: list[Any]  # one per request, in the batch's order
    # runs after the replies are delivered, before the next batch; must not raise (the
    # server's stops the run on an error instead)
    bookkeeping: Callable[[], None]


@dataclass(eq=False)  # found in the queue by identity
class _Request:
    payload: Any
    size: int  # env steps
    arrival: float
    future: asyncio.Future


class Batcher:
    """Collects requests into batches, runs them in order, delivers each its reply."""

    def __init__(
        self,
        run: Callable[[list[Any]], Ran],
        max_batch: int,
        deadline: float,
        max_waiting: Callable[[], int] | None = None,
    ) -> None:
        """`run(payloads)`: one batch; `max_waiting()`: the most env steps that can wait at
        once (one message per actor)."""
        self.run = run
        self.max_waiting = max_waiting or (lambda: max_batch)
        inline_env = os.environ.get("ACCELRL_BRIDGE_INLINE_INFERENCE")
        self.inline = (
            (jax.default_backend() == "cpu") if inline_env is None else (inline_env == "1")
        )
        self.max_batch = max_batch
        self.deadline = deadline
        self._pending: collections.deque[_Request] = collections.deque()
        self._pending_envs = 0
        self._timer: asyncio.TimerHandle | None = None
        self._in_flight = 0  # batches on the worker thread
        self._bookkeeping: collections.deque[Callable[[], None]] = collections.deque()  # inline
        self._executor = concurrent.futures.ThreadPoolExecutor(1, "inference")
        # statistics since the last `take_stats`
        self.batches = 0
        self.batched_envs = 0
        self.max_fill_wait = 0.0  # from the first request's arrival to the batch's launch
        self.max_latency = 0.0  # from arrival to actions ready
        self.run_seconds = 0.0  # in `run` (acting: inputs, inference, replies), all batches
        self.latencies: collections.deque[float] = collections.deque(maxlen=100_000)
        self.batch_sizes: collections.deque[int] = collections.deque(maxlen=100_000)
        self.run_times: collections.deque[float] = collections.deque(maxlen=100_000)

    async def submit(self, payload: Any, size: int) -> Any:
        """The reply to `payload` (`size` env steps), once its batch has run."""
        future = asyncio.get_running_loop().create_future()
        request = _Request(payload, size, time.perf_counter(), future)
        self._pending.append(request)
        self._pending_envs += size
        self._launch_ready()
        try:
            return await future
        except asyncio.CancelledError:  # the actor is gone: never run its request
            if request in self._pending:
                self._pending.remove(request)
                self._pending_envs -= size
            raise

    def after_launched(self, function: Callable[..., Any], *args: Any) -> None:
        """Call `function(*args)` after every batch launched so far has run with its
        bookkeeping (at once when none is running), before any batch launched later."""
        if self.inline:
            self.catch_up()
            function(*args)
            return
        try:
            self._executor.submit(function, *args)
        except RuntimeError:  # shut down: no batch runs any more
            function(*args)

    def take_stats(self) -> dict[str, float]:
        stats = {
            "bridge/inference_batches": float(self.batches),
            "bridge/inference_batch_mean": self.batched_envs / max(self.batches, 1),
            "bridge/batch_fill_wait_ms_max": 1000 * self.max_fill_wait,
            "bridge/act_latency_ms_max": 1000 * self.max_latency,
            "bridge/batch_run_ms_mean": 1000 * self.run_seconds / max(self.batches, 1),
        }
        self.batches = self.batched_envs = 0
        self.max_fill_wait = self.max_latency = self.run_seconds = 0.0
        return stats

    def _target(self) -> int:
        return max(1, min(self.max_batch, self.max_waiting()))

    def _launch_ready(self, deadline_passed: bool = False) -> None:
        """Launch every batch that is full or past its deadline; arm the next deadline."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        target = self._target()
        while self._pending and self._in_flight < MAX_IN_FLIGHT:
            wait = self._pending[0].arrival + self.deadline - time.perf_counter()
            if self._pending_envs < target and wait > 0 and not deadline_passed:
                break
            deadline_passed = False
            batch, n = [], 0
            while self._pending and n < target:
                request = self._pending.popleft()
                batch.append(request)
                n += request.size
            self._pending_envs -= n
            self._launch(batch)
        if self._pending and self._in_flight < MAX_IN_FLIGHT:
            wait = self._pending[0].arrival + self.deadline - time.perf_counter()
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(max(wait, 0.0), self._launch_ready, True)

    def _launch(self, batch: list[_Request]) -> None:
        self.max_fill_wait = max(self.max_fill_wait, time.perf_counter() - batch[0].arrival)
        if self.inline:  # done before this returns: never in flight
            self.catch_up()
            try:
                ran = self._timed_run(batch)
            except Exception as error:  # noqa: BLE001 - delivered to the waiting actors
                self._fail(batch, error)
            else:
                self._deliver(ran.replies, batch)
                self._bookkeeping.append(ran.bookkeeping)  # see `catch_up`
            return
        self._in_flight += 1
        loop = asyncio.get_running_loop()
        task = loop.run_in_executor(self._executor, self._run_on_worker, batch, loop)
        task.add_done_callback(lambda t, b=batch: self._finished(t, b))

    def catch_up(self) -> None:
        """Run the bookkeeping of inline batches that has not run yet, oldest first.

        A stream calls it once its reply is sent (gRPC asks for the next response only then),
        so the bookkeeping delays no reply; a launch and `after_launched` call it too, so it
        always runs before the next batch. (On the worker thread it needs no call.)"""
        while self._bookkeeping:
            self._bookkeeping.popleft()()

    def _timed_run(self, batch: list[_Request]) -> Ran:
        started = time.perf_counter()
        ran = self.run([r.payload for r in batch])
        seconds = time.perf_counter() - started
        self.run_seconds += seconds
        self.run_times.append(seconds)
        return ran

    def _run_on_worker(self, batch: list[_Request], loop: asyncio.AbstractEventLoop) -> None:
        ran = self._timed_run(batch)
        loop.call_soon_threadsafe(self._deliver, ran.replies, batch)
        ran.bookkeeping()  # on this thread, so before the next batch

    def _finished(self, task: asyncio.Future, batch: list[_Request]) -> None:
        self._in_flight -= 1
        if task.exception() is not None:
            self._fail(batch, task.exception())
        self._launch_ready()

    def _fail(self, batch: list[_Request], error: BaseException) -> None:
        for r in batch:
            if not r.future.done():
                r.future.set_exception(error)

    def _deliver(self, replies: list[Any], batch: list[_Request]) -> None:
        now = time.perf_counter()
        self.batches += 1
        self.batch_sizes.append(sum(r.size for r in batch))
        for r, reply in zip(batch, replies, strict=True):
            self.batched_envs += r.size
            self.max_latency = max(self.max_latency, now - r.arrival)
            self.latencies.append(now - r.arrival)
            if not r.future.done():
                r.future.set_result(reply)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)
