"""InvertedPendulum with V-trace (continuous actions, tanh-Gaussian, normalised observations).

Brax PPO: 2M steps, reward scaling 10, unroll 5, 32 minibatches of 1024, 4 epochs,
discount 0.97, lr 3e-4, entropy 1e-2, 2048 envs.
Mapped onto V-trace by `configs._locomotion` (same samples per minibatch and epochs, reward
scale by its rule); batch sizes follow the device (`pick`). Not tuned further.
"""

from accelrl.config import TrainConfig
from configs._locomotion import locomotion_config, pick


def config() -> TrainConfig:
    return locomotion_config(
        "inverted_pendulum",
        num_envs=pick(cpu=32, accelerator=2048),
        num_minibatches=pick(cpu=4, accelerator=8),
        unroll_length=20,
        total_env_steps=pick(cpu=300_000, accelerator=2_000_000),
        reward_scale=1.0,
    )
