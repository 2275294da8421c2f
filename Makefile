# Two entry points that work on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The project's package directories (pyproject.toml's packages and package-dir): their modules'
# bytecode is written at setup (`compileall`), as `pip install` of a wheel does, where an
# editable install writes none; a process with PYTHONDONTWRITEBYTECODE=1 (or a read-only
# checkout) would otherwise compile every interpreted module's source at each start.
PKG_DIRS := gpu_sharing_env gpu_sharing_gym baselines agents configs

.PHONY: setup compiled demo test lint typecheck bench clean browser

$(STAMP): pyproject.toml setup.py
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch 2.13.0 CPU build first, so nothing pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev,rl,ray]'
	$(BIN)/python -m compileall -q $(PKG_DIRS)
	touch $(STAMP)

setup: $(STAMP)

# The compiled hot path (gpu_sharing_env/_compile.py), rebuilt in place after an edit: only the
# modules whose sources changed are recompiled. `pip install -e` above builds them the first time.
# The bytecode of the sources edited since is rewritten too (compileall skips the fresh ones).
compiled: $(STAMP)
	$(BIN)/python setup.py -q build_ext --inplace
	$(BIN)/python -m compileall -q $(PKG_DIRS)

demo: $(STAMP)
	$(BIN)/gsg leaderboard --suite demo --out runs/demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/python scripts/typecheck.py

# Headless Chromium for tests/test_report_browser.py (the HTML report at 1,100 px): installed
# with apt when root; a non-root developer without it gets that test skipped, saying why.
# As root (CI) the test must run: GSG_REQUIRE_BROWSER=1 turns a missing browser into a failure.
# apt waits up to 10 min for another apt's lock (two checkouts' `make test` at once) rather than fail.
APT := apt-get -o DPkg::Lock::Timeout=600
browser:
	@command -v chromium >/dev/null || if [ "$$(id -u)" = 0 ]; then $(APT) update && $(APT) install -y chromium; else echo "make browser: no chromium and not root: tests/test_report_browser.py will be skipped (apt-get install chromium)"; fi

# The suite runs compiled; then the golden, determinism and invariant tests again as pure Python
# (GSG_PURE_PYTHON=1): both modes must give the same bits (tests/test_compiled.py, in the first
# run, compares the two modes' records directly).
PURE_TESTS := tests/test_golden.py tests/test_baselines_equivalence.py tests/test_properties.py \
	tests/test_perf_equivalence.py tests/test_metrics_pass.py

test: lint typecheck browser compiled
	GSG_REQUIRE_BROWSER=$$([ "$$(id -u)" = 0 ] && echo 1) $(BIN)/python -m pytest -q -rs -n 2
	GSG_PURE_PYTHON=1 $(BIN)/python -m pytest -q -n 2 $(PURE_TESTS)

bench: $(STAMP)
	$(BIN)/gsg bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
