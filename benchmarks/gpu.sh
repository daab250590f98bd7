#!/usr/bin/env bash
# The accelerator checks as one script: install what is missing, run the tests on the
# accelerator, run the benchmarks at accelerator sizes, and keep the results.
#
#   benchmarks/gpu.sh --prepare   # on a host with network: put the wheels that the GPU image
#                                 # lacks (Python 3.12, x86-64) into .whl/ (git-ignored)
#   benchmarks/gpu.sh [STEP...]   # on the GPU machine; on a CPU it is a dry run at small sizes
#
# STEP is any of: tests physics profile profile_matmul train ant_training fused_loop bridge
# (default: all, in that order of priority), so a short device lease can run them over several
# calls.
#
# Results go to benchmarks/results/<name>_gpu.{json,md} (benchmarks/common.py adds the
# platform suffix) and logs to benchmarks/results/gpu_logs/ (a CPU dry run writes to
# $ACCELRL_BENCH_RESULTS, default /tmp/accelrl-gpu-dry-run); when $OUT is set (the device
# tool's output folder) they are also packed into $OUT/gpu_results.tar.gz. Every step has its
# own time limit and a failing step does not stop the rest; the exit status says whether all
# passed. Environment: PYTHON (interpreter, default .venv/bin/python or python3),
# GPU_TEST_SECONDS / GPU_BENCH_SECONDS / GPU_BRIDGE_SECONDS (per-step limits),
# GPU_TRAIN_MINUTES (Ant training).
set -uo pipefail
cd "$(dirname "$0")/.."

# Packages the GPU image (see the device tool's KINDS.md) does not have, pinned to what the
# CPU suite runs with. Pure-Python ones are built as wheels here; binary ones are downloaded
# for the device's Python.
PURE_WHEELS="rlax==0.1.9 distrax==0.1.9 tfp-nightly==0.26.0.dev20261027 decorator==5.3.1 gast==0.7.0
  tensorboardX==2.6.5 omegaconf==2.4.0 gymnasium==1.4.0
  farama-notifications dm-env==1.6"
BINARY_WHEELS="mujoco==4.0.1 mujoco-core==4.0.1 mujoco-studio==4.0.1 dm-tree==0.1.10 glfw==2.11.0 pyopengl==3.1.10
  ale-py==0.12.1 grpcio==1.85.3 protobuf==7.36.2"

if [[ "${1:-}" == "--prepare" ]]; then
  mkdir -p .whl
  grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
  python3 -m pip wheel --quiet --no-deps -w .whl $PURE_WHEELS
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl $BINARY_WHEELS
  du -sh .whl
  exit 0
fi

if [[ -n "${PYTHON:-}" ]]; then PY=$PYTHON
elif [[ -x .venv/bin/python ]]; then PY=.venv/bin/python
else PY=python3; fi
if ! "$PY" -c 'import rlax, tensorboardX, omegaconf, mujoco, gymnasium' 2>/dev/null \
  && compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/accelrl-site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/accelrl-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

PLATFORM=$("$PY" -c 'import jax; print(jax.devices()[0].platform)') || exit 1
case $PLATFORM in gpu) TEST_PLATFORMS=cuda ;; *) TEST_PLATFORMS=$PLATFORM ;; esac
# a CPU dry run must not overwrite the CPU figures that the benchmarks keep in results/
[[ "$PLATFORM" == "cpu" ]] && export ACCELRL_BENCH_RESULTS=${ACCELRL_BENCH_RESULTS:-/tmp/accelrl-gpu-dry-run}
RESULTS=${ACCELRL_BENCH_RESULTS:-benchmarks/results}
LOGS=$RESULTS/gpu_logs
mkdir -p "$LOGS"
"$PY" -c 'import jax; print("devices:", jax.devices())' | tee "$LOGS/devices.txt"
if [[ "$PLATFORM" == "cpu" ]]; then  # dry run: the same steps at small sizes
  PHYSICS_BATCHES="64 512"; PROFILE_BATCH=256; FUSED_BATCHES="64"; ANT_BATCHES="16"; PONG_POINTS="1:8:2"
  TEST_SELECT="tests/physics/test_precision.py tests/agents"; TEST_WORKERS=2
