"""Pusher with V-trace (continuous actions, tanh-Gaussian policy, normalised observations).

Not tuned yet: the settings of `reacher_vtrace` (the other arm task here, also scored by
distances and a control cost), with Gymnasium's 100-step episodes and a reward scale that
puts a step's scaled reward near 1 (Pusher's per-step reward is about -0.3 to -1.5 at the
start, Reacher's about -0.2). Measured on the 2-core CPU (benchmarks/results/
train_curves_pusher.md, seed 0): 1.66M env steps in a 12-minute budget (2.4k env steps/s,
24 s compile) raise the mean training return of 100-step episodes from -167 to -31; the final
policy scores -32.4 +- 5.0 deterministically. Not tuned further.
"""

from accelrl.config import TrainConfig
from configs._locomotion import locomotion_config, pick


def config() -> TrainConfig:
    return locomotion_config(
        "pusher",
        num_envs=pick(cpu=32, accelerator=2048),
        num_minibatches=pick(cpu=4, accelerator=8),
        unroll_length=50,
        total_env_steps=pick(cpu=2_000_000, accelerator=50_000_000),
        reward_scale=1.0,
        discount=0.95,
        entropy_cost=1e-3,
        num_epochs=8,
        max_steps=100,
    )
