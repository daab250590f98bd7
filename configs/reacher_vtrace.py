"""Reacher with V-trace (continuous actions, tanh-Gaussian policy, normalised observations).

Brax PPO: 50M steps, reward scaling 5, unroll 50, 32 minibatches of 256, 8 epochs,
discount 0.95, lr 3e-4, entropy 1e-3, 2048 envs.
Mapped onto V-trace by `configs._locomotion` (same samples per minibatch and epochs, reward
scale as Brax's); batch sizes follow the device (`pick`). Learning rate 1e-3 instead of 3e-4:
at 120k CPU steps it takes the return from -46 to -23 (3e-4 with scale 1: to -41).
"""

from accelrl.config import TrainConfig
from configs._locomotion import locomotion_config, pick


def config() -> TrainConfig:
    return locomotion_config(
        "reacher",
        num_envs=pick(cpu=32, accelerator=2048),
        num_minibatches=pick(cpu=4, accelerator=8),
        unroll_length=50,
        total_env_steps=pick(cpu=2_000_000, accelerator=50_000_000),
        reward_scale=5.0,
        learning_rate=1e-3,
        discount=0.95,
        entropy_cost=1e-3,
        num_epochs=8,
    )
