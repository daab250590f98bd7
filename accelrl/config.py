"""Typed run configuration, with `key=value` command-line overrides.

The dataclasses are the schema: OmegaConf checks every override against them, so a mistyped
key or a value of the wrong type fails before anything runs, with the key named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException


@dataclass(frozen=True)
class EnvConfig:
    """Which environment, and how many copies step in lockstep."""

    name: str = "cartpole"
    """Registered environment name (see `accelrl.envs.registered_names()`)."""
    num_envs: int = 4
    """Total environments across all devices (must divide by the device count)."""
    max_steps: int | None = None
    """Episode limit (truncation); None keeps the environment's own default."""
    action_repeat: int = 1
    """Repeat each action this many env steps (rewards summed)."""
    normalize_observation: bool = False
    """Normalise observations with running statistics shared by all envs."""


@dataclass(frozen=True)
class AgentConfig:
    """V-trace actor-critic: network, loss and optimiser."""

    hidden_sizes: tuple[int, ...] = (64, 64)
    """Widths of the MLP torso."""
    activation: str = "tanh"
    """Torso activation: tanh, relu, elu or silu."""
    lstm_size: int | None = None
    """Add an LSTM core of this size (None: feed-forward)."""
    unroll_length: int = 128
    """Env steps per env per iteration (the trajectory length T)."""
    num_epochs: int = 4
    """Passes over each batch of trajectories; V-trace corrects the policy lag of later passes."""
    num_minibatches: int = 4
    """Minibatches per epoch, split along envs (num_envs per device must divide by it)."""
    learning_rate: float = 2.5e-4
    """Adam step size (peak value of the schedule)."""
    lr_schedule: str = "linear"
    """constant, linear (decay to 0 over the run) or cosine."""
    max_grad_norm: float = 0.5
    """Global-norm gradient clipping."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this for learning (logged returns stay unscaled)."""
    discount: float = 0.99
    """Discount gamma. Termination stops bootstrapping; truncation does not."""
    trace_lambda: float = 1.0
    """V-trace lambda (1.0 in IMPALA)."""
    clip_rho: float = 1.0
    """Importance-weight clip for the value targets (rho-bar)."""
    clip_pg_rho: float = 1.0
    """Importance-weight clip for the policy-gradient advantage."""
    baseline_cost: float = 0.5
    """Weight of the value loss."""
    entropy_cost: float = 0.01
    """Weight of the entropy bonus."""
    normalize_advantages: bool = False
    """Standardise policy-gradient advantages per minibatch (PPO practice)."""


@dataclass(frozen=True)
class TrainConfig:
    """A whole training run."""

    env: EnvConfig = field(default_factory=EnvConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    algorithm: str = "vtrace"
    """Learner of the fused step: vtrace."""
    seed: int = 0
    """Seeds parameters, environments and acting."""
    total_env_steps: int = 500_000
    """Training budget in environment steps (counting action repeats)."""
    iterations_per_chunk: int = 8
    """Iterations (rollout + update) fused into one jitted call between host log points."""
    checkpoint_every_chunks: int = 10
    """Save the full train state every this many chunks (and at the end)."""
    keep_checkpoints: int = 3
    """Newest checkpoints kept on disk."""
    eval_episodes: int = 16
    """Deterministic-policy episodes evaluated at the end of training (0: none)."""
    distributed: bool = False
    """Call jax.distributed.initialize() first (multi-host; see README)."""


ALGORITHMS = ("vtrace",)


class ConfigError(ValueError):
    """A configuration the user gave is not valid; the message says which key and why."""


def apply_overrides(config: TrainConfig, overrides: list[str]) -> TrainConfig:
    """Return `config` with `key=value` overrides (dotted keys) applied and type-checked."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(config), OmegaConf.from_dotlist(overrides))
        result = OmegaConf.to_object(merged)
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None)
        first_line = str(error).splitlines()[0]
        raise ConfigError(f"config key {key!r}: {first_line}" if key else first_line) from None
    validate(result)
    return result


def validate(config: TrainConfig) -> None:
    """Check the relations between fields that types alone do not capture."""
    checks = [
        (
            config.algorithm in ALGORITHMS,
            f"algorithm {config.algorithm!r} is not one of {ALGORITHMS}",
        ),
        (config.env.num_envs > 0, "env.num_envs must be positive"),
        (config.env.action_repeat >= 1, "env.action_repeat must be at least 1"),
        (config.agent.unroll_length > 0, "agent.unroll_length must be positive"),
        (config.agent.num_epochs > 0, "agent.num_epochs must be positive"),
        (config.agent.num_minibatches > 0, "agent.num_minibatches must be positive"),
        (
            config.env.num_envs % config.agent.num_minibatches == 0,
            f"env.num_envs={config.env.num_envs} must divide by "
            f"agent.num_minibatches={config.agent.num_minibatches}",
        ),
        (config.total_env_steps > 0, "total_env_steps must be positive"),
        (config.iterations_per_chunk > 0, "iterations_per_chunk must be positive"),
        (config.agent.learning_rate > 0, "agent.learning_rate must be positive"),
        (0.0 <= config.agent.discount <= 1.0, "agent.discount must lie in [0, 1]"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


def save_config(config: TrainConfig, path: Path) -> None:
    """Write the resolved config as YAML."""
    path.write_text(OmegaConf.to_yaml(OmegaConf.structured(config)))


def load_config(path: Path) -> TrainConfig:
    """Read a YAML config written by `save_config`, checked against the schema."""
    if not path.exists():
        raise ConfigError(f"no config at {path}: is this an accelrl run directory?")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(TrainConfig), OmegaConf.load(path))
        return OmegaConf.to_object(merged)
    except OmegaConfBaseException as error:
        raise ConfigError(f"{path}: {str(error).splitlines()[0]}") from None
