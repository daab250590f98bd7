"""Learning curves of the locomotion presets: return against env steps and against wall time.

    .venv/bin/python benchmarks/train_curves.py                    # 5 envs, the target's clock each
    .venv/bin/python benchmarks/train_curves.py --envs ant --minutes 5
    .venv/bin/python benchmarks/train_curves.py --envs ant reacher hopper --minutes 3 ant=8
    .venv/bin/python benchmarks/train_curves.py --envs reacher --env-steps 200000 --seeds 0 1
    .venv/bin/python benchmarks/train_curves.py --quick            # smoke run: reacher, 3 chunks

Each run is `accelrl.train.train` on the preset `<env>_vtrace`, as `accelrl train` runs it (its
device-dependent batch sizes, a cold process-level compile: XLA's persistent cache is not
enabled here). The curve is read back from the run's TensorBoard events: per chunk, the mean
return of the episodes that ended in it (the stochastic training policy, not an evaluation),
at its env step and at its wall time counted from the `train()` call, compile included.
Compile time (set-up included, as `train` reports it) is given apart. After training, the final
policy is evaluated deterministically (`--eval-episodes`, default 16 full episodes; the figure
Brax's trainers report is such an evaluation), outside the run's clock.

Budgets per run: `--env-steps N` sets the preset's `total_env_steps` (so its learning-rate
schedule decays over N, like `accelrl train ant_vtrace total_env_steps=N`); `--minutes M` (or
`ENV=M` for one env) stops the run after the first chunk that ends M minutes after the call
(compile included; default: the target's clock, 20 min on a CPU, 5 on an accelerator).
Targets (issue 4): Ant return >= 1000 within 20 min on the 2-core CPU; >= 6000 within 5 min
including compile on one H200.

Writes results/train_curves.{json,md,png} (`_gpu` suffix on a GPU; `train_curves_quick.*`
with --quick), rewritten after every run so a run cut short still leaves what it finished.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    # The repo root first: its `physics` package, not benchmarks/physics.py (the envs import it).
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
from common import RESULTS_DIR, load_average, machine_info, print_table, read_scalars, write_result

from accelrl.config import ConfigError, TrainConfig, apply_overrides
from accelrl.evaluate import evaluate_run
from accelrl.train import train
from configs import load_preset

ENVS = ("ant", "halfcheetah", "hopper", "humanoid", "reacher")


class Target(NamedTuple):
    min_return: float
    within_s: float  # wall seconds from the train() call, compile included


# The targets, by whether the run is on the CPU or an accelerator.
TARGETS = {("ant", "cpu"): Target(1000.0, 20 * 60), ("ant", "accelerator"): Target(6000.0, 5 * 60)}
DEFAULT_MINUTES = {"cpu": 20.0, "accelerator": 5.0}


def run_config(env: str, seed: int, env_steps: int | None, overrides: list[str]) -> TrainConfig:
    """The preset `<env>_vtrace` with the seed, the step budget and any extra overrides."""
    extra = [f"seed={seed}", "eval_episodes=0"]
    if env_steps is not None:
        extra.append(f"total_env_steps={env_steps}")
    return apply_overrides(load_preset(f"{env}_vtrace"), extra + overrides)


def curve_from_events(run_dir: Path, called_at: float) -> list[dict[str, float]]:
    """[{env_steps, wall_s, return, length}] per chunk that ended episodes, from TensorBoard.

    `called_at` is the epoch time of the train() call (event wall times are epoch seconds).
    """
    scalars = read_scalars(run_dir)
    lengths = {step: value for step, value, _ in scalars.get("charts/episodic_length", [])}
    return [
        {
            "env_steps": step,
            "wall_s": round(wall - called_at, 3),
            "return": value,
            "length": lengths.get(step),
        }
        for step, value, wall in scalars.get("charts/episodic_return", [])
    ]


def target_outcome(
    curve: list[dict[str, float]], target: Target | None, budget_s: float | None
) -> dict[str, Any] | None:
    """Whether (and where) a chunk's mean return first reached the target within its clock."""
    if target is None:
        return None
    reached = next(
        (p for p in curve if p["return"] >= target.min_return and p["wall_s"] <= target.within_s),
        None,
    )
    return {
        **target._asdict(),
        "met": reached is not None,
        "reached_at": reached,
        "run_shorter_than_target_clock": budget_s is not None and budget_s < target.within_s,
    }


