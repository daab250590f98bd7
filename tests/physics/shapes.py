"""Convex point sets that mesh tests build hulls from, MJCF's number lists, and random poses
of two free bodies."""

import numpy as np


def rock(seed: int = 1) -> np.ndarray:
    """Points whose convex hull has triangular faces only."""
    return np.random.default_rng(seed).normal(size=(20, 3)) * [0.1, 0.07, 0.05]


def prism(n: int) -> np.ndarray:
    """An irregular convex n-gon prism: two n-gon faces (MuJoCo's mesh polygons)."""
    rng = np.random.default_rng(n)
    t = (np.arange(n) + rng.uniform(-0.2, 0.2, n)) * 2 * np.pi / n + 0.1
    return np.array([[0.1 * np.cos(a), 0.07 * np.sin(a), z] for z in (-0.05, 0.05) for a in t])


def floats(x: np.ndarray) -> str:
    """An array as MJCF's space-separated numbers."""
    return " ".join(repr(float(v)) for v in np.ravel(x))


def free_pair_qpos(rng: np.random.Generator, spread: float) -> np.ndarray:
    """qpos of two free bodies: the first at the origin, the second within +-spread of it,
    both randomly turned."""
    q = rng.normal(size=14)
    q[:3], q[7:10] = 0.0, rng.uniform(-spread, spread, 3)
    q[3:7] /= np.linalg.norm(q[3:7])
    q[10:14] /= np.linalg.norm(q[10:14])
    return q
