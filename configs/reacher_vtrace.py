"""Reacher with V-trace (continuous actions, tanh-Gaussian policy, normalised observations).

Brax PPO: 50M steps, reward scaling 5, unroll 50, 32 minibatches of 256, 8 epochs,
discount 0.95, lr 3e-4, entropy 1e-3, 2048 envs.
Mapped onto V-trace by `configs._locomotion` (same samples per minibatch and epochs, reward
scale and learning rate as Brax's); batch sizes follow the device (`pick`). Episodes of 50
steps, Gymnasium's Reacher limit (its published returns use it), not Brax's 1000.
Learning rate 1e-3 learned faster at first but diverged: the policy's mean ran off to saturated
actions after ~60k steps (return -19 -> -108, the control cost of +-1 actions), with 1000-step
episodes as with 50. With 3e-4 a 300k-step CPU run improved steadily to a training return of
-17 and a deterministic eval of -6.4; over this preset's 2M-step schedule it reached -6 at
~400k steps and then collapsed the same way at ~470k: multi-epoch V-trace had no trust region.
With PPO's clipped surrogate (`agent.ppo_clip=0.2`, now the locomotion default) the same run
kept improving (-4.4 at 690k steps).
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
        discount=0.95,
        entropy_cost=1e-3,
        num_epochs=8,
        max_steps=50,
    )
