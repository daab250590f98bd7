"""Pendulum-v1 (continuous, tanh-squashed Gaussian) with V-trace."""

from accelrl.config import AgentConfig, EnvConfig, TrainConfig


def config() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="pendulum", num_envs=16, normalize_observation=False),
        agent=AgentConfig(
            hidden_sizes=(64, 64),
            activation="tanh",
            unroll_length=64,
            num_epochs=4,
            num_minibatches=4,
            learning_rate=1e-3,
            lr_schedule="linear",
            discount=0.95,
            entropy_cost=0.0,
        ),
        total_env_steps=1_000_000,
        iterations_per_chunk=8,
    )
