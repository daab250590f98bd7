"""Run outputs: TensorBoard scalars (x-axis: env steps) and throttled console progress."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from tensorboardX import SummaryWriter


class RunLogger:
    """Writes scalars to TensorBoard event files in `run_dir`.

    On resume pass `purge_step`: events a killed run wrote past its last checkpoint are
    discarded by TensorBoard, so curves continue instead of overlapping.

    Each writer gets its own file: tensorboardX names files by the second they were opened
    (and truncates an existing one), so a run resumed within the same second would erase its
    predecessor's events. The nanosecond suffix keeps names unique and in time order.
    """

    def __init__(self, run_dir: Path, purge_step: int | None = None) -> None:
        self._writer = SummaryWriter(
            str(run_dir), purge_step=purge_step, filename_suffix=f".{time.time_ns()}"
        )

    def scalars(self, step: int, values: dict[str, float]) -> None:
        for name, value in values.items():
            self._writer.add_scalar(name, value, global_step=step)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class Progress:
    """Console lines at most every `interval` seconds (and whenever `force`d)."""

    def __init__(self, interval: float = 2.0, stream: TextIO = sys.stdout) -> None:
        self._interval = interval
        self._stream = stream
        self._last = -float("inf")

    def line(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last >= self._interval:
            self._last = now
            print(text, file=self._stream, flush=True)