def parse_minutes(items: list[str], envs: list[str], default: float | None) -> dict[str, float]:
    """Wall budget in minutes per env from `M` (every env not named) and `ENV=M` items;
    ValueError naming the item if one is bad."""
    budgets = {env: default for env in envs}
    for item in sorted(items, key=lambda item: "=" in item):  # `M` first, then `ENV=M`
        env, _, value = item.rpartition("=")
        if env and env not in envs:
            raise ValueError(f"--minutes {item}: {env!r} is not one of --envs {envs}")
        try:
            minutes = float(value)
        except ValueError:
            raise ValueError(f"--minutes {item}: expected M or ENV=M with M in minutes") from None
        if not minutes > 0:
            raise ValueError(f"--minutes {item}: must be positive")
        budgets.update({env: minutes} if env else dict.fromkeys(envs, minutes))
    return budgets


def train_one(
    env: str, seed: int, args: argparse.Namespace, platform: str, minutes: float | None
) -> dict[str, Any]:
    """Train one preset and seed with the real host loop; its curve and summary figures."""
    config = run_config(env, seed, args.env_steps, args.set)
    budget_s = None if minutes is None else minutes * 60
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = (args.keep_runs / f"{env}-seed{seed}") if args.keep_runs else Path(tmp)
        called_at, started = time.time(), time.perf_counter()
        result = train(config, run_dir, max_seconds=budget_s)
        wall = time.perf_counter() - started
        curve = curve_from_events(run_dir, called_at)
        report = (
            evaluate_run(run_dir, args.eval_episodes, seed=seed) if args.eval_episodes else None
        )
    returns = [p["return"] for p in curve]
    target = TARGETS.get((env, "cpu" if platform == "cpu" else "accelerator"))
    return {
        "env": env,
        "preset": f"{env}_vtrace",
        "seed": seed,
        "num_envs": config.env.num_envs,
        "unroll_length": config.agent.unroll_length,
        "iterations_per_chunk": config.iterations_per_chunk,
        "schedule_env_steps": config.total_env_steps,
        "budget_s": budget_s,
        "overrides": list(args.set),
        "env_steps": result.env_steps,
        "compile_s": result.compile_seconds,
        "train_s": result.train_seconds,
        "wall_s": wall,
        "sps_after_compile": result.env_steps / max(result.train_seconds, 1e-9),
        "first_return": returns[0] if returns else None,
        "final_return": returns[-1] if returns else None,
        "final_return_host": result.recent_return,  # the host loop's own value: a cross-check
        "best_return": max(returns) if returns else None,
        "eval_return": report and report.mean_return,
        "eval_return_std": report and report.std_return,
        "eval_episodes": report and report.episodes,
        "target": target_outcome(curve, target, budget_s),
        "curve": curve,
        "load_average": load_average(),
    }


def _target_cell(run: dict[str, Any]) -> str:
    t = run["target"]
    if t is None:
        return "—"
    goal = f">= {t['min_return']:g} within {t['within_s'] / 60:g} min"
    if t["met"]:
        return f"met ({goal}; at {t['reached_at']['wall_s']:.0f} s)"
    short = " (run shorter than the target's clock)" if t["run_shorter_than_target_clock"] else ""
    return f"NOT met ({goal}){short}"


COLUMNS = [
    "env",
    "seed",
    "envs",
    "budget",
    "env steps",
    "compile s",
    "wall s (incl. compile)",
    "train SPS",
    "first return",
    "final return",
    "best return",
    "eval return",
    "target",
]


def table_row(run: dict[str, Any]) -> list[Any]:
    budget = [f"schedule {run['schedule_env_steps']:,} steps"]
    if run["budget_s"] is not None:
        budget.append(f"<= {run['budget_s'] / 60:g} min")
    return [
        run["env"],
        run["seed"],
        run["num_envs"],
        ", ".join(budget),
        run["env_steps"],
        run["compile_s"],
        run["wall_s"],
        run["sps_after_compile"],
        run["first_return"],
        run["final_return"],
        run["best_return"],
        "—"
        if run["eval_return"] is None
        else f"{run['eval_return']:.1f} ± {run['eval_return_std']:.1f}",
        _target_cell(run),
    ]


