"""`accelrl` command line: train, eval, presets.

    accelrl train cartpole_vtrace agent.learning_rate=1e-3 env.num_envs=512 --run-dir DIR
    accelrl train --resume --run-dir DIR
    accelrl eval DIR --episodes 32 [--render out.gif|out.mp4|out.html]
    accelrl serve cartpole_vtrace_bridge --bind 0.0.0.0 --port 50051   (bridge learner)
    accelrl actor --server HOST:50051 --env gymnasium:CartPole-v1 --num-envs 16

Configuration errors (unknown preset or key, wrong type) exit with code 2 before anything is
created on disk.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from accelrl.config import ConfigError, TrainConfig, apply_overrides, load_config


def _parser() -> argparse.ArgumentParser:
    from configs import preset_names

    presets = ", ".join(preset_names())
    parser = argparse.ArgumentParser(prog="accelrl", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser(
        "train",
        help="train a preset",
        description="Train a preset, with optional key=value overrides of its config.",
        epilog=f"presets: {presets}",
    )
    train.add_argument(
        "preset",
        nargs="?",
        help=f"one of: {presets}; or a .py file of your own defining config() -> TrainConfig",
    )
    train.add_argument(
        "overrides", nargs="*", help="config overrides, e.g. agent.learning_rate=1e-3"
    )
    train.add_argument("--run-dir", type=Path, help="default: runs/<preset>-<timestamp>")
    train.add_argument(
        "--resume", action="store_true", help="continue --run-dir from its latest checkpoint"
    )

    evaluate = commands.add_parser("eval", help="evaluate a run's latest checkpoint")
    evaluate.add_argument("run_dir", type=Path)
    evaluate.add_argument("--episodes", type=int, default=10)
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument(
        "--render",
        type=Path,
        metavar="OUT",
        help="also draw episodes: OUT.gif or OUT.mp4 (MJCF envs through MuJoCo's renderer, "
        "bridge runs through the env's own rgb_array frames), OUT.html (MJCF envs: an "
        "interactive 3D viewer)",
    )
    evaluate.add_argument(
        "--render-episodes", type=int, default=1, help="episodes to draw (default 1)"
    )

    serve = commands.add_parser(
        "serve",
        help="serve a bridge preset's learner to remote actors",
        description="Run the bridge learner for a preset; actors connect with `accelrl actor`.",
        epilog=f"presets: {presets}",
    )
    serve.add_argument("preset", nargs="?", help="a bridge preset (sets bridge.env)")
    serve.add_argument("overrides", nargs="*", help="config overrides")
    serve.add_argument("--bind", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=50051, help="0 picks a free port")
    serve.add_argument("--run-dir", type=Path, help="default: runs/<preset>-<timestamp>")
    serve.add_argument("--resume", action="store_true", help="continue --run-dir")
    commands.add_parser(
        "actor",
        help="step CPU envs for a bridge learner (see `accelrl actor --help`)",
        add_help=False,
    )

    commands.add_parser("presets", help="list the presets")
    return parser


def _port(text: str) -> int:
    from accelrl.bridge.address import parse_port

    try:
        return parse_port(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _resolve_train(args: argparse.Namespace) -> tuple[TrainConfig, Path]:
    """The config and run directory that `accelrl train` will use; touches nothing on disk."""
    from configs import load_preset

    overrides = list(args.overrides)
    if args.preset and "=" in args.preset:
        overrides.insert(0, args.preset)
        args.preset = None
    if args.resume:
        if args.run_dir is None:
            raise ConfigError("--resume needs --run-dir")
        return apply_overrides(load_config(args.run_dir / "config.yaml"), overrides), args.run_dir
    if not args.preset:
        raise ConfigError("name a preset (see `accelrl presets`)")
    config = apply_overrides(load_preset(args.preset), overrides)
    name = Path(args.preset).stem
    run_dir = args.run_dir or Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    return config, run_dir


def _enable_compilation_cache() -> None:
    """Reuse compiled training steps across runs (XLA's persistent cache), unless the user
    already chose a cache directory or disabled it with ACCELRL_COMPILATION_CACHE=0."""
    if os.environ.get("ACCELRL_COMPILATION_CACHE", "1") == "0":
        return
    import jax

    if jax.config.jax_compilation_cache_dir is None:
        cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "accelrl" / "xla"
        jax.config.update("jax_compilation_cache_dir", str(cache))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["actor"]:  # JAX-free: the actor has its own parser
        from accelrl.bridge.actor import main as actor_main

        return actor_main(argv[1:])
    parser = _parser()
    # Overrides may come after options (`--run-dir D a.b=1`): collect the stray key=values.
    args, extra = parser.parse_known_args(argv)
    strays = [x for x in extra if x.startswith("-") or "=" not in x]
    if strays or (extra and args.command not in ("train", "serve")):
        parser.error(f"unrecognized arguments: {' '.join(strays or extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    try:
        if args.command == "presets":
            from configs import preset_names

            print("\n".join(preset_names()))
            return 0
        if args.command == "serve":
            return _serve(args)
        if args.command == "train":
            config, run_dir = _resolve_train(args)
            _enable_compilation_cache()
            if config.bridge.env:
                from accelrl.bridge.local import LocalActorsFailed, train_bridge
                from accelrl.train import TrainingDiverged

                try:
                    server = train_bridge(config, run_dir, resume=args.resume)
                except (TrainingDiverged, LocalActorsFailed) as error:
                    print(f"accelrl: error: {error}", file=sys.stderr)
                    return 1
                print(f"run directory: {run_dir} ({int(server.state.env_steps):,} env steps)")
                return 0
            from accelrl.train import TrainingDiverged, train

            try:
                result = train(config, run_dir, resume=args.resume)
            except TrainingDiverged as error:
                print(f"accelrl: error: {error}", file=sys.stderr)
                return 1
            if config.eval_episodes > 0:
                from accelrl.evaluate import evaluate_run

                report = evaluate_run(run_dir, config.eval_episodes, seed=config.seed)
                print(f"eval: mean return {report.mean_return:.2f} over {report.episodes} episodes")
            print(f"run directory: {run_dir} ({result.env_steps:,} env steps)")
            return 0
        if args.command == "eval":
            from accelrl.evaluate import evaluate_run
            from accelrl.render import RenderBackendError

            _enable_compilation_cache()
            try:
                report = evaluate_run(
                    args.run_dir,
                    args.episodes,
                    seed=args.seed,
                    render=args.render,
                    render_episodes=args.render_episodes,
                )
            except (RenderBackendError, FileNotFoundError) as error:  # FileNotFound: no checkpoint
                print(f"accelrl: error: {error}", file=sys.stderr)
                return 1
            print(
                f"mean return {report.mean_return:.2f} +- {report.std_return:.2f} over "
                f"{report.episodes} episodes (written to {args.run_dir / 'eval.json'})"
            )
            if args.render:
                print(f"rendered {args.render_episodes} episode(s) to {args.render}")
            return 0
    except ConfigError as error:
        print(f"accelrl: error: {error}", file=sys.stderr)
        return 2
    return 2


def _serve(args: argparse.Namespace) -> int:
    config, run_dir = _resolve_train(args)
    if not config.bridge.env:
        raise ConfigError("serve needs a bridge preset (one that sets bridge.env)")
    from accelrl.bridge.address import AddressUnavailable
    from accelrl.bridge.server import run_server

    def listening(host: str, port: int) -> None:
        print(f"listening on {host}:{port}", flush=True)

    try:
        server = run_server(
            config, run_dir, args.bind, args.port, resume=args.resume, on_listening=listening
        )
    except AddressUnavailable as error:
        print(f"accelrl: error: {error}", file=sys.stderr)
        return 1
    print(f"run directory: {run_dir} ({int(server.state.env_steps):,} env steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
