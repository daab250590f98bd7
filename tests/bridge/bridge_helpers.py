"""Real processes on loopback for the bridge tests: a server (`accelrl serve`) and actors."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def child_env() -> dict[str, str]:
    """The environment for a child process, read at its start, so that a test's own settings
    (variables it sets with monkeypatch) reach it."""
    return {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"}


class Proc:
    """A child process whose output lines are collected by a reader thread."""

    def __init__(self, args: list[str], env: dict | None = None):
        self.args = args
        self.popen = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env or child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        for line in self.popen.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            self._queue.put(line)

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        """The first line (seen so far or later) matching `pattern`."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for line in self.lines[seen:]:
                match = regex.search(line)
                if match:
                    return match
            seen = len(self.lines)
            if self.popen.poll() is not None and seen == len(self.lines):
                time.sleep(0.2)
                if seen == len(self.lines):
                    raise AssertionError(
                        f"process exited ({self.popen.returncode}) before "
                        f"{pattern!r}:\n" + "\n".join(self.lines[-40:])
                    )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no {pattern!r} within {timeout} s:\n" + "\n".join(self.lines[-40:])
                )
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self, sig=signal.SIGKILL):
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, sig)  # its own session: the process and its children
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def stop(self):
        self.kill(signal.SIGTERM)


def serve(
    run_dir: Path,
    *overrides: str,
    preset="cartpole_vtrace_bridge",
    port=0,
    resume=False,
    env: dict | None = None,
) -> tuple[Proc, int]:
    """`accelrl serve` (extra environment variables in `env`), once it is listening."""
    args = [sys.executable, "-m", "accelrl.cli", "serve"]
    args += [] if resume else [preset]
    args += ["--port", str(port), "--run-dir", str(run_dir), *overrides]
    if resume:
        args.append("--resume")
    proc = Proc(args, {**child_env(), **(env or {})})
    port = int(proc.wait_for(r"listening on 127\.0\.0\.1:(\d+)", 120).group(1))
    return proc, port


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m accelrl.cli ARGS` from the repo root, to completion, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "accelrl.cli", *args],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Stream:
    """A raw bidirectional `Act` stream: send messages or bytes, read ServerMessages."""

    METHOD = "/accelrl.bridge.ActorBridge/Act"

    def __init__(self, channel):
        from accelrl.bridge import bridge_pb2 as pb

        self._out = queue.Queue()
        call = channel.stream_stream(
            self.METHOD, request_serializer=None, response_deserializer=pb.ServerMessage.FromString
        )
        self._responses = call(iter(self._out.get, None), timeout=60)

    def send(self, message):
        self._out.put(message if isinstance(message, bytes) else message.SerializeToString())

    def read(self):
        return next(self._responses)

    def close(self):
        self._out.put(None)


def actor(port: int, num_envs=4, env="gymnasium:CartPole-v1", extra=()) -> Proc:
    return Proc(
        [
            sys.executable,
            "-m",
            "accelrl.bridge.actor",
            "--server",
            f"127.0.0.1:{port}",
            "--env",
            env,
            "--num-envs",
            str(num_envs),
            "--give-up-after",
            "300",
            *extra,
        ]
    )


def updates(proc: Proc) -> list[int]:
    return [int(m.group(1)) for line in proc.lines if (m := re.match(r"update\s+(\d+)", line))]


def waits_ms(proc: Proc) -> list[float]:
    return [float(m.group(1)) for line in proc.lines if (m := re.search(r"wait ([\d.]+) ms", line))]


def read_scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} from the TensorBoard event files (TFRecord framing)."""
    import struct

    from tensorboardX.proto import event_pb2

    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(Path(run_dir).glob("events.out.tfevents.*")):
        data, offset = path.read_bytes(), 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars
