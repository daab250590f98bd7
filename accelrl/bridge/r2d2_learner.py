"""R2D2 over the bridge: epsilon-greedy acting on the server, sequences into on-device replay.

The agent, replay layout and learner update are the fused path's (`accelrl/r2d2_learning.py`,
`agents/r2d2.py`). The server keeps every env's recurrent state, previous action and previous
reward; slot i acts with the Ape-X epsilon eps_{i mod N} = 0.4^(1 + 7 (i mod N) / (N - 1)) over
the N = `bridge.num_actors * bridge.envs_per_actor` envs expected in total (slots are handed out
lowest first, so N connected envs get the whole schedule). Each env's window of
`burn_in + trace_length` steps becomes one sequence every `period` steps (overlapping as R2D2
stores them), with the recurrent state the server had before its first step. The learner
inserts `bridge.batch_unrolls` sequences at a time into the replay (one shard, this device) and
then runs `replay_ratio / batch_size` updates per inserted sequence once `min_replay_size`
sequences are stored. Checkpoints hold the replay contents and priorities.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.sharding import Mesh

from accelrl import replay
from accelrl.bridge.codec import EnvSpec
from accelrl.bridge.vtrace_learner import agent_observation_shape
from accelrl.config import ConfigError, TrainConfig
from accelrl.fused_r2d2 import check_replay_memory
from accelrl.r2d2_learning import (
    LearnState,
    init_replay,
    insert,
    learner_update,
    make_r2d2_agent,
    make_r2d2_learner,
    zero_sequences,
)
from accelrl.train import TrainingDiverged
from agents.r2d2 import Sequences, epsilons
from physics.xla_cpu import NETWORK_COMPILE

SEQUENCE_FIELDS = Sequences._fields[:-1]  # all but start_carry


class R2D2BridgeState(struct.PyTreeNode):
    """What an R2D2 bridge run needs to resume, replay included."""

    params: Any
    target_params: Any
    opt_state: Any
    replay: replay.ReplayState  # one shard: leading axis of size 1
    key: jax.Array
    iteration: jax.Array  # learner updates applied (int32); also the policy version
    env_steps: jax.Array  # env steps inserted into the replay (int32)
    update_credit: jax.Array  # float32 updates owed by the replay ratio, not yet run


class R2D2BridgeLearner:
    """The R2D2 side of a bridge server (see accelrl/bridge/learner_loop.py for the loop)."""

    def __init__(self, config: TrainConfig, spec: EnvSpec) -> None:
        r, b = config.r2d2, config.bridge
        if not spec.discrete or spec.action_shape != ():
            raise ConfigError(
                f"r2d2 needs one discrete action per step; the env has {spec.describe()}"
            )
        self.config, self.spec = config, spec
        obs_shape = agent_observation_shape(spec, b.frame_stack)
        self.agent = make_r2d2_agent(config, obs_shape, spec.num_actions)
        self.sequence_length = r.burn_in + r.trace_length
        self.sequence_period = r.period
        self.rows_per_step = b.batch_unrolls
        self.extras: dict = {}
        expected_envs = max(1, b.num_actors * b.envs_per_actor)
        eps = epsilons(expected_envs, r.epsilon_base, r.epsilon_alpha)
        self.slot_constants = eps[np.arange(b.max_envs + 1) % expected_envs]
        sequences = math.ceil(config.total_env_steps / r.period)
        self.total_updates = max(1, round(sequences * r.replay_ratio / r.batch_size))
        self.learner, self.schedule = make_r2d2_learner(config, self.agent, self.total_updates)
        self._insert = jax.jit(
            lambda buffer, items: insert(
                buffer, items, jnp.ones(self.rows_per_step, bool), r.priority_exponent
            ),
            donate_argnums=0,
        )

        def update(params: Any, target: Any, updates: Any, owned: tuple, key: jax.Array) -> tuple:
            opt_state, buffer = owned
            learn = LearnState(params, target, opt_state, buffer, updates)
            return learner_update(self.learner, config, learn, key, True)

        # Only the optimiser state and the replay are donated: inference may still be acting
        # with the parameters, and the target starts as the same arrays as the parameters.
        self._update = jax.jit(update, donate_argnums=3, compiler_options=NETWORK_COMPILE)
        abstract = jax.eval_shape(self.init_state, 0)
        mesh = Mesh(np.asarray(jax.devices()[:1]), ("envs",))
        check_replay_memory(replay.nbytes(abstract.replay), mesh)

    def policy_step(
        self, params: Any, carry: Any, inputs: dict, epsilon: jax.Array, key: jax.Array
    ) -> tuple[Any, dict]:
        carry, action, _ = self.agent.act(
            params,
            carry,
            inputs["observation"],
            inputs["prev_action"],
            inputs["prev_reward"],
            inputs["is_first"],
            epsilon,
            key,
        )
        return carry, {"action": action, "env_action": action}

    def greedy_step(
        self, params: Any, carry: Any, inputs: dict, key: jax.Array
    ) -> tuple[Any, jax.Array]:
        """Greedy Q (epsilon 0, for evaluation): `(carry, env_action)`."""
        greedy = jnp.zeros(inputs["is_first"].shape, jnp.float32)
        carry, outputs = self.policy_step(params, carry, inputs, greedy, key)
        return carry, outputs["env_action"]

    def _example_item(self) -> Sequences:
        """One replay item: zero [L, ...] steps and the start carry."""
        dtype = self.spec.observation_dtype
        return zero_sequences(self.agent, dtype, (self.sequence_length,), ())

    def init_state(self, seed: int) -> R2D2BridgeState:
        param_key, key = jax.random.split(jax.random.PRNGKey(seed))
        params = jax.jit(self.agent.init)(param_key)  # one compile, not op-by-op
        return R2D2BridgeState(
            params=params,
            target_params=params,
            opt_state=self.learner.init(params),
            replay=init_replay(self._example_item(), self.config.r2d2.replay_capacity, 1),
            key=key,
            iteration=jnp.zeros((), jnp.int32),
            env_steps=jnp.zeros((), jnp.int32),
            update_credit=jnp.zeros((), jnp.float32),
        )

    def finished(self, state: R2D2BridgeState) -> bool:
        return int(state.env_steps) >= self.config.total_env_steps

    def learning_rate(self, state: R2D2BridgeState) -> float:
        return float(self.schedule(int(state.iteration)))

    def warm_up(self, state: R2D2BridgeState) -> None:
        """Compile insertion and the update before serving."""
        items = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct((self.rows_per_step, *x.shape), x.dtype),
            self._example_item(),
        )
        self._insert = self._insert.lower(state.replay, items).compile()
        args = (state.params, state.target_params, state.iteration)
        owned = (state.opt_state, state.replay)
        self._update = self._update.lower(*args, owned, state.key).compile()

    def step(
        self, state: R2D2BridgeState, batch: dict[str, Any]
    ) -> tuple[R2D2BridgeState, dict[str, float]]:
        """Insert `rows_per_step` sequences (fields [S, L, ...]), then run the updates the
        replay ratio owes once the replay holds `min_replay_size` sequences."""
        r = self.config.r2d2
        items = Sequences(
            **{k: batch[k] for k in SEQUENCE_FIELDS}, start_carry=batch["start_carry"]
        )
        buffer = self._insert(state.replay, items)
        rows = len(batch["reward"])
        stored = int(jnp.sum(buffer.size))
        ready = stored >= r.min_replay_size
        credit = float(state.update_credit) + (rows * r.replay_ratio / r.batch_size if ready else 0)
        learn = LearnState(
            state.params, state.target_params, state.opt_state, buffer, state.iteration
        )
        key = state.key
        metrics = []
        while credit >= 1.0:
            key, update_key = jax.random.split(key)
            args = (learn.params, learn.target_params, learn.updates)
            learn, m = self._update(*args, (learn.opt_state, learn.replay), update_key)
            m = jax.device_get(m)
            if not bool(m.finite):
                raise TrainingDiverged(f"non-finite loss or gradients at update {learn.updates}")
            metrics.append(m)
            credit -= 1.0
        losses = {"losses/replay_fill": stored / r.replay_capacity}
        if metrics:
            for name in ("loss", "q_mean", "td_abs", "grad_norm"):
                losses[f"losses/{name}"] = float(np.mean([getattr(m, name) for m in metrics]))
        state = R2D2BridgeState(
            params=learn.params,
            target_params=learn.target_params,
            opt_state=learn.opt_state,
            replay=learn.replay,
            key=key,
            iteration=learn.updates,
            env_steps=jnp.asarray(int(state.env_steps) + rows * r.period, jnp.int32),
            update_credit=jnp.asarray(credit, jnp.float32),
        )
        return state, losses
