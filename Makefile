# Two commands on a fresh clone: `make train` and `make test`. Both create .venv and install
# what they need once (re-runs only reinstall when pyproject.toml changes).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PRESET ?= cartpole_vtrace
ARGS ?=
# JAX's CUDA build where an NVIDIA GPU is present; the CPU build otherwise.
EXTRAS := dev$(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo ,cuda)

.PHONY: setup train test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

train: $(STAMP)
	$(BIN)/accelrl train $(PRESET) $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) runs .pytest_cache
