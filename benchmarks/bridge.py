"""Bridge throughput: env steps/s against actors x envs per actor, with its floor and ceiling.

For each (env, actors, E envs per actor, G messages in flight per actor) it measures, on the
same cores and in the same run:
  bridge  - real actor processes -> BridgeServer (jitted inference, learner paused), env steps/s;
            inference batch sizes and server-side act latency p50/p99 (arrival -> actions ready);
            with G = 2 an actor steps one half of its envs while the other half's actions are
            being chosen (`accelrl actor --groups`);
  echo    - the same number of client processes sending messages of the same size and count,
            G in flight, to a raw grpc.aio echo server (the transport floor the bridge sits on);
  local   - the same envs stepped in the same number of processes without any bridge;
  machine - the env stepped in one process per core without any bridge (what the whole machine
            does, the strictest yardstick for bridge/local).

Bridge and echo alternate, three rounds per point by default, and the row keeps the round with
the median ratio: a shared host's throughput drifts by tens of percent within minutes.

It also accounts for CPU time: the env's CPU per step (local) and the server's CPU per step
(inference, batching and gRPC; the learner is paused). When server and actors share the same
cores, bridge/local cannot exceed the "CPU ceiling" min(1, cores / (env + server) / local),
so the table shows whether the bridge or the CPU is the limit (on a CPU-only host a
convolutional policy's inference can cost more CPU than the game itself).

    .venv/bin/python benchmarks/bridge.py            # trivial env and Atari Pong
    .venv/bin/python benchmarks/bridge.py --quick    # fewer, shorter points, one round
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# the repo root first: `python benchmarks/bridge.py` puts benchmarks/ (with physics.py) first
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

# children find the repo first and keep any PYTHONPATH they were given (gpu.sh's wheels)
CHILD_ENV = {
    **os.environ,
    "JAX_PLATFORMS": "cpu",
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
}


# ----------------------------------------------------------------------------- child roles


def role_local(env_id: str, num_envs: int, seconds: float) -> dict:
    from accelrl.bridge.envs import env_spec, make_env

    envs = [make_env(env_id) for _ in range(num_envs)]
    spec = env_spec(envs[0])
    for i, env in enumerate(envs):
        env.reset(seed=i)
    rng = np.random.default_rng(0)
    steps, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        actions = rng.integers(0, spec.num_actions, num_envs)
        for env, a in zip(envs, actions, strict=True):
            _, _, term, trunc, _ = env.step(int(a))
            if term or trunc:
                env.reset()
        steps += num_envs
    return {
        "steps_per_s": steps / (time.perf_counter() - start),
        "cpu_us_per_step": 1e6 * (time.process_time() - cpu_start) / steps,
    }


def role_echo_client(port: int, env_id: str, num_envs: int, groups: int, seconds: float) -> dict:
    """Messages of the actor's sizes and count, `groups` in flight (as `--groups` actors)."""
    import grpc

    from accelrl.bridge import bridge_pb2 as pb
    from accelrl.bridge.codec import encode_steps
    from accelrl.bridge.envs import env_spec, make_env

    spec = env_spec(make_env(env_id))
    sizes = [len(g) for g in np.array_split(np.arange(num_envs), groups)]
    final = np.zeros((0, *spec.observation_shape), spec.observation_dtype)

    def message(n: int) -> bytes:
        # built each time, as the actor does
        obs = np.zeros((n, *spec.observation_shape), spec.observation_dtype)
        zeros = np.zeros(n)
        steps = encode_steps(np.arange(n), obs, zeros, zeros > 0, zeros > 0, final)
        return steps.SerializeToString()

    async def run() -> dict:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.stream_stream(
                "/accelrl.bridge.ActorBridge/Act",
                request_serializer=None,
                response_deserializer=pb.ServerMessage.FromString,
            )()
            steps, start, latencies = 0, time.perf_counter(), []
            sent = collections.deque()
            for n in sizes:
                sent.append((n, time.perf_counter()))
                await call.write(message(n))
            while time.perf_counter() - start < seconds:
                await call.read()
                n, t0 = sent.popleft()
                latencies.append(time.perf_counter() - t0)
                steps += n
                sent.append((n, time.perf_counter()))
                await call.write(message(n))
            await call.done_writing()
            elapsed = time.perf_counter() - start
        return {
            "steps_per_s": steps / elapsed,
            "p50_ms": 1e3 * float(np.percentile(latencies, 50)),
            "p99_ms": 1e3 * float(np.percentile(latencies, 99)),
        }

    return asyncio.run(run())