else
  PHYSICS_BATCHES="8192 65536 524288"; PROFILE_BATCH=65536; FUSED_BATCHES="2048 16384 65536"
  ANT_BATCHES="32768"; PONG_POINTS="1:16:2 8:16:2"
  TEST_SELECT="tests/physics/test_precision.py tests/physics/test_dynamics_vs_mujoco.py
    tests/physics/test_contacts_vs_mujoco.py tests/physics/test_physics_laws.py tests/agents"
  TEST_WORKERS=8
fi
TEST_SECONDS=${GPU_TEST_SECONDS:-120}
BENCH_SECONDS=${GPU_BENCH_SECONDS:-100}
# the bridge starts a server (and compiles) per point: 100 s ended the first H200 run's
# before its Pong points
BRIDGE_SECONDS=${GPU_BRIDGE_SECONDS:-200}
# Ant training budget, compile included (the issue's target: return >= 6000 within 5 min).
TRAIN_MINUTES=${GPU_TRAIN_MINUTES:-5}
ALL_STEPS=(tests physics profile profile_matmul train ant_training fused_loop bridge)
STEPS=("$@")
((${#STEPS[@]})) || STEPS=("${ALL_STEPS[@]}")

failed=()
step() {  # step NAME SECONDS COMMAND...: run with a limit, log to $LOGS/NAME.log
  local name=$1 seconds=$2; shift 2
  echo "=== $name (limit ${seconds}s)"
  local started=$SECONDS
  timeout --kill-after=10 "$seconds" "$@" >"$LOGS/$name.log" 2>&1
  local code=$?
  tail -n 25 "$LOGS/$name.log"
  echo "=== $name: exit $code after $((SECONDS - started)) s"
  [[ $code -eq 0 ]] || failed+=("$name")
}

for name in "${STEPS[@]}"; do
  case $name in
    # correctness on the accelerator (float32 products, MuJoCo agreement), one process per
    # worker sharing the GPU: no worker may grab most of its memory up front. The tests run on
    # the CPU unless JAX_PLATFORMS says otherwise (tests/conftest.py).
    tests) JAX_PLATFORMS=$TEST_PLATFORMS XLA_PYTHON_CLIENT_PREALLOCATE=false step tests \
      "$TEST_SECONDS" "$PY" -m pytest -q -p no:cacheprovider -n "$TEST_WORKERS" -m "not slow" \
      $TEST_SELECT ;;
    physics) step physics "$BENCH_SECONDS" "$PY" benchmarks/physics.py \
      --batches $PHYSICS_BATCHES --repeats 2 --min-seconds 0.5 ;;
    # where the step's device time goes, per kernel (the candidates for the next speed-up)
    profile) step profile "$BENCH_SECONDS" "$PY" benchmarks/physics_profile.py \
      --batch "$PROFILE_BATCH" --calls 5 --top 40 ;;
    # the same with J^T D J as a batched matrix product (the candidate for the largest kernel)
    profile_matmul) step profile_matmul "$BENCH_SECONDS" "$PY" benchmarks/physics_profile.py \
      --batch "$PROFILE_BATCH" --calls 5 --top 40 --hessian-form matmul ;;
    train) step train $((TRAIN_MINUTES * 60 + 45)) "$PY" benchmarks/train_curves.py --envs ant \
      --minutes "$TRAIN_MINUTES" --eval-episodes 0 ;;
    ant_training) step ant_training "$BENCH_SECONDS" "$PY" benchmarks/ant_training.py \
      --batches $ANT_BATCHES --repeats 2 --min-seconds 1 ;;
    fused_loop) step fused_loop "$BENCH_SECONDS" "$PY" benchmarks/fused_loop.py \
      --batches $FUSED_BATCHES --seeds 0 --repeats 2 --min-seconds 1 ;;
    # the bridge with inference on the accelerator: Pong acting through it against Pong alone
    bridge) step bridge "$BRIDGE_SECONDS" "$PY" benchmarks/bridge.py --quick \
      --pong-points $PONG_POINTS ;;
    *) echo "unknown step $name (steps: ${ALL_STEPS[*]})"; exit 2 ;;
  esac
done

if [[ -n "${OUT:-}" ]]; then
  tar -czf "$OUT/gpu_results.tar.gz" "$LOGS" $(ls "$RESULTS"/*_"$PLATFORM".* 2>/dev/null)
  echo "packed results into $OUT/gpu_results.tar.gz (unpack at the repo root, then" \
    "benchmarks/run_all.py --summary)"
fi
if ((${#failed[@]})); then
  echo "failed steps: ${failed[*]}"
  exit 1
fi
echo "all steps passed"
