"""Checkpoints of the whole train state with orbax.

Orbax writes each step into a temporary directory and renames it when complete, so a run
killed at any moment leaves only whole checkpoints behind; `restore_latest` reads the newest.
Steps are numbered by completed training iterations.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import jax
import orbax.checkpoint as ocp

State = TypeVar("State")


class Checkpointer:
    """Saves and restores a train-state pytree under `directory`, keeping the newest `keep`."""

    def __init__(self, directory: Path, keep: int = 3) -> None:
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True)
        self._manager = ocp.CheckpointManager(Path(directory).absolute(), options=options)

    @property
    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def save(self, step: int, state: State) -> None:
        """Start writing `state` as `step` (asynchronously; `wait` or `close` to finish)."""
        self._manager.save(step, args=ocp.args.StandardSave(state))

    def restore_latest(self, like: State) -> State:
        """The newest checkpoint, restored with the structure, dtypes and sharding of `like`."""
        step = self._manager.latest_step()
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self._manager.directory}")
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        return self._manager.restore(step, args=ocp.args.StandardRestore(abstract))

    def wait(self) -> None:
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()
