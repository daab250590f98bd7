"""bsuite Catch with R2D2, CPU-sized."""

from accelrl.config import EnvConfig, R2D2Config, TrainConfig


def config() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="catch", num_envs=8),
        algorithm="r2d2",
        r2d2=R2D2Config(
            torso_sizes=(64,),
            lstm_size=64,
            head_size=64,
            burn_in=4,
            trace_length=12,
            period=4,
            n_step=3,
            discount=0.99,
            learning_rate=1e-3,
            adam_eps=1e-5,
            batch_size=32,
            target_update_period=50,
            replay_capacity=2048,
            min_replay_size=128,
            replay_ratio=4.0,
        ),
        total_env_steps=30_000,
        iterations_per_chunk=16,
    )
