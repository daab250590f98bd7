"""The peers the benchmarks compare against: Brax's PPO trainer on its ant, and Brax's and
MJX's ant physics step.

A script of its own, run in a subprocess, because Brax 0.14.2's trainers need jax < 0.10 while
accelrl runs on jax 0.10: `make peers` builds `.venv-peers` with that set, and `physics.py` and
`ant_training.py` run this file with its interpreter (`common.run_peer`). It imports nothing
from accelrl and prints one JSON line, the last line of its output:

    .venv-peers/bin/python benchmarks/peers.py ppo --num-envs 64 --env-steps-per-epoch 8000
    .venv-peers/bin/python benchmarks/peers.py step --engine mjx --mjcf ant.xml --batches 64 512

`ppo`: Brax's published Ant settings (unroll 5, 4 updates per batch, 32 minibatches where they
divide the envs, reward scaling 10, discount 0.97) on Brax's default `generalized` pipeline
(reduced coordinates, like accelrl's physics). SPS is Brax's own `training/sps` of each
training epoch; the best epoch after the second counts (the first compiles, and on CPU the
second compiled again in our runs). Evaluations are excluded.

`step`: env steps/s of a jitted, vmapped step with random controls in range, fixed per world,
as `physics.py` measures accelrl's engine. `brax`: Brax's ant env (`generalized`, 5 substeps of
0.01 s per env step, its own model). `mjx`: the given MJCF (gymnasium's ant) with Euler
integration and 5 `mjx.step` calls per env step, the same model and work as accelrl's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
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


def _time_steps(step: Any, state: Any, ctrl: Any, batch: int, seconds: float) -> dict[str, Any]:
    """Compile `step(state, ctrl)`, then env steps/s over at least `seconds` of calls."""
    import jax

    started = time.perf_counter()
    compiled = jax.jit(step).lower(state, ctrl).compile()
    compile_s = time.perf_counter() - started
    state = jax.block_until_ready(compiled(state, ctrl))
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        state = jax.block_until_ready(compiled(state, ctrl))
        calls += 1
    return {
        "batch": batch,
        "compile_wall_s": compile_s,
        "steps_per_s": calls * batch / (time.perf_counter() - started),
    }


def step_brax(batch: int, seconds: float) -> dict[str, Any]:
    import jax
    from brax import envs

    env = envs.get_environment("ant")
    state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), batch))
    ctrl = jax.random.uniform(jax.random.PRNGKey(1), (batch, env.action_size), minval=-1, maxval=1)
    result = _time_steps(jax.vmap(env.step), state, ctrl, batch, seconds)
    return {**result, "backend": env.backend, "substeps": int(env._n_frames)}


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

    return {**_time_steps(jax.vmap(one), data, ctrl, batch, seconds), "substeps": N_SUBSTEPS}


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
    args = parser.parse_args(argv)

    import brax
    import jax

    if args.command == "ppo":
        if args.num_envs < 1 or args.env_steps_per_epoch < 1 or args.epochs < 3:
            parser.error("--num-envs and --env-steps-per-epoch must be positive, --epochs >= 3")
        result: dict[str, Any] = ppo(args.num_envs, args.env_steps_per_epoch, args.epochs)
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
