"""bsuite's Catch: move a paddle along the bottom row to catch a falling ball."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from accelrl.envs.base import Environment, TimeStep, first_timestep
from accelrl.envs.spaces import Box, Discrete


@struct.dataclass
class CatchState:
    ball_row: jax.Array
    ball_col: jax.Array
    paddle_col: jax.Array


class Catch(Environment[CatchState]):
    """Actions 0/1/2 move the paddle left/stay/right (clipped to the board).

    The ball falls one row per step; when it reaches the bottom row (after `rows - 1` steps)
    the episode terminates with reward +1 if caught, else -1; all other rewards are 0. The
    observation is a float32 [rows, columns] board with 1.0 at the ball and the paddle.
    """

    def __init__(self, rows: int = 10, columns: int = 5) -> None:
        self.rows = rows
        self.columns = columns

    def _observation(self, state: CatchState) -> jax.Array:
        board = jnp.zeros((self.rows, self.columns), jnp.float32)
        board = board.at[state.ball_row, state.ball_col].set(1.0)
        return board.at[self.rows - 1, state.paddle_col].set(1.0)

    def reset(self, key: jax.Array) -> tuple[CatchState, TimeStep]:
        state = CatchState(
            ball_row=jnp.zeros((), jnp.int32),
            ball_col=jax.random.randint(key, (), 0, self.columns, jnp.int32),
            paddle_col=jnp.asarray(self.columns // 2, jnp.int32),
        )
        return state, first_timestep(self._observation(state))

    def step(self, state: CatchState, action: jax.Array) -> tuple[CatchState, TimeStep]:
        paddle_col = jnp.clip(state.paddle_col + action - 1, 0, self.columns - 1)
        state = CatchState(
            ball_row=state.ball_row + 1,
            ball_col=state.ball_col,
            paddle_col=paddle_col.astype(jnp.int32),
        )
        terminated = state.ball_row == self.rows - 1
        caught = jnp.where(state.paddle_col == state.ball_col, 1.0, -1.0)
        return state, TimeStep(
            observation=self._observation(state),
            reward=jnp.where(terminated, caught, 0.0).astype(jnp.float32),
            terminated=terminated,
            truncated=jnp.zeros((), bool),
            info={},
        )

    @property
    def observation_space(self) -> Box:
        return Box(shape=(self.rows, self.columns), low=0.0, high=1.0)

    @property
    def action_space(self) -> Discrete:
        return Discrete(3)
