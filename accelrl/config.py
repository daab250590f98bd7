"""Typed run configuration, with `key=value` command-line overrides.

The dataclasses are the schema: OmegaConf checks every override against them, so a mistyped
key or a value of the wrong type fails before anything runs, with the key named.
"""

from __future__ import annotations

import math
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

    torso: str = "mlp"
    """Observation torso: mlp, nature_cnn or impala_cnn (pixels; uint8 scaled inside), or
    `module:attribute` naming a flax.linen Module of your own (observations [B, ...] as the env
    gives them -> features [B, F]; a class is made with its defaults)."""
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
    ppo_clip: float = 0.0
    """> 0: PPO's clipped surrogate on the V-trace advantages (APPO), a trust region for
    several epochs per batch; 0: IMPALA's policy gradient."""


@dataclass(frozen=True)
class BridgeConfig:
    """The actor bridge (SEED path): CPU envs in actor processes, learning on the accelerator.

    Empty `env` means the fused path; a preset that sets it trains through the bridge.
    """

    env: str = ""
    """Actor env id, e.g. "gymnasium:CartPole-v1", "gymnasium:ALE/Pong-v5", "grf:<scenario>"."""
    num_actors: int = 2
    """Local actor processes `accelrl train` starts (remote actors may join as well)."""
    envs_per_actor: int = 8
    """Envs each local actor hosts (E)."""
    actor_groups: int = 1
    """Messages each local actor keeps in flight, each with the steps of E/actor_groups envs:
    2 steps one group's envs while the learner chooses the other's actions (double-buffered
    sampling, as in Sample Factory), for envs whose step costs about as much as inference."""
    max_envs_per_actor: int = 256
    """Largest E the server accepts in a handshake (sets the message size limit)."""
    max_envs: int = 1024
    """Env slots on the server (all actors together); a handshake beyond it is refused."""
    max_batch: int = 64
    """Inference batch (envs): a batch runs as soon as this many env steps wait..."""
    deadline_ms: float = 2.0
    """...or this long after its first request arrived, whichever comes first."""
    batch_unrolls: int = 16
    """Unrolls (of agent.unroll_length steps) per learner update (the B of [T, B])."""
    queue_size: int = 64
    """Bound of the queue of finished unrolls to the learner (in actor messages): when full,
    replies to actors wait (backpressure) instead of memory growing."""
    frame_stack: int = 1
    """Frames stacked on the server along the last axis (Atari/GRF: 4; actors send one)."""
    sticky_actions: float = 0.25
    """Atari repeat_action_probability for local actors (0.25: v5 default; 0: classic)."""
    observation_shape: tuple[int, ...] = ()
    """Expected observation of ONE env step, for actors of an env the server cannot build
    (docs/bridge-protocol.md); () derives the whole spec from `env` on the server."""
    observation_dtype: str = ""
    """Its dtype ("": float32); read only with observation_shape."""
    num_actions: int = 0
    """Discrete actions 0..n-1 (with observation_shape: this, action_nvec or action_low/high)."""
    action_nvec: tuple[int, ...] = ()
    """Choices of each component of an integer vector action (MultiDiscrete), with
    observation_shape."""
    action_low: tuple[float, ...] = ()
    """Lower bounds of a continuous (box) action, with observation_shape."""
    action_high: tuple[float, ...] = ()
    """Upper bounds of a continuous (box) action, with observation_shape."""
    token: str = ""
    """Shared secret actors must present (also read from ACCELRL_BRIDGE_TOKEN)."""
    tls_cert: str = ""
    """PEM certificate chain: serve with TLS (with tls_key)."""
    tls_key: str = ""
    """PEM private key for tls_cert."""
    handshake_timeout_s: float = 10.0
    """A stream that has not completed its handshake this long after opening is dropped."""
    checkpoint_every_updates: int = 200
    """Save the train state every this many learner updates (and at the end)."""


