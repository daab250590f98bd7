"""What a bridge run is built from: config checks, the env spec actors must match, the learner."""

from __future__ import annotations

import math
from pathlib import Path

from accelrl.bridge.codec import ALLOWED_DTYPES, EnvSpec
from accelrl.bridge.r2d2_learner import R2D2BridgeLearner
from accelrl.bridge.vtrace_learner import VTraceBridgeLearner
from accelrl.config import ConfigError, TrainConfig


def server_spec(config: TrainConfig) -> EnvSpec:
    """The env spec actors must declare: from the config, or from a local copy of the env."""
    b = config.bridge
    if b.observation_shape:
        return declared_spec(config)
    if b.observation_dtype or b.num_actions or b.action_nvec or b.action_low or b.action_high:
        raise ConfigError(
            "bridge.observation_dtype, num_actions, action_nvec and action_low/high are read "
            "only with bridge.observation_shape (a spec declared for an env the server cannot "
            "build)"
        )
    from accelrl.bridge.envs import UnsupportedEnv, env_spec, make_env

    try:
        env = make_env(b.env, b.sticky_actions)
    except UnsupportedEnv as error:
        raise ConfigError(f"bridge.env: {error}") from None
    try:
        return env_spec(env)
    finally:
        env.close()


def declared_spec(config: TrainConfig) -> EnvSpec:
    """The spec `bridge.observation_shape` and its companions declare, checked."""
    b = config.bridge
    shape, dtype = tuple(b.observation_shape), b.observation_dtype or "float32"
    low, high = tuple(float(x) for x in b.action_low), tuple(float(x) for x in b.action_high)
    if not all(d > 0 for d in shape):
        raise ConfigError(f"bridge.observation_shape {list(shape)} needs positive sizes")
    if dtype not in ALLOWED_DTYPES:
        raise ConfigError(
            f"bridge.observation_dtype {dtype!r} is not one of {', '.join(ALLOWED_DTYPES)}"
        )
    nvec = tuple(int(n) for n in b.action_nvec)
    if (b.num_actions > 0) + bool(nvec) + bool(low or high) != 1 or b.num_actions < 0:
        raise ConfigError(
            "with bridge.observation_shape, declare the actions: one of bridge.num_actions > 0 "
            "(discrete), bridge.action_nvec (multi-discrete), or bridge.action_low and "
            "action_high (a box), not two of them"
        )
    if nvec and min(nvec) < 1:
        raise ConfigError(f"bridge.action_nvec {list(nvec)} needs every entry >= 1")
    if low or high:
        bounded = len(low) == len(high) and all(
            math.isfinite(lo) and math.isfinite(hi) and lo < hi
            for lo, hi in zip(low, high, strict=False)
        )
        if not bounded:
            raise ConfigError(
                f"bridge.action_low {list(low)} and action_high {list(high)} must have equal "
                "lengths and finite bounds with low < high"
            )
    return EnvSpec(shape, dtype, b.num_actions, low, high, nvec)


def check_config(config: TrainConfig) -> None:
    b, a = config.bridge, config.agent
    vtrace = config.algorithm == "vtrace"
    checks = [
        (bool(b.env), "bridge.env must name the actors' env (e.g. gymnasium:CartPole-v1)"),
        (b.max_batch > 0 and b.deadline_ms > 0, "bridge.max_batch and deadline_ms must be > 0"),
        (
            not vtrace or b.batch_unrolls % a.num_minibatches == 0,
            f"bridge.batch_unrolls={b.batch_unrolls} must divide by "
            f"agent.num_minibatches={a.num_minibatches}",
        ),
        (b.queue_size > 0 and b.max_envs > 0, "bridge.queue_size and max_envs must be > 0"),
        (1 <= b.envs_per_actor <= b.max_envs_per_actor, "bridge.envs_per_actor out of range"),
        (
            1 <= b.actor_groups <= b.envs_per_actor,
            f"bridge.actor_groups={b.actor_groups} must be in 1..envs_per_actor "
            f"({b.envs_per_actor})",
        ),
        (b.frame_stack >= 1, "bridge.frame_stack must be >= 1"),
        (b.handshake_timeout_s > 0, "bridge.handshake_timeout_s must be > 0"),
        (
            bool(b.tls_cert) == bool(b.tls_key),
            "bridge.tls_cert and bridge.tls_key go together (certificate chain and its key)",
        ),
        *(
            (not path or Path(path).is_file(), f"bridge.{name}: no file {path!r}")
            for name, path in (("tls_cert", b.tls_cert), ("tls_key", b.tls_key))
        ),
        (
            vtrace or b.batch_unrolls <= config.r2d2.replay_capacity,
            "bridge.batch_unrolls (sequences per replay insertion) must not exceed "
            "r2d2.replay_capacity",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


def make_learner(config: TrainConfig, spec: EnvSpec) -> VTraceBridgeLearner | R2D2BridgeLearner:
    """The bridge learner for `config.algorithm`."""
    if config.algorithm == "r2d2":
        return R2D2BridgeLearner(config, spec)
    return VTraceBridgeLearner(config, spec)
