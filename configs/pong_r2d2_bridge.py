"""Atari Pong through the bridge with R2D2: ale-py in actor processes, replay on the accelerator.

Actors and bridge settings are `pong_vtrace_bridge`'s (frame skip 4, grayscale 84x84, sticky
actions 0.25, one uint8 frame per step; the server stacks 4). Rewards are not clipped: R2D2's
value rescaling h(x) handles their scale.

R2D2-paper (Kapturowski et al. 2019, Table 2) values kept: the Nature-DQN conv torso, LSTM 512,
dueling heads 512, burn-in 40, trace length 80, replay period 40 (sequences overlap by 80 steps),
n-step 5, discount 0.997, Adam lr 1e-4 with eps 1e-3, batch 64 sequences, target update every
2500 updates, priority exponent 0.9, importance exponent 0.6, eta 0.9, Ape-X epsilons (0.4, 7)
over all envs of all actors, value-rescaling eps 1e-3.

Deviations, and why:
- replay_capacity 4,000 sequences, not the paper's 100,000: the replay stores stacked 84x84x4
  frames for observation and next_observation (56 KB per step, 6.8 MB per 120-step sequence),
  so 4,000 sequences take about 27 GB of device memory (100,000 would take 677 GB). Raise it
  on devices with more memory; a replay that does not fit is refused at start.
- min_replay_size 1,000 sequences (25%) before learning (the paper does not give one).
- replay_ratio 1 (each sequence sampled once on average): the paper's ratio followed from
  its 256 actors' and one learner's speeds rather than being set.
- 2 local actors x 16 envs, each in 2 groups of 8 (the paper used 256 actors): add remote
  actors with `accelrl actor`, and raise bridge.num_actors * bridge.envs_per_actor so the
  epsilon schedule spans them.
"""

from dataclasses import replace

from accelrl.config import EnvConfig, R2D2Config, TrainConfig
from configs import pong_vtrace_bridge


def config() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="cartpole", num_envs=64),  # unused by the bridge but validated
        algorithm="r2d2",
        r2d2=R2D2Config(
            torso="nature_cnn",
            lstm_size=512,
            head_size=512,
            burn_in=40,
            trace_length=80,
            period=40,
            n_step=5,
            discount=0.997,
            learning_rate=1e-4,
            lr_schedule="constant",
            adam_eps=1e-3,
            batch_size=64,
            target_update_period=2500,
            replay_capacity=4_000,
            min_replay_size=1_000,
            replay_ratio=1.0,
        ),
        bridge=replace(
            pong_vtrace_bridge.config().bridge,
            batch_unrolls=16,  # sequences per replay insertion
            max_envs=128,
        ),
        total_env_steps=50_000_000,
        eval_episodes=0,
    )
