"""The host loop: compile once, then run chunks of fused iterations, logging and checkpointing
between them. Nothing here runs per environment step."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from accelrl.checkpoint import Checkpointer, abstract
from accelrl.config import TrainConfig, save_config
from accelrl.early_stop import RecentReturns
from accelrl.fused import ChunkMetrics, TrainState, make_fused_trainer, num_chunks
from accelrl.logger import Progress, RunLogger


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (back on after, as it was).

    Tracing and lowering the step allocate millions of short-lived objects, and the collector's
    passes over the whole heap (JAX, flax, TFP) cost about 0.9 of the ~11 CPU-s that CartPole's
    set-up and compile take when run one after the other. Reference counting still frees
    everything that is not in a cycle; the next collection takes the rest.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class TrainingDiverged(RuntimeError):
    """Loss or gradients became non-finite; the last good checkpoint is left intact."""


@dataclass(frozen=True)
class TrainResult:
    state: TrainState
    env_steps: int
    compile_seconds: float
    train_seconds: float
    recent_return: float | None
    target_reached: bool = False  # stopped early at config.target_return


def _summaries(metrics: ChunkMetrics, elapsed: float, steps: int) -> dict[str, float]:
    m = jax.tree.map(np.asarray, metrics)
    values = {
        "charts/SPS": steps / max(elapsed, 1e-9),
        "charts/learning_rate": float(m.learning_rate),
        **{f"losses/{name}": float(value) for name, value in m.losses.items()},
    }
    if int(m.episodes) > 0:
        values["charts/episodic_return"] = float(m.episode_return_sum) / int(m.episodes)
        values["charts/episodic_length"] = float(m.episode_length_sum) / int(m.episodes)
    return values


def train(
    config: TrainConfig,
    run_dir: Path,
    resume: bool = False,
    max_chunks: int | None = None,
    progress: Progress | None = None,
    max_seconds: float | None = None,
) -> TrainResult:
    """Train `config` in `run_dir` (created if needed), or continue it with `resume`.

    `max_chunks` stops this call after that many chunks, `max_seconds` after the first chunk
    that ends that many seconds after the call (compile included); the run can be resumed later.
    With `config.target_return` set, training stops at the first chunk where the mean return
    of the latest `config.target_episodes` episodes reaches it (accelrl/early_stop.py).
    """
    called = time.perf_counter()
    run_dir = Path(run_dir)
    progress = progress or Progress()
    if config.distributed:
        jax.distributed.initialize()
    trainer = make_fused_trainer(config)  # checks the config: a ConfigError writes nothing
    run_dir.mkdir(parents=True, exist_ok=True)
    if not resume:  # a resumed run's config is saved once its checkpoint has been restored
        save_config(config, run_dir / "config.yaml")
    checkpointer = Checkpointer(run_dir / "checkpoints", keep=config.keep_checkpoints)
    key = jax.random.PRNGKey(config.seed)
    k = config.iterations_per_chunk
    steps_per_iteration = trainer.steps_per_chunk // k
    devices = jax.devices()
    progress.line(
        f"accelrl: {config.algorithm} on {config.env.name}, {config.env.num_envs} envs x "
        f"{steps_per_iteration // (config.env.num_envs * config.env.action_repeat)} "
        f"steps x {k} iterations per chunk on {len(devices)} {devices[0].platform} device(s)",
        force=True,
    )
    progress.line("compiling...", force=True)
    started = time.perf_counter()
    # The step compiles from shapes alone, in a second thread, while this one builds (or
    # restores) the state: on two or more cores the set-up hides behind the compile.
    with gc_paused(), ThreadPoolExecutor(max_workers=1) as pool:
        compiling = pool.submit(trainer.compile_chunk, jax.eval_shape(trainer.init, key))
        if resume and checkpointer.latest_step is not None:
            # the fresh state lends its shapes and is freed before the restored arrays come
            state = checkpointer.restore_latest(abstract(trainer.init(key)))
        else:
            if resume:  # killed before its first save
                progress.line(f"no checkpoint in {run_dir} yet: starting from step 0", force=True)
            state = trainer.init(key)
        run_chunk = compiling.result()
    if resume:
        save_config(config, run_dir / "config.yaml")
    compile_seconds = time.perf_counter() - started
    start_iteration = int(state.iteration)
    first_chunk, last_chunk = start_iteration // k, num_chunks(config)
    if max_chunks is not None:
        last_chunk = min(last_chunk, first_chunk + max_chunks)
    progress.line(f"compiled in {compile_seconds:.1f} s (set-up included)", force=True)
    if start_iteration:
        progress.line(f"resuming at env step {start_iteration * steps_per_iteration:,}", force=True)

    logger = RunLogger(
        run_dir, purge_step=start_iteration * steps_per_iteration if resume else None
    )
    train_started = last_save = time.perf_counter()
    recent_return, recent = None, RecentReturns(config.target_episodes)
    try:
        for chunk in range(first_chunk, last_chunk):
            chunk_started = time.perf_counter()
            state, metrics = run_chunk(state)
            metrics = jax.device_get(metrics)
            _stop_if_diverged(metrics, run_dir)
            env_steps = int(state.iteration) * steps_per_iteration
            values = _summaries(
                metrics, time.perf_counter() - chunk_started, trainer.steps_per_chunk
            )
            logger.scalars(env_steps, values)
            recent_return = values.get("charts/episodic_return", recent_return)
            recent.add(float(metrics.episode_return_sum), int(metrics.episodes))
            reached = recent.reached(config.target_return)
            out_of_time = max_seconds is not None and time.perf_counter() - called >= max_seconds
            is_last = chunk == last_chunk - 1 or out_of_time or reached
            if is_last or _checkpoint_due(config, chunk, time.perf_counter() - last_save):
                checkpointer.save(int(state.iteration), state)
                last_save = time.perf_counter()
            progress.line(_progress_text(env_steps, config, values, recent_return), force=is_last)
            if reached:
                progress.line(recent.describe(config.target_return), force=True)
            if out_of_time or reached:
                break
    finally:
        logger.close()
        checkpointer.close()
    train_seconds = time.perf_counter() - train_started
    env_steps = int(state.iteration) * steps_per_iteration
    sps = (env_steps - start_iteration * steps_per_iteration) / max(train_seconds, 1e-9)
    progress.line(f"done: {env_steps:,} env steps, {sps:,.0f} SPS after compile", force=True)
    return TrainResult(
        state,
        env_steps,
        compile_seconds,
        train_seconds,
        recent_return,
        recent.reached(config.target_return),
    )


def _checkpoint_due(config: TrainConfig, chunk: int, since_last_save: float) -> bool:
    """Time-based saves (at most one per `checkpoint_every_seconds`), plus every
    `checkpoint_every_chunks` chunks when that is set."""
    every = config.checkpoint_every_chunks
    by_count = every > 0 and (chunk + 1) % every == 0
    return by_count or since_last_save >= config.checkpoint_every_seconds


def _stop_if_diverged(metrics: ChunkMetrics, run_dir: Path) -> None:
    bad = int(metrics.first_nonfinite_iteration)
    if bad >= 0:
        raise TrainingDiverged(
            f"non-finite loss or gradients at iteration {bad}; training stopped. The last good "
            f"checkpoint in {run_dir / 'checkpoints'} is intact."
        )


def _progress_text(
    env_steps: int, config: TrainConfig, values: dict[str, float], recent: float | None
) -> str:
    total = config.total_env_steps
    ret = "   n/a" if recent is None else f"{recent:8.2f}"
    return (
        f"step {env_steps:>12,} / {total:,} ({100 * min(env_steps / total, 1):5.1f}%)"
        f" | SPS {values['charts/SPS']:>10,.0f} | return {ret}"
        f" | loss {values['losses/loss']:.3f}"
    )
