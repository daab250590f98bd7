"""V-trace over the bridge: the actor-critic acting on the server and `VTraceLearner.update`.

Sequences are disjoint unrolls of `agent.unroll_length` steps; each update takes
`bridge.batch_unrolls` of them as a time-major `Trajectory` and runs the same update as the
fused path (epochs x minibatches, V-trace correcting the policy lag of the acting versions).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from accelrl.bridge.codec import EnvSpec
from accelrl.config import TrainConfig
from accelrl.fused import actor_critic, vtrace_config
from accelrl.train import TrainingDiverged
from agents import (
    ActorCriticAgent,
    DiscreteActions,
    MultiDiscreteActions,
    Trajectory,
    box_actions,
    make_optimizer,
)
from agents.learner import VTraceLearner
from physics.xla_cpu import NETWORK_COMPILE


class BridgeTrainState(struct.PyTreeNode):
    """What a V-trace bridge run needs to resume: the learner's state (actors hold none)."""

    params: Any
    opt_state: Any
    key: jax.Array
    iteration: jax.Array  # learner updates done (int32); also the policy version
    env_steps: jax.Array  # env steps trained on (int32)


def agent_observation_shape(spec: EnvSpec, frame_stack: int) -> tuple[int, ...]:
    """Per-step observation -> what the agent sees (frames stacked along the last axis)."""
    shape = spec.observation_shape
    if frame_stack <= 1:
        return shape
    if len(shape) == 2:
        return (*shape, frame_stack)
    return (*shape[:-1], shape[-1] * frame_stack)


def make_bridge_agent(config: TrainConfig, spec: EnvSpec) -> ActorCriticAgent:
    if spec.discrete:
        actions = DiscreteActions(spec.num_actions)
    elif spec.action_nvec:
        actions = MultiDiscreteActions(spec.action_nvec)
    else:
        actions = box_actions(spec.action_low, spec.action_high)
    return actor_critic(config, agent_observation_shape(spec, config.bridge.frame_stack), actions)


def total_updates(config: TrainConfig) -> int:
    per_update = config.bridge.batch_unrolls * config.agent.unroll_length
    return max(1, math.ceil(config.total_env_steps / per_update))


class VTraceBridgeLearner:
    """The V-trace side of a bridge server (see accelrl/bridge/learner_loop.py for the loop)."""

    def __init__(self, config: TrainConfig, spec: EnvSpec) -> None:
        a, b = config.agent, config.bridge
        self.config, self.spec = config, spec
        self.agent = make_bridge_agent(config, spec)
        self.sequence_length = self.sequence_period = a.unroll_length
        self.rows_per_step = b.batch_unrolls
        self.extras = {"behaviour_log_prob": ((), np.float32)}
        self.slot_constants = ()
        self.total_updates = total_updates(config)
        self.steps_per_update = a.num_epochs * a.num_minibatches
        optimizer, self.schedule = make_optimizer(
            learning_rate=a.learning_rate,
            max_grad_norm=a.max_grad_norm,
            schedule=a.lr_schedule,
            total_updates=self.total_updates * self.steps_per_update,
        )
        self.learner = VTraceLearner(
            self.agent, optimizer, vtrace_config(config), a.num_epochs, a.num_minibatches
        )
        self._update = jax.jit(
            self.learner.update, donate_argnums=1, compiler_options=NETWORK_COMPILE
        )

    def policy_step(
        self, params: Any, carry: Any, inputs: dict, constants: Any, key: jax.Array
    ) -> tuple[Any, dict]:
        carry, out = self.agent.act(params, carry, inputs["observation"], inputs["is_first"], key)
        outputs = {"action": out.action, "env_action": out.env_action}
        return carry, {**outputs, "behaviour_log_prob": out.log_prob}

    def greedy_step(
        self, params: Any, carry: Any, inputs: dict, key: jax.Array
    ) -> tuple[Any, jax.Array]:
        """The policy's mode (for evaluation): `(carry, env_action)`."""
        obs, first = inputs["observation"], inputs["is_first"]
        carry, out = self.agent.act(params, carry, obs, first, key, deterministic=True)
        return carry, out.env_action

    def init_state(self, seed: int) -> BridgeTrainState:
        param_key, key = jax.random.split(jax.random.PRNGKey(seed))
        params = jax.jit(self.agent.init)(param_key)  # one compile, not op-by-op
        return BridgeTrainState(
            params=params,
            opt_state=self.learner.init(params),
            key=key,
            iteration=jnp.zeros((), jnp.int32),
            env_steps=jnp.zeros((), jnp.int32),
        )

    def finished(self, state: BridgeTrainState) -> bool:
        return int(state.iteration) >= self.total_updates

    def learning_rate(self, state: BridgeTrainState) -> float:
        return float(self.schedule(int(state.iteration) * self.steps_per_update))

    def warm_up(self, state: BridgeTrainState) -> None:
        """Compile the update before serving."""
        t, b = self.config.agent.unroll_length, self.rows_per_step
        shape, dtype = self.agent.obs_shape, self.spec.observation_dtype
        action = np.zeros((t, b, *self.spec.action_shape), self.spec.action_dtype)
        dummy = Trajectory(
            observation=np.zeros((t, b, *shape), dtype),
            next_observation=np.zeros((t, b, *shape), dtype),
            is_first=np.zeros((t, b), bool),
            action=action,
            behaviour_log_prob=np.zeros((t, b), np.float32),
            reward=np.zeros((t, b), np.float32),
            terminated=np.zeros((t, b), bool),
            truncated=np.zeros((t, b), bool),
            initial_carry=jax.device_get(self.agent.initial_carry(b)),
        )
        self._update = self._update.lower(state.params, state.opt_state, dummy, state.key).compile()

    def step(
        self, state: BridgeTrainState, batch: dict[str, Any]
    ) -> tuple[BridgeTrainState, dict[str, float]]:
        """One V-trace update on `rows_per_step` unrolls (fields [B, T, ...])."""
        fields = ("observation", "next_observation", "is_first", "action", "behaviour_log_prob")
        fields += ("reward", "terminated", "truncated")
        time_major = {k: np.swapaxes(batch[k], 0, 1) for k in fields}
        time_major["reward"] = time_major["reward"] * self.config.agent.reward_scale
        traj = Trajectory(**time_major, initial_carry=batch["start_carry"])
        key, update_key = jax.random.split(state.key)
        params, opt_state, metrics = self._update(state.params, state.opt_state, traj, update_key)
        metrics = jax.device_get(metrics)
        iteration = int(state.iteration)
        if not bool(metrics.finite):
            raise TrainingDiverged(f"non-finite loss or gradients at update {iteration}")
        env_steps = int(state.env_steps) + len(batch["reward"]) * self.sequence_period
        state = BridgeTrainState(
            params=params,
            opt_state=opt_state,
            key=key,
            iteration=jnp.asarray(iteration + 1, jnp.int32),
            env_steps=jnp.asarray(env_steps, jnp.int32),
        )
        losses = {f"losses/{k}": float(v) for k, v in metrics._asdict().items() if k != "finite"}
        return state, losses
