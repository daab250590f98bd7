"""The bridge's learner thread: sequences from the queue -> learner steps -> logs, checkpoints.

Algorithm-independent: the learner (`VTraceBridgeLearner` or `R2D2BridgeLearner`) consumes
`rows_per_step` sequences per `step` and returns its new state, whose params are published to
inference after each step. The policy lag of a batch is the learner's update count minus the
version that acted each step. Logs once a second (TensorBoard + one progress line); checkpoints
every `bridge.checkpoint_every_updates` updates and at the end, which comes early at a log point
where the latest `target_episodes` episodes reach `target_return` (accelrl/early_stop.py).
"""

from __future__ import annotations

import queue
import time
from typing import Any

import jax
import numpy as np

from accelrl.early_stop import RecentReturns
from accelrl.train import TrainingDiverged


def take_rows(held: list[dict[str, Any]], rows: int) -> tuple[dict[str, Any], list, int]:
    """`rows` sequences from the held items (splitting one if needed) and what remains."""
    merged = jax.tree.map(lambda *xs: np.concatenate(xs), *held)
    batch = jax.tree.map(lambda x: x[:rows], merged)
    remaining = len(merged["reward"]) - rows
    rest = [jax.tree.map(lambda x: x[rows:], merged)] if remaining else []
    return batch, rest, remaining


def run_learner(server: Any) -> None:
    """Train until the learner is finished or the server stops; runs on its own thread.

    `server` is the BridgeServer: its queue (`sequences`), state, publishing, statistics and
    logging/checkpoint objects."""
    learner, config = server.learner, server.config
    rows_needed = learner.rows_per_step
    held: list[dict[str, Any]] = []
    held_rows = 0
    state = server.state
    last_log = time.perf_counter()
    steps_at_log = server.builder.transitions
    every = config.bridge.checkpoint_every_updates
    saved_iteration = int(state.iteration)
    started = time.perf_counter()
    recent_return, recent, reached = None, RecentReturns(config.target_episodes), False
    while not learner.finished(state):
        while held_rows < rows_needed:
            try:
                item = server.sequences.get(timeout=0.1)
            except queue.Empty:
                if server.stopping:
                    return
                continue
            held.append(item)
            held_rows += len(item["reward"])
        batch, held, held_rows = take_rows(held, rows_needed)
        version = batch.pop("version")
        lag = int(state.iteration) - version
        try:
            state, losses = learner.step(state, batch)
        except TrainingDiverged as error:
            raise TrainingDiverged(
                f"{error}; training stopped. The last good checkpoint in "
                f"{server.run_dir / 'checkpoints'} is intact."
            ) from None
        iteration, env_steps = int(state.iteration), int(state.env_steps)
        server.state = state
        server.publish(state.params, iteration)
        now = time.perf_counter()
        last = learner.finished(state)
        if now - last_log >= 1.0 or last:
            episodes, server.builder.episodes = server.builder.episodes, []
            for episode_return, _ in episodes:
                recent.add(episode_return, 1)
            reached = recent.reached(config.target_return)
            last = last or reached
            received = server.builder.transitions
            values = {
                "charts/SPS": (received - steps_at_log) / (now - last_log),
                "charts/learning_rate": learner.learning_rate(state),
                **losses,
                "bridge/policy_lag_mean": float(lag.mean()),
                "bridge/policy_lag_max": float(lag.max()),
                "bridge/actors": float(server.actors),
                "bridge/queue_size": float(server.sequences.qsize()),
                "bridge/refused_streams": float(server.refused),
                **server.batcher.take_stats(),
            }
            if episodes:
                values["charts/episodic_return"] = float(np.mean([r for r, _ in episodes]))
                values["charts/episodic_length"] = float(np.mean([n for _, n in episodes]))
                recent_return = values["charts/episodic_return"]
            server.last_values = values
            server.logger.scalars(env_steps, values)
            last_log, steps_at_log = now, received
            ret = "   n/a" if recent_return is None else f"{recent_return:8.2f}"
            server.progress.line(
                f"update {iteration:>6} / {learner.total_updates} | step {env_steps:>10,} | "
                f"SPS {values['charts/SPS']:>8,.0f} | return {ret} | actors {server.actors} "
                f"| lag {values['bridge/policy_lag_mean']:.1f} "
                f"| batch {values['bridge/inference_batch_mean']:.1f} "
                f"| wait {values['bridge/batch_fill_wait_ms_max']:.1f} ms",
                force=last,
            )
            if reached:
                server.progress.line(recent.describe(config.target_return), force=True)
        due = last or iteration // every > saved_iteration // every
        if due and iteration != saved_iteration:
            server.checkpointer.save(iteration, state)
            saved_iteration = iteration
        if reached:
            break
    server.train_seconds = time.perf_counter() - started
