"""gymnasium's CartPole-v1 in actor processes, trained through the bridge with R2D2.

The fused `cartpole_r2d2` settings (small LSTM Q-network, sequences of 8 + 16 steps every 4,
cosine-decayed learning rate, replay ratio 4) and `cartpole_vtrace_bridge`'s bridge settings:
two local actors x 8 envs acting epsilon-greedily on the server (Ape-X epsilons over the 16
envs). The learner inserts 8 sequences at a time and then runs one update of 32 sequences.
"""

from dataclasses import replace

from accelrl.config import TrainConfig
from configs import cartpole_r2d2, cartpole_vtrace_bridge


def config() -> TrainConfig:
    fused = cartpole_r2d2.config()
    return replace(
        fused,
        env=replace(fused.env, num_envs=16),  # unused by the bridge but validated
        bridge=replace(
            cartpole_vtrace_bridge.config().bridge,
            batch_unrolls=8,  # sequences per replay insertion
            max_envs=64,
        ),
        eval_episodes=0,
    )
