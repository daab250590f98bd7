"""Atari Pong through the bridge: ale-py in actor processes, V-trace on the accelerator.

Actors run ALE with frame skip 4, grayscale 84x84 and sticky actions 0.25 (gymnasium's
AtariPreprocessing, see accelrl/bridge/envs.py) and send one uint8 frame per step; the server
stacks 4 frames. The actor-critic has the Nature-DQN convolutional torso (uint8 frames scaled
inside the network) with shared policy and value heads; the other settings (unroll 20, Adam)
are not tuned for Pong. Each actor keeps its 16 envs in two groups of 8 with one message each
in flight (bridge.actor_groups), so it steps one group while the server runs the policy for the
other: with one actor on the 2-core CPU, 1.5x the steps/s of a single group of 8.
"""

from accelrl.config import AgentConfig, BridgeConfig, EnvConfig, TrainConfig


def config() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="cartpole", num_envs=32),
        agent=AgentConfig(
            torso="nature_cnn",
            hidden_sizes=(256, 256),
            activation="relu",
            unroll_length=20,
            num_epochs=1,
            num_minibatches=1,
            learning_rate=6e-4,
            lr_schedule="linear",
            reward_scale=1.0,
            entropy_cost=0.01,
            max_grad_norm=40.0,
        ),
        bridge=BridgeConfig(
            env="gymnasium:ALE/Pong-v5",
            num_actors=2,
            envs_per_actor=16,
            actor_groups=2,  # step one half of the envs while the other's actions are chosen
            max_batch=32,
            deadline_ms=5.0,
            batch_unrolls=32,
            queue_size=16,
            frame_stack=4,
            sticky_actions=0.25,
            max_envs=256,
            max_envs_per_actor=64,
        ),
        total_env_steps=10_000_000,
        eval_episodes=0,
    )
