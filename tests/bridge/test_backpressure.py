"""Backpressure: a learner slower than its actors slows them; nothing queues without bound."""

import asyncio
import threading
import time

from bridge_helpers import actor

from accelrl.bridge.server import BridgeServer
from accelrl.config import apply_overrides
from accelrl.logger import Progress
from configs import load_preset

UNROLL, QUEUE, ENVS = 8, 2, 16


def test_a_slower_learner_holds_the_actors_back_instead_of_queueing(tmp_path):
    # trivial envs step at tens of thousands per second; the learner takes a few thousand
    overrides = [
        "bridge.env=trivial:4",
        f"bridge.queue_size={QUEUE}",
        f"agent.unroll_length={UNROLL}",
        "bridge.batch_unrolls=4",
        "total_env_steps=100000000",
    ]
    config = apply_overrides(load_preset("cartpole_vtrace_bridge"), overrides)
    server = BridgeServer(config, tmp_path / "run", progress=Progress(interval=1e9))
    listening = threading.Event()
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(on_listening=lambda h, p: listening.set())),
        daemon=True,
    )
    thread.start()
    assert listening.wait(120)
    actors = [actor(server.port, num_envs=ENVS // 2, env="trivial:4") for _ in range(2)]
    try:
        deadline = time.monotonic() + 90
        while server.actors < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        most_queued = most_backlog = 0
        start = time.monotonic()
        while time.monotonic() - start < 6:
            most_queued = max(most_queued, server.sequences.qsize())
            most_backlog = max(most_backlog, len(server._backlog))
            time.sleep(0.01)
        for a in actors:
            a.kill()
        time.sleep(1.0)
        received = server.env_steps_received
        consumed = int(server.state.iteration) * server.learner.rows_per_step * UNROLL
    finally:
        for a in actors:
            a.kill()
        server.done.set()
        thread.join(30)
    assert server.error is None
    assert most_queued <= QUEUE and most_backlog <= 2, (most_queued, most_backlog)
    assert consumed > 0
    # Not yet consumed: the learner's partial batch, the full queue and backlog (each item
    # one batch's sequences, at most one per env) and each env's unfinished unroll.
    slack = (server.learner.rows_per_step + (QUEUE + most_backlog + 1) * ENVS + ENVS) * UNROLL
    assert received - consumed <= slack, (received, consumed, slack)
