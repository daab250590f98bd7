"""Learner updates with convolutional torsos: agents.conv's convolution against lax's.

    .venv/bin/python benchmarks/conv_learner.py           # full run
    .venv/bin/python benchmarks/conv_learner.py --quick   # one configuration

Writes benchmarks/results/conv_learner.json and .md (conv_learner_quick.* with --quick).

One V-trace update of a bridge preset (its unrolls x unroll length of frames, observation and
next observation through the torso, backward pass, Adam) on zero-filled batches, timed after
compile: with the torsos as built (agents/conv.py's convolution) and, in the same run, the same
torso on `lax.conv_general_dilated` (flax's default). Every training loop runs its update
inside a scan, where XLA:CPU computes lax's kernel gradients on a slow path
(jax-ml/jax#12868); the ratio shows what agents/conv.py recovers.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    # the repo root before benchmarks/, whose physics.py would shadow the physics package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import numpy as np
from common import load_average, machine_info, print_table, timer, write_result
from jax import lax

import physics  # noqa: F401  (accelrl's XLA:CPU flags, as `accelrl train` runs with them)
from accelrl.bridge.codec import EnvSpec
from accelrl.bridge.vtrace_learner import VTraceBridgeLearner
from accelrl.config import apply_overrides
from agents.torsos import ImpalaCNN, NatureCNN
from configs import load_preset

# (preset, torso, the env's per-step observation shape, actions, overrides)
CASES = [
    ("pong_vtrace_bridge", "nature_cnn", (84, 84), 6, []),
    ("grf_vtrace_bridge", "nature_cnn", (72, 96, 4), 19, []),
    # a quarter of the preset's batch: lax's update takes ~3.5 min at the full one
    ("pong_vtrace_bridge", "impala_cnn", (84, 84), 6, ["bridge.batch_unrolls=8"]),
]
PEERS = {
    "nature_cnn": f"{Path(__file__).stem}:lax_nature_cnn",
    "impala_cnn": f"{Path(__file__).stem}:lax_impala_cnn",
}


def lax_nature_cnn() -> NatureCNN:
    return NatureCNN(conv=lax.conv_general_dilated)


def lax_impala_cnn() -> ImpalaCNN:
    return ImpalaCNN(conv=lax.conv_general_dilated)


def _batch(learner: VTraceBridgeLearner) -> dict[str, np.ndarray]:
    b, t = learner.rows_per_step, learner.sequence_length
    obs = np.zeros((b, t, *learner.agent.obs_shape), np.uint8)
    flags = np.zeros((b, t), bool)
    return {
        "observation": obs,
        "next_observation": obs,
        "is_first": flags,
        "action": np.zeros((b, t), np.int32),
        "behaviour_log_prob": np.zeros((b, t), np.float32),
        "reward": np.zeros((b, t), np.float32),
        "terminated": flags,
        "truncated": flags,
        "start_carry": jax.device_get(learner.agent.initial_carry(b)),
    }


def time_update(
    preset: str, torso: str, shape: tuple, actions: int, overrides: list[str], repeats: int
) -> dict:
    """Compile seconds and the best of `repeats` update seconds of `preset` with `torso`."""
    config = apply_overrides(load_preset(preset), [f"agent.torso={torso}", *overrides])
    learner = VTraceBridgeLearner(config, EnvSpec(shape, "uint8", actions))
    state = learner.init_state(0)
    with timer() as compile_t:
        learner.warm_up(state)
    batch = _batch(learner)
    state, _ = learner.step(state, batch)  # the first call's one-off costs
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        state, _ = learner.step(state, batch)
        best = min(best, time.perf_counter() - start)
    frames = learner.rows_per_step * learner.sequence_length
    return {"compile_s": compile_t["wall"], "update_s": best, "frames": frames}


COLUMNS = [
    "preset",
    "torso",
    "frames/update",
    "compile s",
    "update s",
    "lax update s",
    "lax / ours",
    "frames/s",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the first configuration only")
    parser.add_argument("--repeats", type=int, default=3, help="timed updates of ours")
    args = parser.parse_args()
    meta = machine_info()
    rows = []
    for preset, torso, shape, actions, overrides in CASES[:1] if args.quick else CASES:
        ours = time_update(preset, torso, shape, actions, overrides, args.repeats)
        # lax's: one timed update (10-20x longer, and steady)
        peer = time_update(preset, PEERS[torso], shape, actions, overrides, 1)
        rows.append(
            [
                preset,
                torso,
                ours["frames"],
                round(ours["compile_s"], 1),
                round(ours["update_s"], 2),
                round(peer["update_s"], 2),
                round(peer["update_s"] / ours["update_s"], 1),
                round(ours["frames"] / ours["update_s"]),
            ]
        )
        print_table(COLUMNS, rows[-1:])
    payload = {
        "title": "V-trace learner update with convolutional torsos: agents.conv vs lax",
        "meta": meta,
        "quick": args.quick,
        "tables": [
            {
                "title": "One update (zero-filled batch, after compile)",
                "columns": COLUMNS,
                "rows": rows,
                "note": "update s: best of the repeats (lax's: one update after a first "
                "call); lax: the same torso on lax.conv_general_dilated; frames/s: frames "
                "per update / update s. The IMPALA row runs a quarter of the preset's batch.",
            }
        ],
        "notes": [f"load average at end: {load_average()}"],
    }
    json_path, _ = write_result("conv_learner_quick" if args.quick else "conv_learner", payload)
    print(f"wrote {json_path}")


if __name__ == "__main__":
    main()
