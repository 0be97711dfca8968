# Navi — `make help` lists the targets.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.DEFAULT_GOAL := help

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}'

# The first install (a minute or two) shows pip's own progress; a later one, after
# pyproject.toml changed, is quiet. Either way it says how long it took.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@start=$$(date +%s); quiet=-q; \
	if ls $(VENV)/.installed-* >/dev/null 2>&1; then \
	  echo "make: pyproject.toml changed: updating $(VENV)"; \
	else \
	  quiet=; echo "make: first start: installing Navi and its dependencies into $(VENV) (a minute or two)"; \
	fi; \
	$(BIN)/python -m pip install $$quiet --upgrade pip && \
	$(BIN)/python -m pip install $$quiet -e '.[dev,local,otel]' && \
	echo "make: $(VENV) installed in $$(( $$(date +%s) - start )) s"
	@rm -f $(VENV)/.installed-*; touch $(STAMP)

install: $(STAMP) ## Create .venv and install the service with its dev tools

# One worker process per core by default (at most 64, the setting's range): Python runs one
# request at a time per process. WEB_CONCURRENCY=1 make run for a single process.
run: install ## Start the service (embedded PostgreSQL unless DATABASE_URL is set) on :8000; one worker per core unless WEB_CONCURRENCY is set
	WEB_CONCURRENCY=$${WEB_CONCURRENCY:-$$(n=$$(nproc 2>/dev/null || echo 1); echo $$(( n > 64 ? 64 : n )))} \
		$(BIN)/python -m app.cli serve

migrate: install ## Apply migrations to head
	$(BIN)/python -m app.cli migrate head

test: install ## Run the test suite (embedded PostgreSQL, or TEST_DATABASE_URL)
	$(BIN)/python -m pytest

test-clients: install ## The Python and TypeScript clients against a live service (clients/): their tests, the framework adapters with openai-agents and langgraph, the TS types regenerated from the spec and the committed dist/ rebuilt (a diff fails)
	$(BIN)/python -m pip install -q -e './clients/python[test,openai-agents,langgraph]'
	cd clients/python && ../../$(BIN)/python -m pytest -q
	cd clients/typescript && npm ci --no-audit --no-fund && npm run check-dist && npm run check-gen && npm test && npm run test:live:service

# The packages of this checkout, into dist/ (gitignored): each Python sdist, and its wheel
# built from that sdist (so a file the sdist forgets fails here); the TypeScript client's
# `npm pack` tarball (prepack builds its dist/ again from src/). One version per package:
# app/__init__.py, clients/python/src/navi_client/_core.py, clients/typescript/package.json.
dist: install ## Build the service's sdist + wheel, the Python client's sdist + wheel and the TypeScript client's npm tarball into dist/
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/python -m build --outdir dist clients/python
	cd clients/typescript && npm ci --no-audit --no-fund && npm pack --pack-destination ../../dist
	@ls -l dist

# A fresh clone of this repository's HEAD in a temp folder: every install command of the
# READMEs and the packages of `make dist` installed into fresh venvs / npm projects, then
# each README quickstart run against a live service (fake Ollama) from that clone.
fresh-clone-check: install ## Clone HEAD into a temp folder, install the clients as the READMEs say and from make dist, run their quickstarts against a live service
	bash scripts/fresh_clone_check.sh

test-rebalance: install ## A third Citus worker joins, then one is drained and removed, under API load (a cluster of its own on 5470-5473; root; ARGS="-k …")
	NAVI_REBALANCE_TEST=1 $(BIN)/python -m pytest -s tests/citus/test_rebalance.py $(ARGS)

test-unit: install ## Only the tests that need no database
	$(BIN)/python -m pytest tests/unit

spec-check: install ## schemathesis over /schema/openapi.json against a running service, as a user and as an admin (ARGS="--max-examples 25")
	$(BIN)/python scripts/spec_check.py $(ARGS)

# Dead code in app/ (vulture): at 60 % it reports unused functions, classes, methods,
# attributes and variables (and, at 90-100 %, imports, arguments, unreachable code). Route
# handlers and SQLAlchemy event listeners are called through their decorator, never by
# name: --ignore-decorators. The few other names a framework reads, or that only code
# outside app/ uses, are in scripts/vulture_whitelist.py, each with the reason.
lint: install ## ruff check + format check + import contracts (lint-imports) + dead code (vulture)
	$(BIN)/ruff check app tests alembic bench scripts
	$(BIN)/ruff format --check app tests alembic bench scripts
	$(BIN)/lint-imports
	$(BIN)/vulture app scripts/vulture_whitelist.py --min-confidence 60 \
		--ignore-decorators "@get,@post,@put,@patch,@delete,@head,@route,@websocket,@asgi,@event.listens_for"

