"""Observation and action specs: discrete or bounded (possibly unbounded) boxes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Discrete:
    """`num_values` integer actions 0..n-1."""

    num_values: int
    dtype: np.dtype = np.dtype(np.int32)

    @property
    def shape(self) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class Box:
    """Array of `shape` with elementwise bounds (use +-inf for unbounded)."""

    shape: tuple[int, ...]
    low: np.ndarray | float = -np.inf
    high: np.ndarray | float = np.inf
    dtype: np.dtype = np.dtype(np.float32)

    def __post_init__(self) -> None:
        for name in ("low", "high"):
            value = np.broadcast_to(np.asarray(getattr(self, name), self.dtype), self.shape)
            object.__setattr__(self, name, value)

    @property
    def bounded(self) -> bool:
        return bool(np.all(np.isfinite(self.low)) and np.all(np.isfinite(self.high)))


Space = Discrete | Box
