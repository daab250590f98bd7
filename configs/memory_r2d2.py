"""The memory_cue task with R2D2: recall the first observation's cue at the 10th step.

`r2d2.recurrent=false` gives the same agent with no memory (it cannot beat a return of 0).
"""

from accelrl.config import EnvConfig, R2D2Config, TrainConfig


def config() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="memory_cue", num_envs=16),
        algorithm="r2d2",
        r2d2=R2D2Config(
            torso_sizes=(32,),
            lstm_size=32,
            head_size=32,
            burn_in=4,
            trace_length=16,
            period=5,
            n_step=3,
            discount=0.99,
            learning_rate=1e-3,
            adam_eps=1e-5,
            batch_size=32,
            target_update_period=50,
            replay_capacity=2048,
            min_replay_size=128,
            replay_ratio=2.0,
        ),
        total_env_steps=30_000,
        iterations_per_chunk=16,
    )
