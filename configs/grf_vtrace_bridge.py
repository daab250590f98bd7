"""Google Research Football (academy_empty_goal_close) through the bridge; needs `make grf`.

Actors send one SMM frame (72x96x4 uint8) per step; the server stacks 4 into 72x96x16. 19
actions; rewards `scoring,checkpoints`. The actor-critic has the Nature-DQN convolutional torso
(on 72x96x16: 5x8x64 before its dense layer).
"""

from accelrl.config import AgentConfig, BridgeConfig, EnvConfig, TrainConfig


def config() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="cartpole", num_envs=16),
        agent=AgentConfig(
            torso="nature_cnn",
            hidden_sizes=(256, 256),
            activation="relu",
            unroll_length=32,
            num_epochs=1,
            num_minibatches=1,
            learning_rate=3e-4,
            entropy_cost=0.01,
            max_grad_norm=40.0,
        ),
        bridge=BridgeConfig(
            env="grf:academy_empty_goal_close",
            num_actors=2,
            envs_per_actor=4,
            actor_groups=2,  # step one half of the envs while the other's actions are chosen
            max_batch=16,
            deadline_ms=5.0,
            batch_unrolls=8,
            queue_size=16,  # two updates: on a CPU the learner is the bottleneck; keeps lag low
            frame_stack=4,
            observation_shape=(72, 96, 4),
            observation_dtype="uint8",
            num_actions=19,
            max_envs_per_actor=64,
        ),
        total_env_steps=2_000_000,
        eval_episodes=0,
    )
