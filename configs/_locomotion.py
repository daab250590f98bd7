"""Shared builder of the locomotion presets: V-trace, tanh-Gaussian policy, normalised observations.

Hyperparameters start from Brax's PPO settings for each env (discount, entropy cost, learning
rate, samples per minibatch, epochs). Reward scales differ: our learner clips the global
gradient norm of policy and value together, so a large scale lets the value gradient crowd out
the policy's; scales are set so a step's scaled reward is of order 1 (InvertedPendulum, 150k
steps: the mean return of finished episodes peaked at 508 with scale 1, at 197 with Brax's 10).

Brax collects `batch_size * num_minibatches` trajectories of `unroll_length` steps per update;
here one iteration is `num_envs x unroll_length` steps, so the unroll is lengthened to gather
that many steps and each of the `num_minibatches` minibatches (split along envs) holds Brax's
samples per minibatch.

The policy term is PPO's clipped surrogate on the V-trace advantages (`ppo_clip=0.2`, Brax's
clipping epsilon): with IMPALA's term, several epochs on one batch had no trust region, and
Reacher (2M-step schedule, seed 0) reached -5.8 at 435k steps and then collapsed to -56..-96
within 40k steps; with the clip the same run kept improving (-4.4 at 690k).

Batch sizes fit the device: `pick(cpu, accelerator)` chooses by whether JAX will find a GPU or
TPU, judged without initialising JAX (so `jax.distributed.initialize()` can still come first):
from JAX_PLATFORMS when it is set, else from an installed CUDA/ROCm/TPU plugin. Override
`env.num_envs` (and `agent.num_minibatches`) on the command line to choose otherwise.
"""

from __future__ import annotations

from typing import TypeVar

from accelrl.config import AgentConfig, EnvConfig, TrainConfig
from physics.xla_cpu import accelerator_available

T = TypeVar("T")


def pick(cpu: T, accelerator: T) -> T:
    """`accelerator` when JAX will run on a GPU/TPU, else `cpu`."""
    return accelerator if accelerator_available() else cpu


def locomotion_config(
    env: str,
    *,
    num_envs: int,
    num_minibatches: int,
    unroll_length: int,
    total_env_steps: int,
    reward_scale: float,
    discount: float = 0.97,
    learning_rate: float = 3e-4,
    entropy_cost: float = 1e-2,
    num_epochs: int = 4,
    hidden_sizes: tuple[int, ...] = (256, 256),
    iterations_per_chunk: int = 8,
    max_steps: int | None = None,
) -> TrainConfig:
    """A V-trace preset for the locomotion env registered as `env` (`max_steps`: episode
    limit, default the env's own 1000)."""
    return TrainConfig(
        env=EnvConfig(name=env, num_envs=num_envs, normalize_observation=True, max_steps=max_steps),
        agent=AgentConfig(
            hidden_sizes=hidden_sizes,
            activation="silu",
            unroll_length=unroll_length,
            num_epochs=num_epochs,
            num_minibatches=num_minibatches,
            learning_rate=learning_rate,
            lr_schedule="linear",
            max_grad_norm=1.0,
            reward_scale=reward_scale,
            discount=discount,
            trace_lambda=0.95,
            entropy_cost=entropy_cost,
            normalize_advantages=True,
            ppo_clip=0.2,
        ),
        total_env_steps=total_env_steps,
        iterations_per_chunk=iterations_per_chunk,
    )