@dataclass(frozen=True)
class R2D2Config:
    """R2D2 (Kapturowski et al. 2019): recurrent Q-learning from prioritised sequence replay.

    Defaults are the paper's (Table 2, Atari) unless a field says otherwise; the CPU presets
    shrink network, sequences, replay and periods. Each env step of an iteration is acted on
    epsilon-greedily; every `period` steps each env adds one sequence of
    `burn_in + trace_length` steps to the replay (adjacent sequences overlap by
    `burn_in + trace_length - period` steps).
    """

    torso: str = "mlp"
    """Observation torso: mlp (vector observations), nature_cnn (the paper's, for pixels),
    impala_cnn, or `module:attribute` naming a flax.linen Module of your own (as agent.torso)."""
    torso_sizes: tuple[int, ...] = (512,)
    """MLP torso widths (torso=mlp only)."""
    lstm_size: int = 512
    """LSTM width (paper: 512)."""
    head_size: int = 512
    """Hidden width of each dueling head (paper: 512)."""
    recurrent: bool = True
    """False: the ablation without memory (dense core, no previous action/reward inputs)."""
    burn_in: int = 40
    """Burn-in steps run from the stored state without gradient (paper: 40)."""
    trace_length: int = 80
    """Trained steps per sequence after the burn-in (paper: 80)."""
    period: int = 40
    """Env steps per env per iteration = replay period: one new sequence per env (paper: 40)."""
    n_step: int = 5
    """n of the n-step targets (paper: 5)."""
    discount: float = 0.997
    """gamma (paper: 0.997). Termination stops bootstrapping; truncation does not."""
    value_rescaling_eps: float = 1e-3
    """eps of h(x) = sign(x)(sqrt(|x|+1)-1) + eps*x (paper: 1e-3)."""
    learning_rate: float = 1e-4
    """Adam step size (paper: 1e-4)."""
    lr_schedule: str = "constant"
    """constant (paper), linear or cosine decay to 0 over the run's learner updates."""
    adam_eps: float = 1e-3
    """Adam epsilon (paper: 1e-3)."""
    max_grad_norm: float = 40.0
    """Global-norm gradient clip (not in the paper; Ape-X's 40)."""
    batch_size: int = 64
    """Sequences per learner update (paper: 64); divides by the device count."""
    target_update_period: int = 2500
    """Learner updates between copies of the online network to the target (paper: 2500)."""
    replay_capacity: int = 100_000
    """Sequences held (paper: 4M observations = 1e5 sequences at period 40); stored steps are
    replay_capacity * (burn_in + trace_length). Divides by the device count (one shard each)."""
    min_replay_size: int = 5_000
    """Sequences stored before learning starts; updates are masked until then (not in the
    paper's table; a 5% fill by default)."""
    replay_ratio: float = 1.0
    """Sequences sampled by the learner per sequence inserted; learner updates per inserted
    sequence = replay_ratio / batch_size, and replay_ratio * num_envs / batch_size must be a
    whole number (the updates per iteration). Not a paper figure (its ratio followed from
    actor and learner speeds)."""
    priority_exponent: float = 0.9
    """alpha: sampling probability proportional to priority**alpha (paper: 0.9)."""
    importance_exponent: float = 0.6
    """beta of the importance weights (N * P(i))**-beta, normalised by their max (paper: 0.6)."""
    priority_eta: float = 0.9
    """Sequence priority eta * max|td| + (1 - eta) * mean|td| (paper: 0.9)."""
    epsilon_base: float = 0.4
    """Ape-X per-env epsilon: eps_i = epsilon_base**(1 + epsilon_alpha * i / (N - 1))."""
    epsilon_alpha: float = 7.0
    """See epsilon_base (Ape-X/R2D2: 0.4 and 7)."""