format: install ## Apply ruff formatting and safe fixes
	$(BIN)/ruff check --fix app tests alembic bench scripts
	$(BIN)/ruff format app tests alembic bench scripts

reembed: install ## Align vector columns to the embedder and embed rows without a vector (ARGS="--batch-size 64")
	$(BIN)/python -m app.cli reembed $(ARGS)

typecheck: install ## mypy over app/
	$(BIN)/mypy

bench-turns: install ## POST /sessions/{id}/turns: overhead over the (fake) model, TTFT, turns/s, with and without compression (ARGS="--turns 150")
	$(BIN)/python bench/bench_turns.py $(ARGS)

bench-rebalance: install ## A Citus worker added, then one drained and removed, under API load with 200 users × 2,000 messages + facts loaded: move durations, p50/p99 before vs during, errors (root; ARGS="--seed-users 50")
	$(BIN)/python bench/bench_rebalance.py $(ARGS)

bench-indexers: install ## Indexers apart from the web workers on the Citus cluster: one backlog loaded through the API (nothing embedded), then 1, then 2 `navi indexer` processes (INDEXER_THREADS=1) against the coordinator: segments/s, 2 ÷ 1, CPU per segment (indexers, PostgreSQL), nothing embedded twice (scripts/provision-citus.sh first; ARGS="--embedder both", "--url postgresql+psycopg://…")
	$(BIN)/python bench/bench_indexers.py $(ARGS)

bench-slow-model: install ## GET /sessions p50/p99 idle, then during 20 post-turn compressions whose summaries take 30 s (the service as make run starts it; ARGS="--compressions 5 --summary-seconds 5")
	$(BIN)/python bench/bench_slow_model.py $(ARGS)

bench-compression: install ## Plan/compress a 2,000-message session; compressions per 1,000 turns (ARGS="--no-db")
	$(BIN)/python bench/bench_compression.py $(ARGS)

bench-sessions: install ## Session store at production scale: list/search/matches/history/append vs naive (DATABASE_URL=… or embedded; ARGS="--scale 0.05")
	$(BIN)/python bench/bench_sessions.py $(ARGS)

bench-console: install ## Console pages at production scale (the bench-sessions dataset): server p50/p95 vs the JSON API (ARGS="--scale 0.05")
	$(BIN)/python bench/bench_console.py $(ARGS)

index-sessions: install ## Index every idle session's messages the raw index lacks, with a progress bar (ARGS="--older-than 0 --user ID")
	$(BIN)/python -m app.cli index-sessions $(ARGS)

backfill: install ## Embed the facts stored without an embedding (ARGS="--batch-size 8 --pause 2.0 --limit N")
	$(BIN)/python -m app.cli backfill $(ARGS)

bench-facts: install ## search_facts p50/p95 at 100k facts over 1k users vs an ILIKE scan (DATABASE_URL=… or embedded; ARGS="--users 100")
	$(BIN)/python bench/bench_facts.py $(ARGS)

bench-context-modes: install ## compress vs rolling context on LoCoMo dev: LLM calls and prompt size per turn (ARGS="--conversations 2")
	$(BIN)/python bench/bench_context_modes.py $(ARGS)

bench-locomo: install ## LoCoMo dev evidence recall@1500/@4000 of memory_search vs BM25, best window on/off (ARGS="--conversations 2 --embedder fake")
	$(BIN)/python bench/bench_locomo.py $(ARGS)

bench-lme: install ## LongMemEval-S dev: session recall_any/all@5,10 and has_answer-turn recall@1500/@4000 of memory_search vs BM25 over sessions and turns, one session per haystack session, live indexer (ARGS="--questions 5 --embedder fake")
	$(BIN)/python bench/bench_lme.py $(ARGS)

bench-locomo-replay: install ## Replay raw ranking + rendering offline over the last bench-locomo ingest, in seconds (ARGS="--k 10 --conversations 1")
	$(BIN)/python bench/locomo_replay.py $(ARGS)

bench-breadcrumbs: install ## Share of a compressed agent session's literals memory_search top-5 shows (ARGS="--episodes 60")
	$(BIN)/python bench/bench_breadcrumbs.py $(ARGS)

