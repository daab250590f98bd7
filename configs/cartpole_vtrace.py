"""CartPole-v1 with V-trace: PureJaxRL's PPO budget and batch shape (4 envs x 128 steps)."""

from accelrl.config import AgentConfig, EnvConfig, TrainConfig


def config() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="cartpole", num_envs=4),
        agent=AgentConfig(
            hidden_sizes=(64, 64),
            activation="tanh",
            unroll_length=128,
            num_epochs=4,
            num_minibatches=4,
            learning_rate=2.5e-4,
            lr_schedule="linear",
            entropy_cost=0.01,
        ),
        total_env_steps=500_000,
        iterations_per_chunk=8,
    )
