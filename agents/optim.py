"""Optimizer: global-norm gradient clipping followed by Adam with a learning-rate schedule."""

from __future__ import annotations

import optax

SCHEDULES = ("constant", "linear", "cosine")


def make_optimizer(
    learning_rate: float,
    max_grad_norm: float,
    *,
    schedule: str = "constant",
    total_updates: int,
    warmup_updates: int = 0,
    adam_eps: float = 1e-5,
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Returns `(optimizer, schedule)`; the schedule maps update count to learning rate.

    A linear warmup from 0 over `warmup_updates` precedes the main schedule, which is constant
    or decays ("linear", "cosine") to 0 over the remaining `total_updates - warmup_updates`.
    The schedule is returned so that the learning rate can be logged.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown learning-rate schedule {schedule!r}; one of {SCHEDULES}")
    if not 0 <= warmup_updates < total_updates:
        raise ValueError(
            f"need 0 <= warmup_updates < total_updates, got {warmup_updates}, {total_updates}"
        )
    decay_steps = total_updates - warmup_updates
    if schedule == "constant":
        main = optax.constant_schedule(learning_rate)
    elif schedule == "linear":
        main = optax.linear_schedule(learning_rate, 0.0, decay_steps)
    else:
        main = optax.cosine_decay_schedule(learning_rate, decay_steps)
    if warmup_updates > 0:
        warmup = optax.linear_schedule(0.0, learning_rate, warmup_updates)
        lr = optax.join_schedules([warmup, main], [warmup_updates])
    else:
        lr = main
    optimizer = optax.chain(
        optax.clip_by_global_norm(max_grad_norm),
        optax.adam(lr, eps=adam_eps),
    )
    return optimizer, lr
