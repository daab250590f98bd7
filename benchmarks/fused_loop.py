"""The fused (Anakin) training loop on CartPole: compile time, training SPS vs an env-only
rollout at the same batch, where compile time goes, and time-to-solve with the real host loop.

    .venv/bin/python benchmarks/fused_loop.py           # full run, a few minutes
    .venv/bin/python benchmarks/fused_loop.py --quick   # smoke run

Writes benchmarks/results/fused_loop.json and .md (results/fused_loop_quick.* with --quick).

Throughput figures are wall clock on a possibly shared machine, so each is the best of a few
interleaved blocks (train, env-only, train, ...), and steps per CPU-second of this process are
reported beside them (much less sensitive to other jobs). Compile times are given both as wall
and as process CPU time.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    # The repo root first: its `physics` package, not benchmarks/physics.py (the envs import it).
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import jax.numpy as jnp
import numpy as np
from common import (
    load_average,
    machine_info,
    print_table,
    read_scalars,
    run_peer,
    timer,
    write_result,
)

import accelrl.train as train_module
from accelrl.config import TrainConfig, apply_overrides
from accelrl.envs import Box, make_training_env
from accelrl.fused import FusedTrainer, make_fused_trainer
from agents import Trajectory
from configs import load_preset

PRESET = "cartpole_vtrace"
SOLVE_RETURN = 475.0
SOLVE_WINDOW = 100  # episodes

# PureJaxRL PPO (its default config: 4 envs x 128 steps, 4 epochs x 4 minibatches, MLP 64x2,
# gymnax CartPole-v1) on this 2-core CPU, jax 0.10.2, 5/5 seeds.
# Source: shared/notes/fused-loop-anchor.md and issue 2 item 10. PureJaxRL is not installable
# here, so these are constants, NOT measured by this script.
REFERENCE_PUREJAXRL_PPO = {
    "label": "PureJaxRL PPO (reference, measured separately)",
    "compile_s": 4.4,
    "solve_wall_s_incl_compile": 6.0,
    "solve_env_steps": [225_000, 280_000],
    "train_sps": [115_000, 148_000],
    "env_only_sps": [850_000, 1_200_000],
}


# ----------------------------------------------------------------------------------------------
# Configs


def divisor_at_most(n: int, k: int) -> int:
    """The largest divisor of `n` not above `k`: minibatches that split `n` envs evenly."""
    return max(d for d in range(1, min(n, k) + 1) if n % d == 0)


def batch_config(num_envs: int, quick: bool) -> TrainConfig:
    """The preset at `num_envs` envs; minibatches and chunk length adjusted to fit."""
    base = load_preset(PRESET)
    minibatches = divisor_at_most(num_envs, base.agent.num_minibatches)
    # Keep the preset's chunk (8 iterations) at 4 envs; one iteration per call is already
    # >= 8k env steps from 64 envs up, so per-call host overhead stays negligible.
    iterations = max(1, (base.iterations_per_chunk * base.env.num_envs) // num_envs)
    overrides = [
        f"env.num_envs={num_envs}",
        f"agent.num_minibatches={minibatches}",
        f"iterations_per_chunk={iterations}",
        "eval_episodes=0",
    ]
    if quick:
        overrides += ["agent.unroll_length=16", "iterations_per_chunk=2"]
    return apply_overrides(base, overrides)


# ----------------------------------------------------------------------------------------------
# Env-only rollout: the same env stack, random actions (uniform in a Box), the same number of
# steps per call


def make_env_only(config: TrainConfig) -> tuple[Callable, Any, int]:
    """(jitted rollout(carry) -> carry, initial carry, env steps per call)."""
    e = config.env
    env = make_training_env(
        e.name,
        e.num_envs,
        max_steps=e.max_steps,
        action_repeat=e.action_repeat,
        normalize_observation=e.normalize_observation,
    )
    space = env.action_space
    length = config.agent.unroll_length * config.iterations_per_chunk

    def random_action(key: jax.Array) -> jax.Array:
        if isinstance(space, Box):
            shape = (e.num_envs, *space.shape)
            return jax.random.uniform(key, shape, minval=space.low, maxval=space.high)
        return jax.random.randint(key, (e.num_envs,), 0, space.num_values)

    def rollout(carry: tuple) -> tuple:
        def step(carry: tuple, _: None) -> tuple[tuple, None]:
            env_state, timestep, key, reward_sum = carry
            key, action_key = jax.random.split(key)
            action = random_action(action_key)
            env_state, timestep = env.step(env_state, action)
            return (env_state, timestep, key, reward_sum + timestep.reward.sum()), None

        carry, _ = jax.lax.scan(step, carry, None, length=length)
        return carry

    def init(key: jax.Array) -> tuple:
        reset_key, key = jax.random.split(key)
        env_state, timestep = env.reset(reset_key)
        return env_state, timestep, key, jnp.zeros((), jnp.float32)

    carry = jax.jit(init)(jax.random.PRNGKey(1))
    jitted = jax.jit(rollout, donate_argnums=0)
    return jitted, carry, e.num_envs * length * e.action_repeat


# ----------------------------------------------------------------------------------------------
# Throughput


def measure_throughput(
    train_fn: Callable,
    train_carry: Any,
    train_steps: int,
    env_fn: Callable,
    env_carry: Any,
    env_steps: int,
    repeats: int,
    min_seconds: float,
) -> dict[str, Any]:
    """Interleaved blocks of training and env-only calls; best and median SPS of each."""
    samples: dict[str, list[tuple[float, float]]] = {"train": [], "env": []}
    # Warm-up call of each (the first call after compile pays one-off allocations).
    train_carry = jax.block_until_ready(train_fn(train_carry))
    env_carry = jax.block_until_ready(env_fn(env_carry))
    for _ in range(repeats):
        for name in ("train", "env"):
            fn, carry, steps = (
                (train_fn, train_carry, train_steps)
                if name == "train"
                else (env_fn, env_carry, env_steps)
            )
            calls = 0
            wall0, cpu0 = time.perf_counter(), time.process_time()
            while True:
                carry = jax.block_until_ready(fn(carry))
                calls += 1
                if time.perf_counter() - wall0 >= min_seconds:
                    break
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            samples[name].append((calls * steps / wall, calls * steps / max(cpu, 1e-9)))
            if name == "train":
                train_carry = carry
            else:
                env_carry = carry
    out: dict[str, Any] = {}
    for name, values in samples.items():
        walls = [w for w, _ in values]
        cpus = [c for _, c in values]
        out[name] = {
            "sps_best": max(walls),
            "sps_median": float(np.median(walls)),
            "sps_per_cpu_second_best": max(cpus),
            "samples_wall_sps": walls,
        }
    return out


# ----------------------------------------------------------------------------------------------
# Where compile time goes


def _lower_and_compile(fn: Callable, *args: Any) -> dict[str, float]:
    with timer() as lower:
        lowered = jax.jit(fn).lower(*args)
    with timer() as comp:
        lowered.compile()
    return {
        "lower_wall_s": lower["wall"],
        "lower_cpu_s": lower["cpu"],
        "xla_wall_s": comp["wall"],
        "xla_cpu_s": comp["cpu"],
        "total_cpu_s": lower["cpu"] + comp["cpu"],
    }


def _call_rollout(trainer: FusedTrainer, state: Any) -> Any:
    """`trainer._rollout` (private, so its signature may move): with per-step acting keys
    when it takes them, as `_iteration` passes them."""
    if len(inspect.signature(trainer._rollout).parameters) > 1:
        keys = jax.random.split(state.key, trainer.config.agent.unroll_length)
        return trainer._rollout(state, keys)
    return trainer._rollout(state)


def compile_breakdown(trainer: FusedTrainer, state: Any) -> dict[str, dict[str, float]]:
    """Trace+lower and XLA-compile times of the pieces of one fused iteration."""
    agent_cfg = trainer.config.agent

    def rollout(state: Any) -> Any:
        return _call_rollout(trainer, state)

    _, transitions = jax.eval_shape(rollout, state)

    def update(params: Any, opt_state: Any, transitions: Any, key: jax.Array) -> Any:
        traj = Trajectory(
            observation=transitions.observation,
            next_observation=transitions.next_observation,
            is_first=transitions.is_first,
            action=transitions.action,
            behaviour_log_prob=transitions.behaviour_log_prob,
            reward=transitions.reward * agent_cfg.reward_scale,
            terminated=transitions.terminated,
            truncated=transitions.truncated,
            initial_carry=state.carry,
        )
        return trainer.learner.update(params, opt_state, traj, key)

    # One iteration: the same trainer with a one-iteration chunk.
    single = make_fused_trainer(apply_overrides(trainer.config, ["iterations_per_chunk=1"]))

    return {
        "rollout_only": _lower_and_compile(rollout, state),
        "update_only": _lower_and_compile(
            update, state.params, state.opt_state, transitions, state.key
        ),
        "one_iteration": _lower_and_compile(single.run_chunk, state),
        "chunk": _lower_and_compile(trainer.run_chunk, state),
    }


# ----------------------------------------------------------------------------------------------
# One batch size


def bench_config(
    config: TrainConfig, repeats: int, min_seconds: float
) -> tuple[dict[str, Any], FusedTrainer]:
    """Compile times and steady-state SPS of `config`'s fused chunk and of the env-only rollout
    (interleaved blocks); also returns the trainer."""
    with timer() as build:
        trainer = make_fused_trainer(config)
        state = jax.block_until_ready(trainer.init(jax.random.PRNGKey(0)))
    with timer() as compile_t:
        run_chunk = trainer.compile_chunk(state)
    env_fn, env_carry, env_steps = make_env_only(config)
    with timer() as env_compile:
        env_fn = env_fn.lower(env_carry).compile()

    def train_fn(state: Any) -> Any:
        return run_chunk(state)[0]

    tp = measure_throughput(
        train_fn,
        state,
        trainer.steps_per_chunk,
        env_fn,
        env_carry,
        env_steps,
        repeats=repeats,
        min_seconds=min_seconds,
    )
    result = {
        "num_envs": config.env.num_envs,
        "num_minibatches": config.agent.num_minibatches,
        "unroll_length": config.agent.unroll_length,
        "iterations_per_chunk": config.iterations_per_chunk,
        "env_steps_per_chunk": trainer.steps_per_chunk,
        "setup_wall_s": build["wall"],
        "compile_wall_s": compile_t["wall"],
        "compile_cpu_s": compile_t["cpu"],
        "env_only_compile_wall_s": env_compile["wall"],
        "env_only_steps_per_call": env_steps,
        "train": tp["train"],
        "env_only": tp["env"],
        "ratio_best": tp["train"]["sps_best"] / tp["env"]["sps_best"],
        "ratio_per_cpu_second": (
            tp["train"]["sps_per_cpu_second_best"] / tp["env"]["sps_per_cpu_second_best"]
        ),
        "load_average": load_average(),
    }
    return result, trainer


def bench_batch(num_envs: int, args: argparse.Namespace) -> dict[str, Any]:
    result, trainer = bench_config(
        batch_config(num_envs, args.quick), args.repeats, args.min_seconds
    )
    if args.breakdown and num_envs in (args.batches[0], args.batches[-1]):
        # Fresh state (the timed calls donated the old one's buffers).
        fresh = trainer.init(jax.random.PRNGKey(0))
        result["compile_breakdown"] = compile_breakdown(trainer, fresh)
    return result


# ----------------------------------------------------------------------------------------------
# Time to solve with the real host loop


class _Recorder:
    """A `Progress` stand-in: remembers each line and when it came, prints only forced ones."""

    def __init__(self, echo: bool) -> None:
        self.lines: list[tuple[float, str]] = []
        self.echo = echo

    def line(self, text: str, force: bool = False) -> None:
        self.lines.append((time.perf_counter(), text))
        if self.echo and force:
            print(f"    {text}", flush=True)


def _last_window_mean(chunks: list[tuple[int, float]], window: int) -> float | None:
    """Mean return of the last `window` episodes from per-chunk (episodes, return sum).

    Within a chunk only the mean is known, so the oldest chunk that is needed only in part
    contributes its mean for the episodes still missing. None until `window` episodes ended.
    """
    need, total = window, 0.0
    for episodes, return_sum in reversed(chunks):
        if episodes <= 0:
            continue
        take = min(episodes, need)
        total += return_sum / episodes * take
        need -= take
        if need == 0:
            return total / window
    return None


def time_to_solve(config: TrainConfig, echo: bool) -> dict[str, Any]:
    """Train with `accelrl.train.train`; when does the last-100-episode mean reach 475?"""
    chunks: list[dict[str, Any]] = []
    original = train_module._summaries

    def recording_summaries(metrics: Any, elapsed: float, steps: int) -> dict[str, float]:
        # Called once per chunk, right after the chunk's metrics reached the host: gives the
        # exact episode count behind each chunk's mean return (TensorBoard only has the mean).
        m = jax.tree.map(np.asarray, metrics)
        chunks.append(
            {
                "t": time.perf_counter(),
                "steps": steps,
                "episodes": int(m.episodes),
                "return_sum": float(m.episode_return_sum),
            }
        )
        return original(metrics, elapsed, steps)

    recorder = _Recorder(echo)
    train_module._summaries = recording_summaries
    try:
        with tempfile.TemporaryDirectory() as run_dir:
            t0 = time.perf_counter()
            result = train_module.train(config, Path(run_dir), progress=recorder)
            t_end = time.perf_counter()
            events = read_scalars(Path(run_dir))
    finally:
        train_module._summaries = original

    compile_started = next(t for t, text in recorder.lines if text.startswith("compiling"))
    compiled_at = next(t for t, text in recorder.lines if text.startswith("compiled in"))
    series, env_steps, solved = [], 0, None
    history: list[tuple[int, float]] = []
    for chunk in chunks:
        env_steps += chunk["steps"]
        history.append((chunk["episodes"], chunk["return_sum"]))
        mean100 = _last_window_mean(history, SOLVE_WINDOW)
        series.append((env_steps, round(chunk["t"] - t0, 3), mean100))
        if solved is None and mean100 is not None and mean100 >= SOLVE_RETURN:
            solved = {
                "env_steps": env_steps,
                "wall_s_incl_compile": chunk["t"] - t0,
                "wall_s_excl_compile": chunk["t"] - t0 - result.compile_seconds,
                "train_loop_wall_s": chunk["t"] - compiled_at,
                "mean_return_last_100": mean100,
            }
    # Cross-check from TensorBoard alone: CartPole's return equals the episode length, so the
    # episodes behind a chunk's mean are about steps_per_chunk / mean length.
    approx_history, approx_solved_at = [], None
    lengths = dict((s, v) for s, v, _ in events.get("charts/episodic_length", []))
    per_chunk = chunks[0]["steps"] if chunks else 1
    for step, value, _ in events.get("charts/episodic_return", []):
        episodes = per_chunk / max(lengths.get(step, value), 1.0)
        approx_history.append((episodes, value * episodes))
        mean = _last_window_mean(approx_history, SOLVE_WINDOW)
        if approx_solved_at is None and mean is not None and mean >= SOLVE_RETURN:
            approx_solved_at = step
    return {
        "seed": config.seed,
        "total_env_steps": result.env_steps,
        "setup_wall_s": compile_started - t0,
        "compile_wall_s": result.compile_seconds,
        "run_wall_s": t_end - t0,
        "train_sps_after_compile": (result.env_steps / max(result.train_seconds, 1e-9)),
        "final_chunk_return": result.recent_return,
        "solved": solved,
        "solved_env_steps_from_tensorboard_estimate": approx_solved_at,
        "mean_return_last_100_by_chunk": series,
        "load_average": load_average(),
    }


def solve_config(seed: int, quick: bool) -> TrainConfig:
    """The preset of the time-to-solve runs at `seed` (tiny with `quick`)."""
    config = apply_overrides(load_preset(PRESET), [f"seed={seed}", "eval_episodes=0"])
    if quick:
        config = apply_overrides(config, ["total_env_steps=2048", "agent.unroll_length=16"])
    return config


def time_to_solve_cached(seed: int, quick: bool) -> list[dict[str, Any]]:
    """Time-to-solve of `seed` in two fresh processes sharing one new XLA persistent cache:
    the first compiles and fills it, the second (a re-run, as `accelrl train` runs by default:
    the CLI turns the cache on) loads the compiled step instead of compiling it."""
    runs = []
    with tempfile.TemporaryDirectory() as cache_dir:
        env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": cache_dir}
        command = [sys.executable, __file__, "--solve-only", "--seeds", str(seed)]
        for _ in range(2):
            out = subprocess.run(
                command + (["--quick"] if quick else []),
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(out.stdout.splitlines()[-1])[0])
    return runs


# ----------------------------------------------------------------------------------------------


def gymnax_env_only(batches: list[dict[str, Any]], min_seconds: float) -> dict[str, Any]:
    """gymnax's CartPole env-only SPS at each measured batch and steps per call:
    {"by_batch": {num_envs: SPS}, "versions": ...}, or {"error": why}."""
    if not batches:
        return {}
    sizes = [str(b["num_envs"]) for b in batches]
    lengths = [str(b["env_only_steps_per_call"] // b["num_envs"]) for b in batches]
    result = run_peer(
        ["cartpole", "--batches", *sizes, "--lengths", *lengths, "--seconds", str(min_seconds)],
        timeout=600,
    )
    if "error" in result:
        return {"error": result["error"]}
    by_batch = {r["batch"]: r["steps_per_s"] for r in result["batches"]}
    return {"by_batch": by_batch, "versions": result["versions"]}


PPO_PEER_LABEL = "PPO, PureJaxRL's default config, on gymnax (peer, this run)"


def ppo_peer(seeds: list[int], quick: bool) -> dict[str, Any]:
    """benchmarks/peers.py's PPO (PureJaxRL's CartPole config on gymnax) at `seeds`, in the
    peers interpreter: {"runs": [...], "versions": ...} or {"error": why}. Not in --quick."""
    if quick or not seeds:
        return {}
    print(f"peer: PPO with PureJaxRL's config on gymnax, seeds {seeds} ...", flush=True)
    seed_args = [str(s) for s in seeds]
    return run_peer(
        ["ppo_cartpole", "--seeds", *seed_args, "--solve-return", str(SOLVE_RETURN)],
        timeout=120 + 60 * len(seeds),
    )


def peer_versions(result: dict[str, Any]) -> str:
    """A peer's versions for a table note, or why it was not measured."""
    if "error" in result:
        return f"not measured: {result['error']}"
    return ", ".join(f"{k} {v}" for k, v in result.get("versions", {}).items()) or "not run"


