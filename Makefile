# Two entry points that work on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint typecheck bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch 2.13.0 CPU build first, so nothing pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev,rl,ray]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/gsg leaderboard --scenarios default --policies all,ppo_default,ppo_v1,planner --seeds 3 --out runs/demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/python scripts/typecheck.py

test: lint typecheck
	$(BIN)/python -m pytest -q -n 2

bench: $(STAMP)
	$(BIN)/gsg bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
