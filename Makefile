# Navi — `make help` lists the targets.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.DEFAULT_GOAL := help

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@rm -f $(VENV)/.installed-*; touch $(STAMP)

install: $(STAMP) ## Create .venv and install the service with its dev tools

run: install ## Start the service (embedded PostgreSQL unless DATABASE_URL is set) on :8000
	$(BIN)/python -m app.cli serve

migrate: install ## Apply migrations to head
	$(BIN)/python -m app.cli migrate head

test: install ## Run the test suite (embedded PostgreSQL, or TEST_DATABASE_URL)
	$(BIN)/python -m pytest

test-unit: install ## Only the tests that need no database
	$(BIN)/python -m pytest tests/unit

lint: install ## ruff check + format check
	$(BIN)/ruff check app tests alembic bench scripts
	$(BIN)/ruff format --check app tests alembic bench scripts

format: install ## Apply ruff formatting and safe fixes
	$(BIN)/ruff check --fix app tests alembic bench scripts
	$(BIN)/ruff format app tests alembic bench scripts

typecheck: install ## mypy over app/
	$(BIN)/mypy

clean: ## Remove caches (keeps .venv and .navi data)
	rm -rf .pytest_cache .mypy_cache .ruff_cache

.PHONY: help install run migrate test test-unit lint format typecheck clean
