"""Real processes on loopback: actors SIGKILLed during training, the learner restarted."""

import time

import pytest
from bridge_helpers import actor, serve, updates, waits_ms

DEADLINE_MS = 20.0
SMALL = [
    "agent.unroll_length=16",
    "bridge.batch_unrolls=4",
    "bridge.checkpoint_every_updates=5",
    f"bridge.deadline_ms={DEADLINE_MS}",
    "bridge.max_batch=64",
]


@pytest.mark.parametrize(
    "inline", ["1", "0"], ids=["batches-on-the-event-loop", "batches-on-a-worker-thread"]
)
def test_actors_killed_again_and_again(tmp_path, inline):
    # "0": batches run on a worker thread, as on accelerators (the CPU default is inline)
    server, port = serve(
        tmp_path / "run",
        "total_env_steps=100000000",
        *SMALL,
        env={"ACCELRL_BRIDGE_INLINE_INFERENCE": inline},
    )
    # actor 1 keeps two messages of 2 envs in flight (--groups 2), actor 0 one of 4
    groups = [(), ("--groups", "2")]
    actors = [actor(port, num_envs=4, extra=groups[i]) for i in range(2)]
    try:
        server.wait_for(r"actors 2", 90)
        before = max(updates(server))
        for round_ in range(6):
            victim = round_ % 2
            actors[victim].kill()  # SIGKILL: no goodbye on the stream
            time.sleep(1.0)
            assert server.alive()
            actors[victim] = actor(port, num_envs=4, extra=groups[victim])
        n = len(server.lines)
        server.wait_for(r"actors 2", 60)
        time.sleep(4)
        assert server.alive()
        after = max(updates(server))
        assert after > before + 5, (before, after)
        assert all(a.alive() for a in actors)
        # no batch waited for a dead actor past its deadline (plus scheduling slack on 2 busy
        # cores); without the deadline a batch would wait for envs that never answer
        waits = waits_ms(server)
        assert waits and max(waits) < DEADLINE_MS + 150, "\n".join(server.lines)
        assert any("actors 2" in line for line in server.lines[n:])
    finally:
        for a in actors:
            a.kill()
        server.kill()


def test_learner_restart_from_checkpoint(tmp_path):
    run = tmp_path / "run"
    server, port = serve(run, "total_env_steps=100000000", *SMALL)
    worker = actor(port, num_envs=8)
    try:
        server.wait_for(r"update\s+(1\d|[2-9]\d|\d{3,})\s", 120)  # a few checkpoints written
        time.sleep(1.0)
        server.kill()  # SIGKILL the learner
        checkpoints = sorted(
            int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit()
        )
        assert checkpoints, "no checkpoint written"
        server, _ = serve(run, port=port, resume=True)
        resumed = int(server.wait_for(r"resuming at update (\d+)", 5).group(1))
        assert resumed == checkpoints[-1]
        deadline = time.monotonic() + 120
        while max(updates(server), default=0) < resumed + 5:  # the same actor came back
            assert time.monotonic() < deadline and server.alive(), "\n".join(server.lines)
            time.sleep(0.2)
        assert worker.alive()
        assert any("actors 1" in line for line in server.lines)
    finally:
        worker.kill()
        server.kill()
