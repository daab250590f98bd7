"""One command on one machine: the bridge server plus N local actor processes.

Actors are separate Python processes started with `python -m accelrl.bridge.actor` (a fresh
interpreter, never a fork of this gRPC-using process); each writes its output to
`RUN_DIR/actors/actor-<i>.log` (every start appended), so the terminal shows the learner's
progress alone. A supervisor thread restarts any that die while training runs; all of them
are stopped when it ends. An actor that keeps failing on its own as soon as it starts (an env
it cannot build, a spec the server refuses) stops the run with an error that quotes the end of
its log, instead of being restarted forever; actors killed by a signal are always restarted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from accelrl.config import ConfigError, TrainConfig
from accelrl.logger import Progress

QUICK_EXIT_S = 15.0
"""An actor exiting with an error this soon after it started failed at start-up."""
QUICK_EXITS_TO_GIVE_UP = 3
"""Start-up failures in a row, of one actor, that stop the run."""
LOG_LINES_QUOTED = 8
"""Lines of a failing actor's last start that its error quotes."""
START_MARK = "--- accelrl: actor started"
"""The line each start of an actor writes to its log first."""


class LocalActorsFailed(RuntimeError):
    """A local actor failed at start-up again and again: restarting it cannot help."""


def actor_command(config: TrainConfig, address: str, index: int) -> list[str]:
    """The command line of local actor `index`."""
    b = config.bridge
    command = [
        sys.executable,
        "-m",
        "accelrl.bridge.actor",
        "--server",
        address,
        "--env",
        b.env,
        "--num-envs",
        str(b.envs_per_actor),
        "--groups",
        str(b.actor_groups),
        "--seed",
        str(config.seed * 1000 + index),
        "--sticky-actions",
        str(b.sticky_actions),
        "--give-up-after",
        "60",
    ]
    if b.tls_cert:
        command += ["--tls-ca", b.tls_cert]
    return command


class LocalActors:
    """Starts, supervises (restarts) and stops local actor processes."""

    def __init__(
        self,
        config: TrainConfig,
        address: str,
        on_give_up: Callable[[LocalActorsFailed], None],
        log_dir: Path,
        token: str = "",
    ) -> None:
        """`on_give_up` is called (from the supervisor thread) when an actor cannot start;
        actor i's output goes to `log_dir/actor-<i>.log`."""
        self.config = config
        self.address = address
        self.log_dir = Path(log_dir)
        self.env = {**os.environ, "ACCELRL_BRIDGE_TOKEN": token}
        self.env.pop("XLA_FLAGS", None)
        self.on_give_up = on_give_up
        self.procs: list[subprocess.Popen] = []
        self.started: list[float] = []
        self.quick_exits: list[int] = []
        self.restarts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._supervise, daemon=True)

    def log_path(self, index: int) -> Path:
        return self.log_dir / f"actor-{index}.log"

    def _start(self, index: int) -> subprocess.Popen:
        self.started[index] = time.monotonic()
        with open(self.log_path(index), "a") as log:  # the child keeps its own descriptor
            log.write(f"{START_MARK} {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
            log.flush()
            return subprocess.Popen(
                actor_command(self.config, self.address, index),
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def _last_start_tail(self, index: int) -> str:
        """The last LOG_LINES_QUOTED lines actor `index` wrote since its latest start."""
        text = self.log_path(index).read_text(errors="replace")
        lines = text[text.rfind(START_MARK) :].splitlines()[1:]
        return "\n".join(f"  {line}" for line in lines[-LOG_LINES_QUOTED:]) or "  (nothing)"

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        n = self.config.bridge.num_actors
        self.started, self.quick_exits = [0.0] * n, [0] * n
        self.procs = [self._start(i) for i in range(n)]
        self._thread.start()

    def _supervise(self) -> None:
        while not self._stop.wait(0.5):
            for i, proc in enumerate(self.procs):
                code = proc.poll()
                # status 0: the server said training is done; it stays finished
                if code is None or code == 0 or self._stop.is_set():
                    continue
                quick = code > 0 and time.monotonic() - self.started[i] < QUICK_EXIT_S
                self.quick_exits[i] = self.quick_exits[i] + 1 if quick else 0
                if self.quick_exits[i] >= QUICK_EXITS_TO_GIVE_UP:
                    self.on_give_up(
                        LocalActorsFailed(
                            f"local actor {i} exited with status {code} within "
                            f"{QUICK_EXIT_S:g} s of starting, {self.quick_exits[i]} times in a "
                            f"row; stopping the run. The end of {self.log_path(i)}:\n"
                            + self._last_start_tail(i)
                        )
                    )
                    return
                self.procs[i] = self._start(i)
                self.restarts += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def train_bridge(
    config: TrainConfig, run_dir: Path, resume: bool = False, progress: Progress | None = None
) -> object:
    """`accelrl train <bridge preset>`: serve on 127.0.0.1 with local actors until done."""
    from accelrl.bridge.server import BridgeServer, serve_until_done

    b = config.bridge
    if b.num_actors * b.envs_per_actor > b.max_envs:  # the last actors would wait forever
        raise ConfigError(
            f"bridge.num_actors x envs_per_actor = {b.num_actors * b.envs_per_actor} local envs "
            f"exceed bridge.max_envs={b.max_envs} (the server's env slots)"
        )

    holder: dict[str, LocalActors] = {}
    server = BridgeServer(config, run_dir, resume=resume, progress=progress)

    def on_listening(host: str, port: int) -> None:
        log_dir = Path(run_dir) / "actors"
        out = progress or Progress()
        out.line(f"listening on {host}:{port}", force=True)
        out.line(
            f"starting {b.num_actors} local actors x {b.envs_per_actor} envs; their output: "
            f"{log_dir}/actor-<i>.log",
            force=True,
        )
        actors = LocalActors(
            config,
            f"{host}:{port}",
            on_give_up=server.abort,
            log_dir=log_dir,
            token=config.bridge.token or os.environ.get("ACCELRL_BRIDGE_TOKEN", ""),
        )
        holder["actors"] = actors
        actors.start()

    try:
        serve_until_done(server, on_listening=on_listening)
    finally:
        if "actors" in holder:
            holder["actors"].stop()
    return server