@dataclass(frozen=True)
class TrainConfig:
    """A whole training run."""

    env: EnvConfig = field(default_factory=EnvConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    r2d2: R2D2Config = field(default_factory=R2D2Config)
    """R2D2 settings (used when algorithm is r2d2)."""
    algorithm: str = "vtrace"
    """Learner of the fused step: vtrace or r2d2."""
    seed: int = 0
    """Seeds parameters, environments and acting."""
    total_env_steps: int = 500_000
    """Training budget in environment steps (counting action repeats)."""
    iterations_per_chunk: int = 8
    """Iterations (rollout + update) fused into one jitted call between host log points."""
    checkpoint_every_seconds: float = 60.0
    """Save the full train state once this many seconds have passed since the last save (as
    SEED RL does), and always at the end."""
    checkpoint_every_chunks: int = 0
    """Also save every this many chunks (0: by time only)."""
    keep_checkpoints: int = 3
    """Newest checkpoints kept on disk."""
    target_return: float | None = None
    """Stop early once the mean return of the latest `target_episodes` training episodes
    reaches this (gymnasium's reward_threshold, e.g. 475 for CartPole-v1; SB3's
    StopTrainingOnRewardThreshold), saving a checkpoint as at the end. None: the whole budget.
    Checked at log points (fused: each chunk; bridge: each second)."""
    target_episodes: int = 100
    """Finished training episodes the target_return mean is over."""
    eval_episodes: int = 16
    """Deterministic-policy episodes evaluated at the end of training (0: none)."""
    distributed: bool = False
    """Call jax.distributed.initialize() first (multi-host; see README)."""
    bridge: BridgeConfig = field(default_factory=BridgeConfig)
    """Actor bridge settings (used when bridge.env is set)."""


ALGORITHMS = ("vtrace", "r2d2")


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
        (config.target_episodes >= 1, "target_episodes must be at least 1"),
        (
            config.target_return is None or math.isfinite(config.target_return),
            f"target_return must be a finite number (or null), got {config.target_return}",
        ),
        (config.env.action_repeat >= 1, "env.action_repeat must be at least 1"),
        (
            config.env.max_steps is None or config.env.max_steps >= 1,
            "env.max_steps must be at least 1 (or null: the env's own limit)",
        ),
        (config.agent.unroll_length > 0, "agent.unroll_length must be positive"),
        (config.agent.num_epochs > 0, "agent.num_epochs must be positive"),
        (config.agent.num_minibatches > 0, "agent.num_minibatches must be positive"),
        (
            config.algorithm == "r2d2" or config.env.num_envs % config.agent.num_minibatches == 0,
            f"env.num_envs={config.env.num_envs} must divide by "
            f"agent.num_minibatches={config.agent.num_minibatches}",
        ),
        (config.total_env_steps > 0, "total_env_steps must be positive"),
        (config.iterations_per_chunk > 0, "iterations_per_chunk must be positive"),
        (config.checkpoint_every_seconds > 0, "checkpoint_every_seconds must be positive"),
        (config.checkpoint_every_chunks >= 0, "checkpoint_every_chunks must be 0 (off) or more"),
        (config.agent.learning_rate > 0, "agent.learning_rate must be positive"),
        (0.0 <= config.agent.discount <= 1.0, "agent.discount must lie in [0, 1]"),
        (0.0 <= config.agent.ppo_clip < 1.0, "agent.ppo_clip must lie in [0, 1)"),
        (
            all(n > 0 for n in config.agent.hidden_sizes)
            and (config.agent.lstm_size is None or config.agent.lstm_size > 0),
            "agent.hidden_sizes and agent.lstm_size must be positive (lstm_size null: no LSTM)",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    if config.algorithm == "r2d2":
        _validate_r2d2(config)


def _validate_r2d2(config: TrainConfig) -> None:
    r = config.r2d2
    sequence = r.burn_in + r.trace_length
    updates = r.replay_ratio * config.env.num_envs / max(r.batch_size, 1)
    checks = [
        (r.burn_in >= 0 and r.trace_length > 0, "r2d2.burn_in >= 0 and r2d2.trace_length > 0"),
        (
            0 < r.period <= sequence,
            f"r2d2.period must lie in [1, burn_in + trace_length = {sequence}]",
        ),
        (r.n_step >= 1, "r2d2.n_step must be at least 1"),
        (r.batch_size > 0, "r2d2.batch_size must be positive"),
        (r.target_update_period > 0, "r2d2.target_update_period must be positive"),
        (
            r.replay_capacity >= config.env.num_envs,
            f"r2d2.replay_capacity={r.replay_capacity} must hold one iteration's "
            f"{config.env.num_envs} sequences",
        ),
        (
            0 < r.min_replay_size <= r.replay_capacity,
            "r2d2.min_replay_size must lie in [1, replay_capacity]",
        ),
        (
            r.replay_ratio > 0 and updates >= 1 and abs(updates - round(updates)) < 1e-6,
            f"r2d2.replay_ratio * env.num_envs / r2d2.batch_size = {updates:g} must be a whole "
            "number >= 1 (learner updates per iteration)",
        ),
        (0.0 <= r.discount <= 1.0, "r2d2.discount must lie in [0, 1]"),
        (r.learning_rate > 0, "r2d2.learning_rate must be positive"),
        (
            r.lr_schedule in ("constant", "linear", "cosine"),
            f"r2d2.lr_schedule {r.lr_schedule!r} is not one of constant, linear, cosine",
        ),
        (0.0 <= r.priority_eta <= 1.0, "r2d2.priority_eta must lie in [0, 1]"),
        (r.priority_exponent >= 0, "r2d2.priority_exponent must be at least 0 (0: uniform)"),
        (0.0 <= r.importance_exponent <= 1.0, "r2d2.importance_exponent must lie in [0, 1]"),
        (
            all(n > 0 for n in (*r.torso_sizes, r.lstm_size, r.head_size)),
            "r2d2.torso_sizes, r2d2.lstm_size and r2d2.head_size must be positive",
        ),
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