def plot(runs: list[dict[str, Any]], path: Path) -> Path | None:
    """Return vs env steps (top) and vs wall seconds (bottom), one column per env."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import EngFormatter
    except ImportError:
        return None
    envs = list(dict.fromkeys(r["env"] for r in runs))
    fig, axes = plt.subplots(2, len(envs), figsize=(4 * len(envs), 6.5), squeeze=False)
    for column, env in enumerate(envs):
        top, bottom = axes[0][column], axes[1][column]
        for run in (r for r in runs if r["env"] == env):
            steps = [p["env_steps"] for p in run["curve"]]
            walls = [p["wall_s"] for p in run["curve"]]
            returns = [p["return"] for p in run["curve"]]
            (line,) = top.plot(steps, returns, ".-", label=f"seed {run['seed']}")
            bottom.plot(walls, returns, ".-", color=line.get_color())
            bottom.axvline(run["compile_s"], color=line.get_color(), ls=":", lw=1)
            if run["target"]:
                for ax in (top, bottom):
                    ax.axhline(run["target"]["min_return"], color="red", ls="--", lw=1)
        top.set(title=env, xlabel="env steps", ylabel="mean episodic return", xlim=(0, None))
        bottom.set(
            xlabel="wall s from train() call (dotted: compiled)", ylabel="return", xlim=(0, None)
        )
        top.xaxis.set_major_formatter(EngFormatter())
        top.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def write_all(
    runs: list[dict[str, Any]], args: argparse.Namespace, meta: dict[str, Any], name: str
) -> tuple[Path, Path | None]:
    """Write the JSON, the markdown table and the PNG of the runs so far."""
    payload = {
        "title": "Learning curves of the locomotion presets" + (" (quick)" if args.quick else ""),
        "meta": meta,
        "args": vars(args),
        "compilation_cache_dir": jax.config.jax_compilation_cache_dir,
        "runs": runs,
        "tables": [
            {
                "title": "Return reached",
                "columns": COLUMNS,
                "rows": [table_row(r) for r in runs],
                "note": (
                    "budget: the learning-rate schedule's length (total_env_steps) and the "
                    "wall budget, compile included; a run stops after the first chunk past it. "
                    "Returns are per-chunk means of the episodes that ended in the chunk "
                    "(stochastic training policy); first/final/best over chunks. eval return: "
                    "mean ± std over full episodes of the final policy, deterministic (after "
                    "the run, outside its clock). target: judged on the training curve. "
                    "compile s: set-up and compile of the fused chunk (cold, no persistent "
                    "cache); wall s counts from the train() call to its return. train SPS: env "
                    "steps per second after compile. The curves are in the JSON and the PNG."
                ),
            }
        ],
        "notes": args.notes,
    }
    json_path, _ = write_result(name, payload, args.out_dir)
    return json_path, plot(runs, json_path.with_suffix(".png"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--envs", nargs="+", help=f"envs with a <env>_vtrace preset; default: {' '.join(ENVS)}"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--env-steps", type=int, help="per run; default: the preset's")
    parser.add_argument(
        "--minutes",
        nargs="+",
        default=[],
        metavar="[ENV=]M",
        help="wall budget per run in minutes, compile included, for every env or ENV",
    )
    parser.add_argument(
        "--set", nargs="+", default=[], metavar="KEY=VALUE", help="config overrides for every run"
    )
    parser.add_argument(
        "--eval-episodes",
        type=int,
        default=16,
        help="deterministic episodes of the final policy after each run (0: none)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: reacher, 3 chunks")
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--keep-runs", type=Path, help="keep the run directories here")
    parser.add_argument("--note", dest="notes", action="append", default=[], help="for the .md")
    args = parser.parse_args(argv)
    platform = jax.devices()[0].platform
    if args.quick:
        args.envs = args.envs or ["reacher"]
        args.env_steps = args.env_steps or 38_400  # 3 chunks; episodes first end at 32k
    args.envs = args.envs or list(ENVS)
    default = None if args.quick else DEFAULT_MINUTES["cpu" if platform == "cpu" else "accelerator"]
    try:
        budgets = parse_minutes(args.minutes, args.envs, default)
    except ValueError as error:
        parser.error(str(error))
    if args.eval_episodes < 0:
        parser.error(f"--eval-episodes must be 0 or more, got {args.eval_episodes}")
    if args.env_steps is not None and args.env_steps <= 0:
        parser.error(f"--env-steps must be positive, got {args.env_steps}")
    try:  # bad overrides fail before anything runs
        for env in args.envs:
            run_config(env, args.seeds[0], args.env_steps, args.set)
    except ConfigError as error:
        parser.error(str(error))

    name = "train_curves_quick" if args.quick else "train_curves"
    meta = machine_info()
    print(f"train_curves: {meta['cpu_model']}, {meta['device_count']}x {meta['device_kind']}")
    runs = []
    for env in args.envs:
        for seed in args.seeds:
            print(f"=== {env} seed {seed}", flush=True)
            runs.append(train_one(env, seed, args, platform, budgets[env]))
            json_path, png = write_all(runs, args, meta, name)
    print_table(COLUMNS, [table_row(r) for r in runs])
    print(f"wrote {json_path}, {json_path.with_suffix('.md')} and {png or 'no plot (matplotlib)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
