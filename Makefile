# reconsume — the two commands a new user needs are `make demo` and `make test`.

PYTHON ?= python3
VENV ?= .venv
CACHE_DIR ?= $(HOME)/.cache/reconsume
export PIP_CACHE_DIR ?= $(CACHE_DIR)/pip
export PIP_DISABLE_PIP_VERSION_CHECK = 1

BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=

.PHONY: demo test lint bench venv clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -e ".[test,lint,fast]"
	@rm -f $(VENV)/.installed-*
	@touch $@

venv: $(STAMP)

## demo: run the most complete thing reconsume can do on this machine, no cluster needed
demo: $(STAMP)
	$(BIN)/reconsume demo

## lint: ruff, mypy --strict and the import-linter layer contracts
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## test: lint, then every test tier
test: lint
	$(BIN)/pytest $(PYTEST_ARGS)

## bench: run the benchmarks and rewrite bench/RESULTS.md
bench: $(STAMP)
	$(BIN)/python -m bench.run --write bench/RESULTS.md

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
