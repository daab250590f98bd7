"""gymnasium's CartPole-v1 in actor processes, trained through the bridge with V-trace.

Two local actors x 8 envs; each learner update takes 16 unrolls of 32 steps. The actors keep
acting while the learner updates, so later epochs see some policy lag, which V-trace corrects.
Learning rate 5e-4: with 1e-3 a 150k-step run reached 500 and then collapsed to ~10 before the
end (so the saved policy played at random); with 5e-4 it ended at 500 (greedy eval 500).
"""

from accelrl.config import AgentConfig, BridgeConfig, EnvConfig, TrainConfig


def config() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="cartpole", num_envs=16),
        agent=AgentConfig(
            hidden_sizes=(64, 64),
            activation="tanh",
            unroll_length=32,
            num_epochs=4,
            num_minibatches=4,
            learning_rate=5e-4,
            lr_schedule="linear",
            entropy_cost=0.01,
        ),
        bridge=BridgeConfig(
            env="gymnasium:CartPole-v1",
            num_actors=2,
            envs_per_actor=8,
            max_batch=16,
            deadline_ms=2.0,
            batch_unrolls=16,
            queue_size=8,
        ),
        total_env_steps=300_000,
        eval_episodes=0,
    )
