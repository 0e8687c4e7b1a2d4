# make build: a virtualenv with olarespack and the pinned helm binaries, then every app rendered.
# make test:  lint (ruff, mypy) and the test suite, including the real-helm tests; creates what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: build test lint drift gate unit bench clean

build: $(STAMP) $(BIN)/helm
	$(BIN)/olarespack build

test: lint drift gate unit

# charts/ must be exactly what apps/ renders (writes nothing; exit 1 on drift).
drift: $(STAMP)
	$(BIN)/olarespack build --check

# The version gate: an app whose rendered chart changed since the base (the merge base with main, or HEAD
# on main) must carry a higher version. Override the base with `make gate BASE=<ref>`.
gate: $(STAMP) $(BIN)/helm
	$(BIN)/olarespack diff $(if $(BASE),--base $(BASE)) --format markdown > /dev/null

lint: $(STAMP)
	$(BIN)/ruff check src tests tools benchmarks
	$(BIN)/mypy

unit: $(STAMP) $(BIN)/helm
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pytest

# Speed targets, reported as ratios and rates (not timed tests): lint overhead over bare helm, and the
# market server's requests/s on loopback; then a fuzz run of 1000 mutated specs with a fresh seed.
bench: $(STAMP) $(BIN)/helm
	$(BIN)/python benchmarks/bench_lint.py
	$(BIN)/python benchmarks/bench_serve.py --check
	$(BIN)/python benchmarks/bench_publish.py --check
	$(BIN)/python benchmarks/fuzz_specs.py --examples 1000

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

$(BIN)/helm: tools/install_helm.py | $(STAMP)
	$(BIN)/python tools/install_helm.py $(BIN)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
