"""Checkpoints of the whole train state with orbax.

Orbax writes each step into a temporary directory and renames it when complete, so a run
killed at any moment leaves only whole checkpoints behind; `restore_latest` reads the newest.
Steps are numbered by completed training iterations. Zero-size arrays (an env state with no
contact slots, an empty buffer) are not written - orbax refuses them - and come back from the
`like` state given to `restore_latest`, which knows their shapes. Give it `abstract(state)`
of a fresh state no longer held elsewhere, so that a big state (an R2D2 replay) is not in
memory twice while the checkpoint is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp

from accelrl.config import ConfigError

State = TypeVar("State")


class CheckpointMismatch(ConfigError):
    """The checkpoint's arrays do not fit the state the config describes (e.g. a resume with
    a different env.num_envs or network size)."""


def abstract(state: State) -> State:
    """`state`'s shapes, dtypes and shardings as orbax reads them (typed PRNG keys as their
    key data), without its memory: a `like` for `Checkpointer.restore_latest`."""
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, state)


class Checkpointer:
    """Saves and restores a train-state pytree under `directory`, keeping the newest `keep`."""

    def __init__(self, directory: Path, keep: int = 3) -> None:
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True)
        self._manager = ocp.CheckpointManager(
            Path(directory).absolute(),
            options=options,
            item_handlers=ocp.StandardCheckpointHandler(),  # (for `item_metadata`)
        )

    @property
    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def save(self, step: int, state: State) -> None:
        """Start writing `state` as `step` (asynchronously; `wait` or `close` to finish)."""
        self._manager.save(step, args=ocp.args.StandardSave(_without_empty(state)))

    def restore_latest(self, like: State) -> State:
        """The newest checkpoint, restored with the structure, dtypes and sharding of `like`
        (arrays, or their `abstract`)."""
        step = self._manager.latest_step()
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self._manager.directory}")
        target = abstract(_without_empty(like))
        # Compared before reading any array: a failed read would leave orbax's threads behind.
        difference = _first_difference(_leaves(self._manager.item_metadata(step)), _leaves(target))
        if difference:
            raise CheckpointMismatch(
                f"checkpoint {step} in {self._manager.directory} does not fit this config "
                f"({difference}); resume with the run's own settings (its config.yaml) or "
                "train into a new run directory"
            )
        restored = self._manager.restore(step, args=ocp.args.StandardRestore(target))
        saved = dict(jax.tree_util.tree_flatten_with_path(restored)[0])
        return jax.tree_util.tree_map_with_path(
            lambda path, leaf: _empty_like(leaf) if _is_empty(leaf) else saved[path], like
        )

    def wait(self) -> None:
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()


def _leaves(tree: Any) -> dict[str, tuple[tuple[int, ...], str]]:
    """`path -> (shape, dtype name)` of every array leaf (saved metadata or shape structs)."""
    return {
        jax.tree_util.keystr(path, simple=True, separator="/"): (tuple(leaf.shape), str(leaf.dtype))
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
    }


def _first_difference(saved: dict, wanted: dict) -> str:
    """The first leaf where a checkpoint and the state to restore differ ('' when none)."""
    for path in sorted(saved.keys() | wanted.keys()):
        if path not in wanted:
            return f"{path} is in the checkpoint, not in this config's state"
        if path not in saved:
            return f"{path} is in this config's state, not in the checkpoint"
        if saved[path] != wanted[path]:
            (shape, dtype), (want_shape, want_dtype) = saved[path], wanted[path]
            return f"{path}: {dtype}{list(shape)} saved, {want_dtype}{list(want_shape)} wanted"
    return ""


def _is_empty(leaf: Any) -> bool:
    return getattr(leaf, "size", 1) == 0


def _without_empty(tree: State) -> State:
    """`tree` with its zero-size arrays replaced by None (an empty subtree to orbax)."""
    return jax.tree.map(lambda x: None if _is_empty(x) else x, tree)


def _empty_like(leaf: Any) -> Any:
    """A new zero-size array of `leaf`'s shape, dtype and (for jax arrays) sharding."""
    empty = jnp.zeros(leaf.shape, leaf.dtype)
    sharding = getattr(leaf, "sharding", None)
    return jax.device_put(empty, sharding) if sharding is not None else empty
