"""The peers the benchmarks compare against: Brax's PPO trainer on its ant, Brax's and MJX's
ant physics step, and gymnax's CartPole.

A script of its own, run in a subprocess, because Brax 0.14.2's trainers need jax < 0.10 while
accelrl runs on jax 0.10: `make peers` builds `.venv-peers` with that set, and `physics.py` and
`ant_training.py` run this file with its interpreter (`common.run_peer`). It imports nothing
from accelrl and prints one JSON line, the last line of its output:

    .venv-peers/bin/python benchmarks/peers.py ppo --num-envs 64 --env-steps-per-epoch 8000
    .venv-peers/bin/python benchmarks/peers.py step --engine mjx --mjcf ant.xml --batches 64 512
    .venv-peers/bin/python benchmarks/peers.py cartpole --batches 4 64 --lengths 1024 128

`ppo`: Brax's published Ant settings (unroll 5, 4 updates per batch, 32 minibatches where they
divide the envs, reward scaling 10, discount 0.97) on Brax's default `generalized` pipeline
(reduced coordinates, like accelrl's physics). SPS is Brax's own `training/sps` of each
training epoch; the best epoch after the second counts (the first compiles, and on CPU the
second compiled again in our runs). Evaluations are excluded.

`step`: env steps/s of a jitted, vmapped step with random controls in range, fixed per world,
as `physics.py` measures accelrl's engine. `brax`: Brax's ant env (`generalized`, 5 substeps of
0.01 s per env step, its own model). `mjx`: the given MJCF (gymnasium's ant) with Euler
integration and 5 `mjx.step` calls per env step, the same model and work as accelrl's.

`cartpole`: gymnax's CartPole-v1 (the env of PureJaxRL's PPO), an env-only rollout as
`fused_loop.py` measures accelrl's: B envs vmapped, random actions, gymnax's own auto-reset,
lax.scan over L steps in one jitted call; env steps/s, best of blocks of at least `--seconds`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib.metadata import version
from typing import Any

N_SUBSTEPS = 5


def ppo(num_envs: int, env_steps_per_epoch: int, epochs: int) -> dict[str, Any]:
    """Brax PPO at `num_envs` for `epochs` training epochs of about `env_steps_per_epoch`."""
    from brax import envs
    from brax.training.agents.ppo import train as brax_ppo

    minibatches = 32 if num_envs % 32 == 0 else 1
    unroll = 5
    steps_per_update = num_envs * unroll  # batch_size * num_minibatches = num_envs
    updates_per_epoch = max(1, env_steps_per_epoch // steps_per_update)
    records: list[dict[str, float]] = []

    def progress(step: int, metrics: dict[str, Any]) -> None:
        if "training/sps" in metrics:
            wall = time.perf_counter() - started
            records.append(
                {"env_steps": int(step), "sps": float(metrics["training/sps"]), "wall_s": wall}
            )

    environment = envs.get_environment("ant")
    started = time.perf_counter()
    brax_ppo.train(
        environment=environment,
        num_timesteps=epochs * updates_per_epoch * steps_per_update,
        num_evals=epochs + 1,  # an evaluation before training, then one after each epoch
        episode_length=1000,
        num_envs=num_envs,
        batch_size=num_envs // minibatches,
        num_minibatches=minibatches,
        unroll_length=unroll,
        num_updates_per_batch=4,
        normalize_observations=True,
        reward_scaling=10.0,
        discounting=0.97,
        learning_rate=3e-4,
        entropy_cost=1e-2,
        num_eval_envs=16,
        seed=0,
        progress_fn=progress,
    )
    steady = [r["sps"] for r in records[2:]]
    return {
        "num_envs": num_envs,
        "num_minibatches": minibatches,
        "unroll_length": unroll,
        "backend": environment.backend,
        "epochs": records,
        "sps_best": max(steady) if steady else None,
        "wall_s": time.perf_counter() - started,
    }


def _time_calls(
    fn: Any, carry: Any, args: tuple, steps_per_call: int, seconds: float, blocks: int = 1
) -> dict[str, Any]:
    """Compile `fn(carry, *args) -> carry`, call it once to warm up, then env steps/s: the best
    of `blocks` blocks of calls, each at least `seconds` long."""
    import jax

    started = time.perf_counter()
    compiled = jax.jit(fn).lower(carry, *args).compile()
    compile_s = time.perf_counter() - started
    carry = jax.block_until_ready(compiled(carry, *args))
    best = 0.0
    for _ in range(blocks):
        calls, started = 0, time.perf_counter()
        while calls == 0 or time.perf_counter() - started < seconds:
            carry = jax.block_until_ready(compiled(carry, *args))
            calls += 1
        best = max(best, calls * steps_per_call / (time.perf_counter() - started))
    return {"compile_wall_s": compile_s, "steps_per_s": best}


def step_brax(batch: int, seconds: float) -> dict[str, Any]:
    import jax
    from brax import envs

    env = envs.get_environment("ant")
    state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), batch))
    ctrl = jax.random.uniform(jax.random.PRNGKey(1), (batch, env.action_size), minval=-1, maxval=1)
    result = _time_calls(jax.vmap(env.step), state, (ctrl,), batch, seconds)
    return {"batch": batch, **result, "backend": env.backend, "substeps": int(env._n_frames)}


def step_mjx(batch: int, seconds: float, mjcf: str) -> dict[str, Any]:
    import jax
    import mujoco
    from mujoco import mjx

    model = mujoco.MjModel.from_xml_path(mjcf)
    model.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    mx = mjx.put_model(model)
    data = jax.vmap(lambda _: mjx.make_data(mx))(jax.numpy.arange(batch))
    lo, hi = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
    ctrl = jax.random.uniform(jax.random.PRNGKey(1), (batch, model.nu), minval=lo, maxval=hi)

    def one(d: Any, u: Any) -> Any:
        d = d.replace(ctrl=u)
        return jax.lax.fori_loop(0, N_SUBSTEPS, lambda _, d: mjx.step(mx, d), d)

    result = _time_calls(jax.vmap(one), data, (ctrl,), batch, seconds)
    return {"batch": batch, **result, "substeps": N_SUBSTEPS}


def rollout_gymnax_cartpole(batch: int, length: int, seconds: float) -> dict[str, Any]:
    import gymnax
    import jax

    env, params = gymnax.make("CartPole-v1")
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def rollout(carry: tuple) -> tuple:
        def one(carry: tuple, _: None) -> tuple[tuple, None]:
            obs, state, key, reward_sum = carry
            key, action_key, step_key = jax.random.split(key, 3)
            action = jax.random.randint(action_key, (batch,), 0, 2)
            keys = jax.random.split(step_key, batch)
            obs, state, reward, *_ = step(keys, state, action, params)
            return (obs, state, key, reward_sum + reward.sum()), None

        return jax.lax.scan(one, carry, None, length=length)[0]

    key = jax.random.PRNGKey(1)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, batch), params)
    carry = (obs, state, key, jax.numpy.zeros(()))
    result = _time_calls(rollout, carry, (), batch * length, seconds, blocks=3)
    return {"batch": batch, "length": length, **result}


# PureJaxRL's PPO defaults for CartPole-v1 (facts from its published config; code our own).
PPO_CARTPOLE = {
    "num_envs": 4,
    "num_steps": 128,
    "total_timesteps": 500_000,
    "update_epochs": 4,
    "num_minibatches": 4,
    "lr": 2.5e-4,  # annealed linearly to 0
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_eps": 0.2,
    "ent_coef": 0.01,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "hidden": 64,  # two tanh layers each for actor and critic, orthogonal init
}


def ppo_cartpole(seed: int, solve_return: float, window: int) -> dict[str, Any]:
    """PPO with PureJaxRL's default CartPole config on gymnax, the whole run in one jit.

    Reports compile time, run time, SPS and when the mean return of the last `window`
    episodes first reaches `solve_return` (env steps, and wall time counted as compile plus
    the run's share up to that step: the run is one call, so progress inside it is not
    observable and is taken as uniform).
    """
    import flax.linen as nn
    import gymnax
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    c = PPO_CARTPOLE
    n, t = c["num_envs"], c["num_steps"]
    updates = c["total_timesteps"] // (n * t)
    minibatch = n * t // c["num_minibatches"]
    env, env_params = gymnax.make("CartPole-v1")

    class ActorCritic(nn.Module):
        @nn.compact
        def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
            def mlp(y: jax.Array, out: int, scale: float) -> jax.Array:
                for _ in range(2):
                    dense = nn.Dense(c["hidden"], kernel_init=nn.initializers.orthogonal(2**0.5))
                    y = nn.tanh(dense(y))
                return nn.Dense(out, kernel_init=nn.initializers.orthogonal(scale))(y)

            return mlp(x, 2, 0.01), mlp(x, 1, 1.0)[..., 0]

    net = ActorCritic()
    steps_per_lr = c["update_epochs"] * c["num_minibatches"]
    schedule = lambda count: c["lr"] * (1.0 - (count // steps_per_lr) / updates)
    tx = optax.chain(optax.clip_by_global_norm(c["max_grad_norm"]), optax.adam(schedule, eps=1e-5))
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def loss_fn(params: Any, batch: tuple) -> jax.Array:
        obs, action, old_logp, old_value, advantage, target = batch
        logits, value = net.apply(params, obs)
        log_probs = jax.nn.log_softmax(logits)
        logp = jnp.take_along_axis(log_probs, action[:, None], axis=1)[:, 0]
        clipped_value = old_value + jnp.clip(value - old_value, -c["clip_eps"], c["clip_eps"])
        value_loss = (
            0.5 * jnp.maximum(jnp.square(value - target), jnp.square(clipped_value - target)).mean()
        )
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        ratio = jnp.exp(logp - old_logp)
        eps = c["clip_eps"]
        policy_loss = -jnp.minimum(
            ratio * advantage, jnp.clip(ratio, 1 - eps, 1 + eps) * advantage
        ).mean()
        entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
        return policy_loss + c["vf_coef"] * value_loss - c["ent_coef"] * entropy

    def collect(carry: tuple, _: None) -> tuple[tuple, tuple]:
        params, opt_state, obs, env_state, episode_return, key = carry
        key, act_key, step_key = jax.random.split(key, 3)
        logits, value = net.apply(params, obs)
        action = jax.random.categorical(act_key, logits)
        logp = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=1)[:, 0]
        next_obs, env_state, reward, terminated, truncated, _ = step(
            jax.random.split(step_key, n), env_state, action, env_params
        )
        done = jnp.logical_or(terminated, truncated)
        episode_return = episode_return + reward
        record = (obs, action, logp, value, reward, done, jnp.where(done, episode_return, -1.0))
        episode_return = jnp.where(done, 0.0, episode_return)
        return (params, opt_state, next_obs, env_state, episode_return, key), record

    def update(carry: tuple, _: None) -> tuple[tuple, jax.Array]:
        carry, (obs, action, logp, value, reward, done, ended) = jax.lax.scan(
            collect, carry, None, length=t
        )
        params, opt_state, last_obs, env_state, episode_return, key = carry
        _, last_value = net.apply(params, last_obs)

        def gae(next_: tuple, step_: tuple) -> tuple[tuple, jax.Array]:
            next_advantage, next_value = next_
            r, v, d = step_
            delta = r + c["gamma"] * next_value * (1 - d) - v
            advantage = delta + c["gamma"] * c["gae_lambda"] * (1 - d) * next_advantage
            return (advantage, v), advantage

        _, advantage = jax.lax.scan(
            gae, (jnp.zeros_like(last_value), last_value), (reward, value, done), reverse=True
        )
        flat = jax.tree.map(
            lambda x: x.reshape(n * t, *x.shape[2:]),
            (obs, action, logp, value, advantage, advantage + value),
        )

        def epoch(state: tuple, _: None) -> tuple[tuple, None]:
            params, opt_state, key = state
            key, perm_key = jax.random.split(key)
            order = jax.random.permutation(perm_key, n * t)
            batches = jax.tree.map(
                lambda x: x[order].reshape(c["num_minibatches"], minibatch, *x.shape[1:]), flat
            )

            def minibatch_step(state: tuple, batch: tuple) -> tuple[tuple, None]:
                params, opt_state = state
                grads = jax.grad(loss_fn)(params, batch)
                updates_, opt_state = tx.update(grads, opt_state)
                return (optax.apply_updates(params, updates_), opt_state), None

            (params, opt_state), _ = jax.lax.scan(minibatch_step, (params, opt_state), batches)
            return (params, opt_state, key), None

        (params, opt_state, key), _ = jax.lax.scan(
            epoch, (params, opt_state, key), None, length=c["update_epochs"]
        )
        return (params, opt_state, last_obs, env_state, episode_return, key), ended

    def train(key: jax.Array) -> jax.Array:
        key, init_key, reset_key = jax.random.split(key, 3)
        obs, env_state = reset(jax.random.split(reset_key, n), env_params)
        params = net.init(init_key, obs)
        carry = (params, tx.init(params), obs, env_state, jnp.zeros(n), key)
        _, ended = jax.lax.scan(update, carry, None, length=updates)
        return ended  # [updates, t, n]: the return of each episode that ended, else -1

    key = jax.random.PRNGKey(seed)
    started = time.perf_counter()
    compiled = jax.jit(train).lower(key).compile()
    compile_s = time.perf_counter() - started
    started = time.perf_counter()
    ended = np.asarray(jax.block_until_ready(compiled(key))).reshape(updates * t, n)
    run_s = time.perf_counter() - started
    total = updates * t * n
    returns, solved_at = [], None
    for i, row in enumerate(ended):
        returns.extend(row[row >= 0].tolist())
        if len(returns) >= window and np.mean(returns[-window:]) >= solve_return:
            solved_at = (i + 1) * n
            break
    return {
        "seed": seed,
        "config": c,
        "compile_wall_s": compile_s,
        "run_wall_s": run_s,
        "train_sps": total / run_s,
        "total_env_steps": total,
        "solved_env_steps": solved_at,
        "solve_wall_s_incl_compile": (
            None if solved_at is None else compile_s + run_s * solved_at / total
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("ppo", help="Brax's PPO trainer on its ant")
    p.add_argument("--num-envs", type=int, required=True)
    p.add_argument("--env-steps-per-epoch", type=int, required=True)
    p.add_argument("--epochs", type=int, default=3, help="training epochs (>= 3)")
    s = commands.add_parser("step", help="an ant physics step, vmapped")
    s.add_argument("--engine", choices=["brax", "mjx"], required=True)
    s.add_argument("--batches", type=int, nargs="+", required=True)
    s.add_argument("--seconds", type=float, default=2.0, help="timed calls per batch")
    s.add_argument("--mjcf", help="the model for mjx (gymnasium's ant.xml)")
    c = commands.add_parser("cartpole", help="gymnax's CartPole-v1, an env-only rollout")
    c.add_argument("--batches", type=int, nargs="+", required=True)
    c.add_argument("--lengths", type=int, nargs="+", required=True, help="steps per call")
    c.add_argument("--seconds", type=float, default=1.0, help="minimum length of a timed block")
    g = commands.add_parser("ppo_cartpole", help="PPO, PureJaxRL's CartPole config, on gymnax")
    g.add_argument("--seeds", type=int, nargs="+", required=True)
    g.add_argument("--solve-return", type=float, default=475.0)
    g.add_argument("--window", type=int, default=100, help="episodes in the solve mean")
    args = parser.parse_args(argv)

    import jax

    if args.command in ("cartpole", "ppo_cartpole"):  # the gymnax peers
        if args.command == "ppo_cartpole":
            runs = [ppo_cartpole(seed, args.solve_return, args.window) for seed in args.seeds]
            result: dict[str, Any] = {"runs": runs}
        else:
            if len(args.lengths) != len(args.batches) or min(args.batches + args.lengths) < 1:
                parser.error("--batches and --lengths: positive, one length per batch")
            result = {
                "env": "gymnax CartPole-v1",
                "batches": [
                    rollout_gymnax_cartpole(b, n, args.seconds)
                    for b, n in zip(args.batches, args.lengths, strict=True)
                ],
            }
        versions = {name: version(name) for name in ("gymnax", "flax", "jax")}
        result.update(versions=versions, device=str(jax.devices()[0]))
        print(json.dumps(result), flush=True)
        return 0

    import brax

    if args.command == "ppo":
        if args.num_envs < 1 or args.env_steps_per_epoch < 1 or args.epochs < 3:
            parser.error("--num-envs and --env-steps-per-epoch must be positive, --epochs >= 3")
        result = ppo(args.num_envs, args.env_steps_per_epoch, args.epochs)
    else:
        if any(b < 1 for b in args.batches):
            parser.error(f"--batches must be positive, got {args.batches}")
        if args.engine == "mjx" and not args.mjcf:
            parser.error("--engine mjx needs --mjcf")
        result = {
            "engine": args.engine,
            "batches": [
                step_brax(b, args.seconds)
                if args.engine == "brax"
                else step_mjx(b, args.seconds, args.mjcf)
                for b in args.batches
            ],
        }
    versions = {"brax": brax.__version__, "jax": jax.__version__}
    if args.command == "step" and args.engine == "mjx":
        import mujoco

        versions["mujoco"] = mujoco.__version__
    result.update(versions=versions, device=str(jax.devices()[0]))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