# ----------------------------------------------------------------------------- orchestration


def cpu_cores() -> int:
    """Cores this process may run on (the ones actors and server share)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def children(args_list: list[list[str]]) -> list[dict]:
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, *a],
            cwd=ROOT,
            env=CHILD_ENV,
            stdout=subprocess.PIPE,
            text=True,
        )
        for a in args_list
    ]
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=300)
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


class EchoServer:
    """grpc.aio server replying to each message with an Actions message of E actions."""

    def __init__(self) -> None:
        import grpc

        self.grpc = grpc
        self.port = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._thread.start()
        self._ready.wait(30)

    async def _main(self) -> None:
        grpc = self.grpc
        from accelrl.bridge import bridge_pb2 as pb
        from accelrl.bridge.codec import encode_tensor

        replies: dict[int, bytes] = {}

        async def act(requests, context):  # noqa: ANN001
            async for raw in requests:
                message = pb.ActorMessage.FromString(raw)
                n = len(message.steps.env_ids)
                if n not in replies:
                    replies[n] = pb.ServerMessage(
                        actions=pb.Actions(action=encode_tensor(np.zeros(n, np.int32)))
                    ).SerializeToString()
                yield replies[n]

        handler = grpc.stream_stream_rpc_method_handler(
            act, request_deserializer=None, response_serializer=None
        )
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 << 20)])
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("accelrl.bridge.ActorBridge", {"Act": handler}),)
        )
        self.port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._ready.set()
        await self._stop.wait()
        await server.stop(0)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


class BridgeUnderTest:
    """A BridgeServer with its learner paused, serving in a thread of this process."""

    def __init__(self, preset: str, overrides: list[str]) -> None:
        from accelrl.bridge.server import BridgeServer
        from accelrl.config import apply_overrides
        from accelrl.logger import Progress
        from configs import load_preset

        config = apply_overrides(load_preset(preset), overrides)
        self._run_dir = tempfile.TemporaryDirectory(prefix="accelrl-bench-bridge-")
        self.server = BridgeServer(
            config, Path(self._run_dir.name), progress=Progress(interval=1e9), learn=False
        )
        self.config = config
        ready = threading.Event()
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(on_listening=lambda h, p: ready.set())),
            daemon=True,
        )
        self._thread.start()
        ready.wait(120)

    def measure(self, actors: int, num_envs: int, groups: int, seconds: float) -> dict:
        port = self.server.port
        from accelrl.bridge.local import actor_command

        bridge = dataclasses.replace(
            self.config.bridge, envs_per_actor=num_envs, actor_groups=groups
        )
        config = dataclasses.replace(self.config, bridge=bridge)
        procs = [
            subprocess.Popen(actor_command(config, f"127.0.0.1:{port}", i), cwd=ROOT, env=CHILD_ENV)
            for i in range(actors)
        ]
        try:
            deadline = time.monotonic() + 120
            while self.server.actors < actors and time.monotonic() < deadline:
                time.sleep(0.1)
            connected = self.server.actors
            time.sleep(2.0)  # warm up
            batcher = self.server.batcher
            batcher.latencies.clear()
            batcher.batch_sizes.clear()
            batcher.run_times.clear()
            start_steps, start = self.server.env_steps_received, time.perf_counter()
            cpu_start = time.process_time()  # this process serves only the bridge
            time.sleep(seconds)
            steps = self.server.env_steps_received - start_steps
            elapsed = time.perf_counter() - start
            server_cpu = time.process_time() - cpu_start
            lat = np.asarray(batcher.latencies) * 1e3
            sizes = np.asarray(batcher.batch_sizes)
            runs = np.asarray(batcher.run_times) * 1e6
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(10)
        return {
            "steps_per_s": steps / elapsed,
            "actors_connected": connected,
            "server_cpu_us_per_step": 1e6 * server_cpu / max(steps, 1),
            "refused": self.server.refused,
            "batch_mean": float(sizes.mean()) if sizes.size else 0.0,
            "batch_run_us": float(np.median(runs)) if runs.size else None,
            "p50_ms": float(np.percentile(lat, 50)) if lat.size else None,
            "p99_ms": float(np.percentile(lat, 99)) if lat.size else None,
        }

    def close(self) -> None:
        self.server.done.set()
        self._thread.join(30)
        self._run_dir.cleanup()


def child_args(role: str, env_id: str, num_envs: int, seconds: float, **extra: object) -> list:
    args = ["--role", role, "--env", env_id, "--num-envs", str(num_envs), "--seconds", str(seconds)]
    for name, value in extra.items():
        args += [f"--{name}", str(value)]
    return args


class _Round(NamedTuple):
    """One bridge run and the echo run next to it, at one point."""

    bridge: dict  # BridgeUnderTest.measure
    echo: list[dict]  # one result per echo client

    @property
    def echo_sps(self) -> float:
        return sum(r["steps_per_s"] for r in self.echo)

    @property
    def ratio(self) -> float:
        return self.bridge["steps_per_s"] / self.echo_sps


def bench(
    env_id: str,
    preset: str,
    overrides: list[str],
    points: list[tuple[int, int, int]],
    seconds: float,
    rounds: int = 3,
) -> list[dict]:
    """One row per (actors, envs per actor, groups in flight per actor).

    Bridge and echo are measured alternately, `rounds` times per point, and the row reports the
    round with the median bridge/echo ratio: on a shared host the throughput of both drifts by
    tens of percent within minutes, and a bridge run next to its echo run compares like with
    like. Every round's ratio is kept (`bridge/echo_rounds`).
    """
    rows = []
    bridge = BridgeUnderTest(preset, [f"bridge.env={env_id}", *overrides])
    echo = EchoServer()
    measured = []
    try:
        for a, e, g in points:
            runs = [
                _Round(
                    bridge.measure(a, e, g, seconds),
                    children(
                        [child_args("echo", env_id, e, seconds, port=echo.port, groups=g)] * a
                    ),
                )
                for _ in range(rounds)
            ]
            measured.append(sorted(runs, key=lambda run: run.ratio))
    finally:
        bridge.close()
        echo.close()
    local_seconds = min(seconds, 3.0)
    # the most the machine steps these envs without a bridge: one process per core
    most_envs = max(e for _, e, _ in points)
    machine = children([child_args("local", env_id, most_envs, local_seconds)] * cpu_cores())
    machine_sps = sum(r["steps_per_s"] for r in machine)
    for (a, e, g), runs in zip(points, measured, strict=True):
        median = runs[len(runs) // 2]
        b = median.bridge
        local = children([child_args("local", env_id, e, local_seconds)] * a)
        local_sps = sum(r["steps_per_s"] for r in local)
        env_cpu = float(np.mean([r["cpu_us_per_step"] for r in local]))
        server_cpu = b["server_cpu_us_per_step"]
        ceiling = min(1.0, 1e6 * cpu_cores() / (env_cpu + server_cpu) / local_sps)
        row = {
            "env": env_id,
            "actors": a,
            "envs_per_actor": e,
            "groups": g,
            "bridge_sps": b["steps_per_s"],
            "echo_sps": median.echo_sps,
            "local_sps": local_sps,
            "machine_sps": machine_sps,
            "bridge/echo": median.ratio,
            "bridge/echo_rounds": [round(run.ratio, 3) for run in runs],
            "bridge/local": b["steps_per_s"] / local_sps,
            "bridge/machine": b["steps_per_s"] / machine_sps,
            "batch_mean": b["batch_mean"],
            "batch_run_us": b["batch_run_us"],
            "act_p50_ms": b["p50_ms"],
            "act_p99_ms": b["p99_ms"],
            "actors_connected": b["actors_connected"],
            "env_cpu_us": env_cpu,
            "server_cpu_us": server_cpu,
            "cpu_ceiling": ceiling,
            "echo_rtt_p50_ms": median.echo[0]["p50_ms"],
            "echo_rtt_p99_ms": median.echo[0]["p99_ms"],
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def parse_point(text: str) -> tuple[int, int, int]:
    """`A:E:G` -> (actors, envs per actor, groups): positive counts, G at most E (the actor's
    rule: its E envs are split into G groups as evenly as they go)."""
    try:
        actors, envs, groups = (int(v) for v in text.split(":"))
    except ValueError:
        raise SystemExit(f"point {text!r}: expected actors:envs_per_actor:groups") from None
    if min(actors, envs, groups) < 1 or groups > envs:
        raise SystemExit(f"point {text!r}: need positive counts and groups <= envs")
    return actors, envs, groups


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["local", "echo"])
    parser.add_argument("--port", type=int)
    parser.add_argument("--env")
    parser.add_argument("--num-envs", type=int)
    parser.add_argument("--groups", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--rounds", type=int, default=3, help="bridge/echo pairs per point (the median is kept)"
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-pong", action="store_true")
    parser.add_argument(
        "--pong-points",
        nargs="+",
        metavar="A:E:G",
        help="Pong points as actors:envs_per_actor:groups (default: by --quick)",
    )
    args = parser.parse_args()
    from accelrl.bridge.event_loop import use_uvloop

    # every gRPC end (server, actors, echo server and clients) on the loop `accelrl` runs on
    event_loop = "uvloop" if use_uvloop() else "asyncio"
    if args.role == "local":
        print(json.dumps(role_local(args.env, args.num_envs, args.seconds)))
        return
    if args.role == "echo":
        print(
            json.dumps(
                role_echo_client(args.port, args.env, args.num_envs, args.groups, args.seconds)
            )
        )
        return

    seconds = 3.0 if args.quick else args.seconds
    rounds = 1 if args.quick else args.rounds
    # (actors, envs per actor, messages in flight per actor)
    trivial_points = (
        [(1, 1, 1), (1, 32, 1), (2, 32, 1)]
        if args.quick
        else [(1, 1, 1), (1, 8, 1), (1, 32, 1), (1, 32, 2), (2, 8, 1), (2, 32, 1), (4, 32, 1)]
    )
    common = ["bridge.max_batch=128", "bridge.max_envs=512", "bridge.deadline_ms=2"]
    rows = bench("trivial:4", "cartpole_vtrace_bridge", common, trivial_points, seconds, rounds)
    if not args.no_pong:
        if args.pong_points:
            pong_points = [parse_point(p) for p in args.pong_points]
        elif args.quick:
            pong_points = [(1, 8, 2), (2, 8, 1)]
        else:
            pong_points = [(1, 8, 1), (1, 8, 2), (1, 16, 2), (2, 8, 1), (2, 8, 2), (2, 16, 2)]
        rows += bench(
            "gymnasium:ALE/Pong-v5",
            "pong_vtrace_bridge",
            ["bridge.max_batch=64", "bridge.deadline_ms=5"],
            pong_points,
            seconds,
            rounds,
        )
    from common import load_average, write_result

    columns = [
        "env",
        "actors",
        "envs_per_actor",
        "groups",
        "bridge_sps",
        "echo_sps",
        "local_sps",
        "machine_sps",
        "bridge/echo",
        "bridge/local",
        "bridge/machine",
        "cpu_ceiling",
        "env_cpu_us",
        "server_cpu_us",
        "batch_mean",
        "batch_run_us",
        "act_p50_ms",
        "act_p99_ms",
        "echo_rtt_p50_ms",
        "echo_rtt_p99_ms",
    ]
    write_result(
        "bridge",
        {
            "title": "Actor bridge throughput (loopback, learner paused)",
            "load_average": load_average(),
            "event_loop": event_loop,
            "rows": rows,
            "tables": [
                {
                    "title": "env steps/s",
                    "columns": columns,
                    "rows": [[r[c] for c in columns] for r in rows],
                    "note": f"bridge/echo: the median of {rounds} rounds, each a bridge run "
                    "next to an echo run (every round's ratio is in the JSON); every "
                    f"server and client runs on {event_loop}, as `accelrl` does. "
                    "bridge: actors -> server with jitted inference; groups: messages "
                    "in flight per actor, each with envs_per_actor/groups envs; echo: raw "
                    "grpc.aio echo of the same messages, as many in flight; local: the envs "
                    "alone, same processes; machine: the envs alone in one process per core "
                    "(the most this machine steps without a bridge). "
                    "env_cpu_us / server_cpu_us: CPU microseconds per env step of the "
                    "env (local run) and of the bridge server (inference, batching, "
                    f"gRPC); cpu_ceiling = min(1, {cpu_cores()} cores / (env + server) "
                    "/ local): the most bridge/local can be when the server's work "
                    "shares the actors' cores. batch_run_us: the median time the server "
                    "spends acting on one batch (acting inputs, inference, replies).",
                }
            ],
        },
    )


if __name__ == "__main__":
    main()
