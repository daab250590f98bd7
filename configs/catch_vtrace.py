"""bsuite Catch with V-trace."""

from accelrl.config import AgentConfig, EnvConfig, TrainConfig


def config() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="catch", num_envs=16),
        agent=AgentConfig(
            hidden_sizes=(64, 64),
            activation="relu",
            unroll_length=16,
            num_epochs=2,
            num_minibatches=2,
            learning_rate=1e-3,
            lr_schedule="linear",
            entropy_cost=0.01,
        ),
        total_env_steps=100_000,
        iterations_per_chunk=16,
    )
