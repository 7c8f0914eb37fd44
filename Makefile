# reconsume — the two commands a new user needs are `make demo` and `make test`.

PYTHON ?= python3
VENV ?= .venv
CACHE_DIR ?= $(HOME)/.cache/reconsume
export PIP_CACHE_DIR ?= $(CACHE_DIR)/pip
export PIP_DISABLE_PIP_VERSION_CHECK = 1

BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
# The compat tier's npm project (ali-ons); installed from its lockfile, re-installed when that
# changes. Without npm this only warns: the compat test then fails in CI and skips elsewhere.
ALI_ONS := tests/compat/ali_ons
ALI_ONS_STAMP := $(ALI_ONS)/node_modules/.installed-$(shell cat $(ALI_ONS)/package-lock.json | cksum | cut -d' ' -f1)

.PHONY: demo test lint bench venv compat-deps clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -e ".[test,lint,fast]"
	@rm -f $(VENV)/.installed-*
	@touch $@

venv: $(STAMP)

$(ALI_ONS_STAMP): $(ALI_ONS)/package.json $(ALI_ONS)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(ALI_ONS) && npm ci --cache "$(CACHE_DIR)/npm" --prefer-offline --no-audit --no-fund \
			--loglevel=error \
		&& touch node_modules/$(notdir $@); \
	else \
		echo "make: npm not found, not installing $(ALI_ONS) (its compat test needs node and npm)"; \
	fi

## compat-deps: the npm packages of the compat tier (ali-ons), cached under $(CACHE_DIR)/npm
compat-deps: $(ALI_ONS_STAMP)

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
test: lint compat-deps
	$(BIN)/pytest $(PYTEST_ARGS)

## bench: run the benchmarks and rewrite bench/RESULTS.md
bench: $(STAMP)
	$(BIN)/python -m bench.run --write bench/RESULTS.md

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis $(ALI_ONS)/node_modules
