# Two commands on a fresh clone: `make train` and `make test`. Both create .venv and install
# what they need once (re-runs only reinstall when pyproject.toml changes).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PRESET ?= ant_vtrace
ARGS ?=
# JAX's CUDA build where an NVIDIA GPU is present; the CPU build otherwise.
EXTRAS := dev$(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo ,cuda)

.PHONY: setup train test lint bench clean proto grf peers

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

train: $(STAMP)
	$(BIN)/accelrl train $(PRESET) $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --durations=15 $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# Regenerate the bridge's gRPC modules from accelrl/bridge/bridge.proto (checked in; a test
# fails when they are stale).
proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. \
		accelrl/bridge/bridge.proto

# Google Research Football 2.10.2 from source, for `grf:` bridge actors (Debian/Ubuntu).
# apt-get runs through sudo unless we already are root.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
grf: $(STAMP)
	$(SUDO) apt-get install -y git cmake build-essential libgl1-mesa-dev libsdl2-dev \
		libsdl2-image-dev libsdl2-ttf-dev libsdl2-gfx-dev libboost-all-dev \
		libdirectfb-dev libst-dev mesa-utils xvfb x11vnc python3-dev
	$(BIN)/python -m pip install "gym==0.25.2" psutil six
	# Its engine build script runs `python3 -c "import psutil"`: put the venv first on PATH.
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pip install --no-build-isolation "gfootball==2.10.2"

# The benchmarks' peers (Brax's PPO and physics, MJX, gymnax's CartPole) in a venv of their own,
# beside .venv: Brax 0.14.2's trainers need jax < 0.10. benchmarks/peers.py runs in it. Same pins as the
# `peers` extra in pyproject.toml.
PEERS_VENV := .venv-peers
peers:
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet "jax<0.10" "brax==0.14.2" "mujoco-mjx==3.17.0" \
		"gymnax==1.0.1" six

clean:
	rm -rf $(VENV) $(PEERS_VENV) runs .pytest_cache