def _fmt_range(values: list[float]) -> str:
    lo, hi = values
    return f"{lo:,.0f}–{hi:,.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny, seconds")
    parser.add_argument("--batches", type=int, nargs="+", help="num_envs values")
    parser.add_argument("--seeds", type=int, nargs="+", help="time-to-solve seeds")
    parser.add_argument(
        "--solve-only",
        action="store_true",
        help="only time-to-solve; print its results as one JSON line (used for cache runs)",
    )
    parser.add_argument("--repeats", type=int, help="interleaved timing blocks per batch")
    parser.add_argument("--min-seconds", type=float, help="minimum wall time of one block")
    parser.add_argument(
        "--breakdown",
        type=lambda s: s.lower() in ("1", "true", "yes"),
        default=None,
        help="also compile rollout-only / update-only / one iteration (default: not in --quick)",
    )
    args = parser.parse_args(argv)
    q = args.quick
    args.batches = args.batches or ([4] if q else [4, 64, 512, 2048])
    args.seeds = args.seeds if args.seeds is not None else ([0] if q else [0, 1, 2])
    args.repeats = args.repeats or (1 if q else 3)
    args.min_seconds = args.min_seconds or (0.2 if q else 1.0)
    args.breakdown = (not q) if args.breakdown is None else args.breakdown
    started = time.perf_counter()
    meta = machine_info()
    print(
        f"fused_loop: {meta['cpu_model']}, {meta['usable_cores']} cores, "
        f"{meta['device_count']}x {meta['device_kind']}, load {meta['load_average']}",
        flush=True,
    )

    if not args.solve_only:
        # Every compile in this process is a real one, whatever cache the caller configured;
        # the cached runs below are separate processes with a cache of their own.
        jax.config.update("jax_enable_compilation_cache", False)

    # Time-to-solve first: the process is cold (nothing compiled yet), like `make train`.
    solves = []
    for seed in args.seeds:
        config = solve_config(seed, q)
        print(
            f"time-to-solve: {PRESET} seed {seed}, {config.total_env_steps:,} env steps",
            flush=True,
            file=sys.stderr if args.solve_only else sys.stdout,
        )
        solves.append(time_to_solve(config, echo=not args.solve_only))
    if args.solve_only:
        print(json.dumps(solves))
        return 0
    cached = []
    if args.seeds:
        print(f"time-to-solve with a persistent compilation cache: seed {args.seeds[0]} ...")
        cached = time_to_solve_cached(args.seeds[0], q)

    batches = []
    for num_envs in args.batches:
        print(f"batch {num_envs} envs ...", flush=True)
        batches.append(bench_batch(num_envs, args))

    print("peer: gymnax CartPole env-only ...", flush=True)
    gymnax = gymnax_env_only(batches, args.min_seconds)
    gymnax_sps = gymnax.get("by_batch", {})
    ppo = ppo_peer(args.seeds, q)

    # ------------------------------------------------------------------ tables
    ref = REFERENCE_PUREJAXRL_PPO
    sps_cols = [
        "envs",
        "T x iters/chunk",
        "compile s (wall)",
        "compile s (CPU)",
        "train SPS",
        "env-only SPS",
        "ratio",
        "gymnax env-only SPS",
        "env-only / gymnax",
        "train SPS/CPU-s",
        "env-only SPS/CPU-s",
        "ratio (CPU)",
        "load",
    ]
    sps_rows = [
        [
            b["num_envs"],
            f"{b['unroll_length']} x {b['iterations_per_chunk']}",
            b["compile_wall_s"],
            b["compile_cpu_s"],
            b["train"]["sps_best"],
            b["env_only"]["sps_best"],
            b["ratio_best"],
            gymnax_sps.get(b["num_envs"]),
            b["env_only"]["sps_best"] / gymnax_sps[b["num_envs"]]
            if b["num_envs"] in gymnax_sps
            else None,
            b["train"]["sps_per_cpu_second_best"],
            b["env_only"]["sps_per_cpu_second_best"],
            b["ratio_per_cpu_second"],
            b["load_average"][0] if b["load_average"] else None,
        ]
        for b in batches
    ]
    sps_rows.append(
        [
            "4–512",
            "128 x —",
            ref["compile_s"],
            None,
            _fmt_range(ref["train_sps"]),
            _fmt_range(ref["env_only_sps"]),
            None,
            None,
            None,
            None,
            None,
            None,
            ref["label"],
        ]
    )
    solve_cols = [
        "run",
        "solved at env steps",
        "wall s incl. compile",
        "wall s excl. compile",
        "setup s",
        "compile s",
        "train SPS",
        "final chunk return",
        "load",
    ]
    solve_rows = []
    labels = [f"accelrl {PRESET} seed {s['seed']}" for s in solves]
    cache_states = ["new process, empty persistent cache", "re-run, cache filled (CLI default)"]
    labels += [
        f"accelrl {PRESET} seed {c['seed']}, {state}"
        for c, state in zip(cached, cache_states, strict=True)
    ]
    for label, s in zip(labels, solves + cached, strict=True):
        sv = s["solved"] or {}
        solve_rows.append(
            [
                label,
                sv.get("env_steps", f"not within {s['total_env_steps']:,}"),
                sv.get("wall_s_incl_compile"),
                sv.get("wall_s_excl_compile"),
                s["setup_wall_s"],
                s["compile_wall_s"],
                s["train_sps_after_compile"],
                s["final_chunk_return"],
                s["load_average"][0] if s["load_average"] else None,
            ]
        )
    for run in ppo.get("runs", []):
        solved = run["solved_env_steps"] is not None
        solve_rows.append(
            [
                f"{PPO_PEER_LABEL}, seed {run['seed']}",
                run["solved_env_steps"] if solved else f"not within {run['total_env_steps']:,}",
                run["solve_wall_s_incl_compile"],
                run["solve_wall_s_incl_compile"] - run["compile_wall_s"] if solved else None,
                None,
                run["compile_wall_s"],
                run["train_sps"],
                None,
                None,
            ]
        )
    solve_rows.append(
        [
            ref["label"],
            _fmt_range(ref["solve_env_steps"]),
            ref["solve_wall_s_incl_compile"],
            ref["solve_wall_s_incl_compile"] - ref["compile_s"],
            None,
            ref["compile_s"],
            _fmt_range(ref["train_sps"]),
            None,
            None,
        ]
    )
    tables = [
        {
            "title": "Training vs env-only throughput (CartPole, fused chunk)",
            "columns": sps_cols,
            "rows": sps_rows,
            "note": (
                "SPS = env steps per wall second, best of interleaved blocks after compile "
                "and a warm-up call. SPS/CPU-s = env steps per CPU second of this process "
                "(less sensitive to other load). ratio = train / env-only (the upper bound: same "
                "env stack from make_training_env, random actions, lax.scan over the same "
                "number of steps, jitted). gymnax: its CartPole-v1 (PureJaxRL's env) in the same "
                "rollout, measured in this run by benchmarks/peers.py in the peers interpreter "
                f"({peer_versions(gymnax)}). Reference row: constants, not measured here."
            ),
        },
        {
            "title": f"Time to solve (last-{SOLVE_WINDOW}-episode mean return >= "
            f"{SOLVE_RETURN:g}), real host loop `accelrl.train.train`",
            "columns": solve_cols,
            "rows": solve_rows,
            "note": (
                "Wall time from the train() call: setup (trainer build, init) + compile + "
                "chunks, including TensorBoard writes and checkpoints; excl. compile subtracts "
                "the compile time only. Solve is checked at chunk ends (every "
                f"{solves[0]['total_env_steps'] // max(len(solves[0]['mean_return_last_100_by_chunk']), 1):,}"  # noqa: E501
                " env steps) with exact per-chunk episode counts; the oldest chunk of the "
                "window is counted at its mean. Rows without a cache compile from scratch (the "
                "fair comparison with the reference); the persistent-cache rows run in fresh "
                "processes sharing one new cache directory, the second loading the step that "
                "the first compiled (what re-running `accelrl train` costs). The PPO peer rows: "
                "benchmarks/peers.py's PPO with PureJaxRL's default CartPole config (4 envs x "
                "128 steps, 4 epochs x 4 minibatches, MLP 64x2 tanh; code written for this "
                "benchmark, PureJaxRL itself is a script, not a package) on gymnax, in the peers "
                f"interpreter ({peer_versions(ppo)}); the whole run is one jitted call, so its "
                "solve time is compile + the run's share up to the solving step, and its "
                "episodes are checked every step."
            )
            if solves
            else None,
        },
    ]
    if args.breakdown:
        rows = []
        for b in batches:
            for part, t in b.get("compile_breakdown", {}).items():
                rows.append(
                    [
                        b["num_envs"],
                        part,
                        t["lower_cpu_s"],
                        t["xla_cpu_s"],
                        t["total_cpu_s"],
                        t["lower_wall_s"] + t["xla_wall_s"],
                    ]
                )
        tables.append(
            {
                "title": "Where compile time goes (process CPU seconds)",
                "columns": [
                    "envs",
                    "program",
                    "trace+lower CPU s",
                    "XLA compile CPU s",
                    "total CPU s",
                    "total wall s",
                ],
                "rows": rows,
                "note": (
                    "Smallest and largest batch only. Each program jitted and compiled on its own "
                    "after the timed runs (so one-off "
                    "first-compile costs are already paid). chunk = run_chunk as the trainer "
                    "compiles it, without donation/sharding annotations."
                ),
            }
        )
    payload = {
        "title": "Fused loop on CartPole" + (" (quick smoke run)" if q else ""),
        "preset": PRESET,
        "quick": q,
        "meta": meta,
        "batches": batches,
        "time_to_solve": solves,
        "time_to_solve_persistent_cache": cached,
        "reference_purejaxrl_ppo": ref,
        "peer_gymnax_env_only": gymnax,
        "peer_ppo_cartpole": ppo,
        "tables": tables,
        "notes": [
            f"Total benchmark wall time {time.perf_counter() - started:.0f} s.",
            "2-core machine possibly shared with other jobs: compare CPU-second figures "
            "and the load averages before reading much into wall-clock differences.",
        ],
        "args": vars(args),
    }
    name = "fused_loop_quick" if q else "fused_loop"
    json_path, md_path = write_result(name, payload)
    for table in tables:
        print(f"\n{table['title']}")
        print_table(table["columns"], table["rows"])
    print(f"\nwrote {json_path} and {md_path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
