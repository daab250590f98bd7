"""HumanoidStandup with V-trace (continuous actions, tanh-Gaussian policy, normalised observations).

Brax PPO: 100M steps, reward scaling 0.1, unroll 15, 32 minibatches of 1024, 8 epochs,
discount 0.97, lr 6e-4, entropy 1e-2, 2048 envs.
Mapped onto V-trace by `configs._locomotion` (same samples per minibatch and epochs, reward
scale by its rule); batch sizes follow the device (`pick`). Not tuned further.
"""

from accelrl.config import TrainConfig
from configs._locomotion import locomotion_config, pick


def config() -> TrainConfig:
    return locomotion_config(
        "humanoidstandup",
        num_envs=pick(cpu=64, accelerator=2048),
        num_minibatches=pick(cpu=4, accelerator=8),
        unroll_length=60,
        total_env_steps=pick(cpu=3_000_000, accelerator=100_000_000),
        reward_scale=0.1,
        learning_rate=6e-4,
        num_epochs=8,
    )