bench-search: install ## memory_search p50/p95 at 100k then 300k chunks + 100k facts vs a sequential scan, in process (no server, no jobs) (ARGS="--sizes 100000")
	$(BIN)/python bench/bench_search.py $(ARGS)

bench-scale: install ## memory_search + session list p50/p95 and the HNSW build: one PostgreSQL vs a Citus cluster, at 2 user counts, 200 then 4x as many (ARGS="--sizes 20000 --users-factor 2")
	$(BIN)/python bench/bench_scale.py $(ARGS)

bench-search-ab: install ## A/B of memory_search between two checkouts, taking turns (ARGS="/tmp/base . --queries 300")
	$(BIN)/python bench/ab_search.py $(ARGS)

bench-load: install ## The hot paths under wrk (append 1/8, session list, history, memory_search, mixed) against `navi serve` as make run starts it (jobs and indexer on): req/s, p50/p90/p99, CPU per request server tree/indexer/PostgreSQL/wrk; installs wrk when missing (ARGS="--paths list,history --ab fa40a74 --rounds 2", or "--no-jobs", or "--py-spy /tmp/wrk")
	$(BIN)/python bench/bench_wrk.py $(ARGS)

bench-load-py: install ## The mixed load from Python clients (per-operation latencies, py-spy of the window): N clients × S s, each its own user (ARGS="--clients 16 --seconds 60 --workers 2 --py-spy /tmp/load.txt")
	$(BIN)/python bench/bench_load.py $(ARGS)

bench-freshness: install ## Append → findable by memory_search under the mixed load, p50/p95/max; append and memory_search with the live indexer on vs off, on `navi serve` as make run starts it (ARGS="--clients 8 --seconds 20 --no-jobs")
	$(BIN)/python bench/bench_freshness.py $(ARGS)

bench-embed-cost: install ## Tokens embedded per appended message by the live index, this checkout vs --ab COMMIT (default be065d7) in one run, the fake Ollama counting: N sessions × T turns appended 1 per request every --pace s, until the vectors caught up (ARGS="--sessions 4 --turns 4 --ab fa40a74 --ab be065d7")
	$(BIN)/python bench/bench_embed_cost.py $(ARGS)

bench-burst: install ## Issue 41 from outside, on `navi serve` as make run starts it: a LongMemEval burst (one append per new session, 8 clients) → words indexed per session, recall 10 s after (words only) and after the drain vs BM25; appends under load → a probe found by its word from another session, its vectors after its session went quiet, the drain at the embedder's rate (ARGS="--questions 2 --seconds 10 --embedder fake", "--parts load", "--commit HEAD")
	$(BIN)/python bench/bench_burst.py $(ARGS)

soak: install ## Fault soak (issue 45): users' clients write, forget, compact and search while workers, the indexer, PostgreSQL and the model fail in turn; then the checker (nothing acknowledged lost or doubled, nothing forgotten found, the raw index converged, no 5xx but 503 + Retry-After) and each fault's recovery; exit 1 on a violation (ARGS="--minutes 2"; default 10)
	$(BIN)/python bench/soak.py $(ARGS)

bench-history-bytes: install ## Cost of the hot-history size check (SESSION_MAX_HISTORY_BYTES) at 500/2k/10k messages (ARGS="--sizes 500,2000")
	$(BIN)/python bench/bench_history_bytes.py $(ARGS)

bench-export: install ## Peak RSS of GET /me/export streaming 100k messages vs loading them at once (ARGS="--messages 100000")
	$(BIN)/python bench/bench_export.py $(ARGS)

bench-import: install ## Import a synthetic ChatGPT export (10k conversations, 500k messages, branching trees): messages/s, RSS growth, re-import adds 0 rows, vs one INSERT per message (ARGS="--conversations 1000 --messages 50000")
	$(BIN)/python bench/bench_import.py $(ARGS)

clean: ## Remove caches (keeps .venv and .navi data)
	rm -rf .pytest_cache .mypy_cache .ruff_cache

.PHONY: help install run migrate test test-clients dist fresh-clone-check test-unit test-rebalance lint format typecheck clean reembed bench-turns bench-compression bench-sessions bench-console backfill bench-facts bench-context-modes bench-history-bytes bench-export bench-import bench-locomo bench-lme bench-locomo-replay bench-breadcrumbs bench-search bench-search-ab bench-scale bench-load bench-load-py bench-freshness bench-embed-cost bench-burst bench-slow-model bench-rebalance bench-indexers soak
