"""MuJoCo's line search (constraints._line_search_mujoco), written without branches, against a
plain transcription of its loops (MuJoCo 4.0.1's CGsearch) on random lines of inequality rows.
Trajectories of models that rely on it are in test_float64.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from physics import constraints as con


class _Line:
    """phi(a) = a dMr + a^2 dMd / 2 + sum_i D_i min(jar_i + a jd_i, 0)^2 / 2, in numpy."""

    def __init__(self, jar, jd, D, dMr, dMd):
        self.jar, self.jd, self.D, self.dMr, self.dMd = jar, jd, D, dMr, max(dMd, con.MINVAL)

    def at(self, a: float) -> dict:
        j = self.jar + a * self.jd
        y = np.minimum(j, 0.0)
        return {
            "a": a,
            "cost": a * self.dMr + 0.5 * a * a * self.dMd + 0.5 * np.sum(self.D * y * y),
            "g": self.dMr + a * self.dMd + np.sum(self.D * y * self.jd),
            "h": self.dMd + np.sum(np.where(j < 0, self.D * self.jd**2, 0.0)),
        }


def _mujoco_search(line: _Line, gtol: float, limit: int) -> float:
    """CGsearch's control flow, loop for loop (evals counts MuJoCo's LSiter)."""
    evals = 0

    def at(a):
        nonlocal evals
        evals += 1
        return line.at(a)

    def newton(p):
        return p["a"] - p["g"] / p["h"]

    def update(p, candidates):  # updateBracket: the closer candidate on p's side, in order
        moved = False
        for c in candidates:
            if (p["g"] < 0 and c["g"] < 0 and p["g"] < c["g"]) or (
                p["g"] > 0 and c["g"] > 0 and p["g"] > c["g"]
            ):
                p, moved = c, True
        return p, moved

    p0 = at(0.0)
    p1 = at(newton(p0))
    if abs(p1["g"]) < gtol:
        return p1["a"]
    direction = 1 if p1["g"] < 0 else -1
    p2 = None
    while p1["g"] * direction <= -gtol and evals < limit:
        p2, p1 = p1, at(newton(p1))
        if abs(p1["g"]) < gtol:
            return p1["a"]
    if evals >= limit or p2 is None:
        return p1["a"]
    p2next, p1next = p1, at(newton(p1))
    while evals < limit:
        mid = at(0.5 * (p1["a"] + p2["a"]))
        candidates = [p1next, p2next, mid]
        converged = [c for c in candidates if abs(c["g"]) < gtol]
        if converged:
            return min(converged, key=lambda c: c["cost"])["a"]  # the first of equal costs
        p1, moved1 = update(p1, candidates)
        if moved1:
            p1next = at(newton(p1))
        p2, moved2 = update(p2, candidates)
        if moved2:
            p2next = at(newton(p2))
        if not (moved1 or moved2):
            return mid["a"]
    if p1["cost"] <= p2["cost"] and p1["cost"] < p0["cost"]:
        return p1["a"]
    if p2["cost"] <= p1["cost"] and p2["cost"] < p0["cost"]:
        return p2["a"]
    return 0.0


@pytest.mark.parametrize("limit", [1, 3, 4, 6, 10])
def test_mujocos_search_takes_its_steps_without_branches(limit, x64):
    rng = np.random.default_rng(limit)
    n, lines = 9, 1000
    jar = rng.normal(size=(lines, n))
    jd = rng.normal(size=(lines, n)) * rng.uniform(0.1, 3.0, (lines, 1))
    D = rng.uniform(0.1, 10.0, (lines, n))
    dMr = -np.abs(rng.normal(size=lines)) * rng.uniform(0.1, 5.0, lines)  # descent
    dMd = rng.uniform(0.01, 2.0, lines)
    gtol = 10.0 ** rng.uniform(-6, 1, lines)

    @jax.jit
    @jax.vmap
    def search(jar, jd, D, dMr, dMd, gtol):
        line = con._Line(jar, jd, D, 1.0 / D, None, dMr, dMd)
        return con._line_search_mujoco(line, gtol, limit)

    got = np.asarray(search(*map(jnp.asarray, (jar, jd, D, dMr, dMd, gtol))))
    want = [
        _mujoco_search(_Line(jar[i], jd[i], D[i], dMr[i], dMd[i]), gtol[i], limit)
        for i in range(lines)
    ]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert len({round(a, 9) for a in want}) > lines // 2  # the lines end in different places


def test_a_zero_step_is_not_searched():
    line = con._Line(*(jnp.ones(3),) * 4, None, jnp.asarray(0.0), jnp.asarray(0.0))
    assert float(con._line_search_mujoco(line, jnp.asarray(0.0), 4)) == 0
