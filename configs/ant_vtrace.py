"""Ant with V-trace (continuous actions, tanh-Gaussian policy, normalised observations).

Brax PPO: 50M steps, reward scaling 10, unroll 5, 32 minibatches of 2048, 4 epochs,
discount 0.97, lr 3e-4, entropy 1e-2, 4096 envs.
Mapped onto V-trace by `configs._locomotion` (same samples per minibatch and epochs, reward
scale by its rule); batch sizes follow the device (`pick`). Not tuned further.
On the 2-core CPU (seed 0) the schedule is 5.5M steps, what fits in about 17 of the 20 minutes
the target allows: a chunk's training return first passed 1000 at 348 s, the final chunk gave
1093, and the final policy's deterministic evaluation 1052 +- 787 over 16 episodes
(benchmarks/results/train_curves_ant_cpu.md, 2026-12-07). The earlier 3M-step schedule, sized
when the step ran at 2.7k env steps/s, now ends in 10 minutes at 5.2k: its best chunk was 1041
and its evaluation 927 +- 564 that day (on 2026-11-29: 1337 and 1650 +- 1170 in 18.8 min).
On one H200 (4096 envs, 658k env steps/s, compile 16 s): Brax's 50M steps took 99 s and reached
1,328; a 200M-step schedule cut at 5 minutes reached 5,101 at its best chunk
(benchmarks/results/train_curves_gpu.md). So the accelerator schedule is 180M steps, about
what fits in 5 minutes there, with the learning rate decayed by the end.
"""

from accelrl.config import TrainConfig
from configs._locomotion import locomotion_config, pick


def config() -> TrainConfig:
    return locomotion_config(
        "ant",
        num_envs=pick(cpu=64, accelerator=4096),
        num_minibatches=pick(cpu=4, accelerator=8),
        unroll_length=20,
        total_env_steps=pick(cpu=5_500_000, accelerator=180_000_000),
        reward_scale=1.0,
    )
