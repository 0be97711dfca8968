"""Settings: one typed object read from the environment (and `.env`), loaded once.

Every setting is declared once in `FIELDS` with its env var, default, type and meaning;
`docs/configuration.md` is checked against this table by a test, so the two cannot drift.
A bad value fails at start-up with a message naming the variable.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

EMBEDDING_PROVIDERS = ("ollama", "local", "none")
#: Dimension of the `local` provider's model (all-MiniLM-L6-v2).
LOCAL_EMBEDDING_DIM = 384
#: Dimension when EMBEDDING_DIM is unset and the provider is not `local` (nomic-embed-text).
DEFAULT_EMBEDDING_DIM = 768


class SettingsError(ValueError):
    """A setting has a value we cannot use; the message names the variable."""


@dataclass(frozen=True)
class Spec:
    env: str
    default: Any
    kind: type
    doc: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None


# name -> spec. Order is the order of docs/configuration.md.
FIELDS: dict[str, Spec] = {
    # --- service
    "host": Spec("HOST", "127.0.0.1", str, "Interface the HTTP server binds to."),
    "port": Spec("PORT", 8000, int, "TCP port of the HTTP server.", 1, 65535),
    "log_level": Spec(
        "LOG_LEVEL", "info", str, "Log level.", choices=("debug", "info", "warning", "error")
    ),
    "log_json": Spec(
        "LOG_JSON", None, bool, "JSON logs; unset = JSON when stderr is not a terminal."
    ),
    "data_dir": Spec(
        "NAVI_DATA_DIR",
        ".navi",
        str,
        "Data directory: embedded PostgreSQL (`pg/`), session files (`session_files/`).",
    ),
    "database_url": Spec(
        "DATABASE_URL",
        "",
        str,
        "`postgresql+psycopg://…` of an external server; empty = embedded PostgreSQL in "
        "the data directory.",
    ),
    "db_pool_size": Spec("DB_POOL_SIZE", 10, int, "SQLAlchemy pool size per process.", 1, 200),
    "db_max_overflow": Spec("DB_MAX_OVERFLOW", 10, int, "Extra connections past the pool.", 0),
    "db_ping_idle_seconds": Spec(
        "DB_PING_IDLE_SECONDS",
        2.0,
        float,
        "A pooled connection idle at least this long is checked (`SELECT 1`) before use, "
        "and replaced if the server dropped it; one used more recently is not (a round "
        "trip saved per checkout: a search takes up to three). 0 = check every checkout.",
        0,
        3600,
    ),
    "db_connect_timeout_seconds": Spec(
        "DB_CONNECT_TIMEOUT_SECONDS",
        5,
        int,
        "Seconds to open a database connection (libpq `connect_timeout`, at least 2); "
        "past it the request answers 503 `unavailable`.",
        2,
        600,
    ),
    "db_pool_timeout_seconds": Spec(
        "DB_POOL_TIMEOUT_SECONDS",
        5.0,
        float,
        "Seconds a request waits for a free pooled connection; past it 503 `unavailable`.",
        0.1,
        600,
    ),
    "db_statement_timeout_seconds": Spec(
        "DB_STATEMENT_TIMEOUT_SECONDS",
        10.0,
        float,
        "Longest statement (and commit) of an HTTP request: PostgreSQL's "
        "`statement_timeout`, and a client-side guard 2 s later that closes the "
        "connection of a server that does not answer at all (frozen, partitioned). "
        "Either is a 503 `unavailable`.",
        0.1,
        3600,
    ),
    "db_job_statement_timeout_seconds": Spec(
        "DB_JOB_STATEMENT_TIMEOUT_SECONDS",
        600.0,
        float,
        "The same limit for everything that is not an HTTP request: background jobs, "
        "start-up, CLI commands (`reembed`, `backfill`, `index-sessions`). 0 = none.",
        0,
        86400,
    ),
    "db_embedded_check_seconds": Spec(
        "DB_EMBEDDED_CHECK_SECONDS",
        5.0,
        float,
        "Embedded PostgreSQL only: how often the service checks that the server it "
        "started is alive, and starts it again when it died (also checked at once when "
        "a request finds the database unreachable). 0 = never.",
        0,
        3600,
    ),
    "web_concurrency": Spec(
        "WEB_CONCURRENCY",
        1,
        int,
        "Worker processes of `navi serve` / `make run` (uvicorn workers; each has its own "
        "DB pool). Python runs one request at a time per process: about one per CPU core "
        "left to PostgreSQL.",
        1,
        64,
    ),
    "max_request_body_mb": Spec(
        "MAX_REQUEST_BODY_MB", 16, int, "Largest JSON request body accepted (413 above).", 1
    ),
    "message_max_chars": Spec(
        "MESSAGE_MAX_CHARS",
        1_000_000,
        int,
        "Largest content of one message (413 above).",
        1,
    ),
    # --- auth
    "auth_enabled": Spec(
        "NAVI_AUTH_ENABLED",
        True,
        bool,
        "Require `Authorization: Bearer`. `false` = local mode: every request is user `anonymous`.",
    ),
    "admin_token": Spec(
        "NAVI_ADMIN_TOKEN",
        "",
        str,
        "Bootstrap admin token (≥ 32 chars). At start-up an `admin` user holding it is "
        "ensured; it is stored hashed only.",
    ),
    "auth_cache_ttl_seconds": Spec(
        "AUTH_CACHE_TTL_SECONDS",
        5.0,
        float,
        "How long a process reuses a resolved bearer token (keyed by its SHA-256) without "
        "asking the database; 0 = look up every request. Revoking a token or deleting a "
        "user takes effect at once in the process that did it, within this many seconds "
        "in the other worker processes.",
        0,
        300,
    ),
    "cors_allow_origins": Spec(
        "CORS_ALLOW_ORIGINS",
        "",
        str,
        "Comma-separated origins a browser page may call the API from "
        "(`https://app.example.com`; `*` = any); empty = CORS off. Preflight `OPTIONS` "
        "requests are answered without a token.",
    ),
    # --- LLM / embeddings
    "ollama_host": Spec("OLLAMA_HOST", "http://127.0.0.1:11434", str, "Ollama for chat."),
    "ollama_model": Spec("OLLAMA_MODEL", "qwen3:8b", str, "Chat model (summaries, extraction)."),
    "ollama_num_ctx": Spec("OLLAMA_NUM_CTX", 32768, int, "Default context window in tokens.", 512),
    "ollama_timeout": Spec(
        "OLLAMA_TIMEOUT", 120.0, float, "Seconds before one LLM call times out.", 0.1
    ),
    "embedding_provider": Spec(
        "EMBEDDING_PROVIDER",
        "ollama",
        str,
        "Who computes embeddings: `ollama` (`EMBEDDING_MODEL` on the embedding host), "
        "`local` (all-MiniLM-L6-v2 int8 in-process, 384 dimensions; needs the `local` "
        "extra) or `none` (no vectors: every search is a text search).",
        choices=EMBEDDING_PROVIDERS,
    ),
    "embedding_ollama_host": Spec(
        "EMBEDDING_OLLAMA_HOST", "", str, "Ollama for embeddings; empty = `OLLAMA_HOST`."
    ),
    "embedding_ollama_api_key": Spec(
        "EMBEDDING_OLLAMA_API_KEY", "", str, "Bearer key for the embedding host (never logged)."
    ),
    "embedding_model": Spec(
        "EMBEDDING_MODEL",
        "nomic-embed-text:latest",
        str,
        "Ollama embedding model (`EMBEDDING_PROVIDER=ollama`; `local` has its own).",
    ),
    "embedding_dim": Spec(
        "EMBEDDING_DIM",
        None,
        int,
        "Dimension of the embedding model; the vector columns follow it (set before the "
        "first migration; changing it needs `make reembed`). Unset = the provider's: 768 "
        "for `ollama` (nomic-embed-text), 384 for `local`, which accepts no other value.",
        1,
        16000,
    ),
    "embedding_batch_size": Spec(
        "EMBEDDING_BATCH_SIZE", 32, int, "Texts per embedding request.", 1, 1024
    ),
    "llm_max_attempts": Spec(
        "LLM_MAX_ATTEMPTS",
        3,
        int,
        "Attempts of one LLM call on connection errors / 5xx (never on 4xx).",
        1,
        10,
    ),
    "llm_backoff_initial": Spec(
        "LLM_BACKOFF_INITIAL",
        0.2,
        float,
        "First backoff between LLM attempts in seconds (exponential, with jitter).",
        0,
        60,
    ),
    "llm_request_deadline_seconds": Spec(
        "LLM_REQUEST_DEADLINE_SECONDS",
        20.0,
        float,
        "One budget for all the model calls (embeddings, summaries) made while serving "
        "one HTTP request, counted from its arrival; past it the request degrades as "
        "when Ollama is down (text-only search, hard truncation, fact stored without a "
        "vector) instead of waiting. Background jobs and CLI commands are bounded by "
        "`OLLAMA_TIMEOUT` per call only. 0 = no deadline.",
        0,
        3600,
    ),
    "llm_breaker_failures": Spec(
        "LLM_BREAKER_FAILURES",
        3,
        int,
        "Consecutive connection failures to an Ollama host (refused, connect timeout) "
        "after which it is taken as absent: calls to it fail at once, without retries.",
        1,
        100,
    ),
    "llm_breaker_reset_seconds": Spec(
        "LLM_BREAKER_RESET_SECONDS",
        30.0,
        float,
        "While an Ollama host is taken as absent, one call per this many seconds is let "
        "through as a probe (one attempt); its success closes the breaker.",
        0.1,
        3600,
    ),
    # --- context compression
    "context_compression_enabled": Spec(
        "CONTEXT_COMPRESSION_ENABLED", True, bool, "Compress old turns into a summary."
    ),
    "context_compression_threshold": Spec(
        "CONTEXT_COMPRESSION_THRESHOLD",
        0.90,
        float,
        "Compress when the context reaches this share of the window (real tokens).",
        0.1,
        1.0,
    ),
    "context_compression_target": Spec(
        "CONTEXT_COMPRESSION_TARGET",
        0.65,
        float,
        "After compression the kept region should fit this share of the window.",
        0.05,
        1.0,
    ),
    "context_keep_recent": Spec(
        "CONTEXT_KEEP_RECENT", 4, int, "Recent turns kept verbatim.", 1, 1000
    ),
    "context_summary_temperature": Spec(
        "CONTEXT_SUMMARY_TEMPERATURE", 0.3, float, "Temperature of the summary call.", 0, 2
    ),
    "context_summary_max_tokens": Spec(
        "CONTEXT_SUMMARY_MAX_TOKENS", 6000, int, "Max output tokens of the summary.", 16
    ),
    "output_reserve_tokens": Spec(
        "OUTPUT_RESERVE_TOKENS",
        2048,
        int,
        "Headroom kept for the reply (capped at a quarter of the window).",
        0,
    ),
    "context_message_token_budget": Spec(
        "CONTEXT_MESSAGE_TOKEN_BUDGET",
        0,
        int,
        "Per-message view budget in tokens; 0 = window // 6.",
        0,
    ),
    "context_image_tokens": Spec(
        "CONTEXT_IMAGE_TOKENS",
        1024,
        int,
        "Price of an image whose header cannot be read.",
        1,
    ),
    "session_messages_window": Spec(
        "SESSION_MESSAGES_WINDOW",
        2000,
        int,
        "Hot messages kept per session; older ones move to the archive on compression.",
        10,
    ),
    "profiles_file": Spec(
        "NAVI_PROFILES_FILE", "", str, "JSON file of profiles (window, compression overrides)."
    ),
    # --- memory
    "memory_search_enabled": Spec(
        "MEMORY_SEARCH_ENABLED", True, bool, "Index demoted messages as raw chunks."
    ),
    "memory_recall_enabled": Spec(
        "MEMORY_RECALL_ENABLED", True, bool, "Inject recalled raw excerpts after a summary."
    ),
    "memory_recall_k": Spec("MEMORY_RECALL_K", 2, int, "Excerpts recalled per turn.", 0, 20),
    "memory_recall_min_similarity": Spec(
        "MEMORY_RECALL_MIN_SIMILARITY",
        0.55,
        float,
        "Minimum cosine similarity of a recalled excerpt.",
        0,
        1,
    ),
    "extraction_enabled": Spec(
        "MEMORY_EXTRACTION_ENABLED", True, bool, "Extract facts from stale sessions."
    ),
    "extraction_stale_minutes": Spec(
        "MEMORY_EXTRACTION_STALE_MINUTES", 30, int, "Idle minutes before a session is stale.", 0
    ),
    "extraction_interval_seconds": Spec(
        "MEMORY_EXTRACTION_INTERVAL_SECONDS",
        300,
        int,
        "Period of the extraction worker; 0 disables the loop.",
        0,
    ),
    "raw_index_idle_enabled": Spec(
        "RAW_INDEX_IDLE_ENABLED",
        True,
        bool,
        "Index the messages of idle sessions that compression never demoted as raw chunks "
        "(needs `MEMORY_SEARCH_ENABLED`); docs/raw-history.md.",
    ),
    "raw_index_idle_minutes": Spec(
        "RAW_INDEX_IDLE_MINUTES",
        None,
        int,
        "Idle minutes before a session's unindexed messages are indexed; unset = "
        "`MEMORY_EXTRACTION_STALE_MINUTES`.",
        0,
    ),
    "raw_index_idle_interval_seconds": Spec(
        "RAW_INDEX_IDLE_INTERVAL_SECONDS",
        60,
        int,
        "Period of the idle-session indexing job; 0 disables the loop.",
        0,
    ),
    # --- conversation history, error memory, rolling context (seed 001)
    "session_max_history_bytes": Spec(
        "SESSION_MAX_HISTORY_BYTES",
        4_194_304,
        int,
        "Hot history per session in bytes (content + thinking); above it the oldest "
        "messages move to the archive, down to 80 %, cut before a user message. 0 disables.",
        0,
    ),
    "history_embed_recent": Spec(
        "HISTORY_EMBED_RECENT",
        500,
        int,
        "Newest messages of a session searched by `chat_history` semantic mode (embedded "
        "lazily, on search). 0 = semantic mode falls back to keyword.",
        0,
        100_000,
    ),
    "error_memory_ttl_days": Spec(
        "ERROR_MEMORY_TTL_DAYS",
        90,
        int,
        "Days an error-memory entry lives; every hit renews it.",
        1,
        36_500,
    ),
    "error_memory_purge_seconds": Spec(
        "ERROR_MEMORY_PURGE_SECONDS",
        3600,
        int,
        "Period of the job deleting expired error-memory entries; 0 disables.",
        0,
    ),
    "rolling_summary_interval_seconds": Spec(
        "ROLLING_SUMMARY_INTERVAL_SECONDS",
        900,
        int,
        "Period of the rolling-summary job (sessions whose profile has "
        "`context_mode: rolling`); 0 disables.",
        0,
    ),
    "rolling_summary_chunk_chars": Spec(
        "ROLLING_SUMMARY_CHUNK_CHARS",
        32_000,
        int,
        "Largest transcript sent in one rolling-summary call (characters).",
        1000,
    ),
    "rolling_summary_noise_filter": Spec(
        "ROLLING_SUMMARY_NOISE_FILTER",
        False,
        bool,
        "Before summarising, drop noise exchanges (greetings, thanks, repeats, failed "
        "turns) judged with confidence ≥ 0.7 by one extra LLM call per chunk.",
    ),
    # --- files
    "session_files_max_size_mb": Spec(
        "SESSION_FILES_MAX_SIZE_MB", 200, int, "Largest uploaded session file.", 1
    ),
    "share_file_max_size_mb": Spec(
        "SHARE_FILE_MAX_SIZE_MB", 1024, int, "Largest file `share_file` copies.", 1
    ),
    "share_file_roots": Spec(
        "SHARE_FILE_ROOTS",
        "",
        str,
        "Comma-separated absolute directories `share_file` may copy from; empty = refused.",
    ),
    "session_files_cleanup_seconds": Spec(
        "SESSION_FILES_CLEANUP_SECONDS",
        3600,
        int,
        "Period of the job deleting session directories whose session is gone; 0 disables.",
        0,
    ),
}


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    log_level: str = "info"
    log_json: bool | None = None
    data_dir: str = ".navi"
    database_url: str = ""
    db_pool_size: int = 10
    db_max_overflow: int = 10
    db_ping_idle_seconds: float = 2.0
    db_connect_timeout_seconds: int = 5
    db_pool_timeout_seconds: float = 5.0
    db_statement_timeout_seconds: float = 10.0
    db_job_statement_timeout_seconds: float = 600.0
    db_embedded_check_seconds: float = 5.0
    web_concurrency: int = 1
    max_request_body_mb: int = 16
    message_max_chars: int = 1_000_000
    auth_enabled: bool = True
    admin_token: str = field(default="", repr=False)
    auth_cache_ttl_seconds: float = 5.0
    cors_allow_origins: str = ""
    ollama_host: str = "http://127.0.0.1:11434"
    ollama_model: str = "qwen3:8b"
    ollama_num_ctx: int = 32768
    ollama_timeout: float = 120.0
    embedding_provider: str = "ollama"
    embedding_ollama_host: str = ""
    embedding_ollama_api_key: str = field(default="", repr=False)
    embedding_model: str = "nomic-embed-text:latest"
    embedding_dim: int | None = None
    embedding_batch_size: int = 32
    llm_max_attempts: int = 3
    llm_backoff_initial: float = 0.2
    llm_request_deadline_seconds: float = 20.0
    llm_breaker_failures: int = 3
    llm_breaker_reset_seconds: float = 30.0
    context_compression_enabled: bool = True
    context_compression_threshold: float = 0.90
    context_compression_target: float = 0.65
    context_keep_recent: int = 4
    context_summary_temperature: float = 0.3
    context_summary_max_tokens: int = 6000
    output_reserve_tokens: int = 2048
    context_message_token_budget: int = 0
    context_image_tokens: int = 1024
    session_messages_window: int = 2000
    profiles_file: str = ""
    memory_search_enabled: bool = True
    memory_recall_enabled: bool = True
    memory_recall_k: int = 2
    memory_recall_min_similarity: float = 0.55
    extraction_enabled: bool = True
    extraction_stale_minutes: int = 30
    extraction_interval_seconds: int = 300
    raw_index_idle_enabled: bool = True
    raw_index_idle_minutes: int | None = None
    raw_index_idle_interval_seconds: int = 60
    session_max_history_bytes: int = 4_194_304
    history_embed_recent: int = 500
    error_memory_ttl_days: int = 90
    error_memory_purge_seconds: int = 3600
    rolling_summary_interval_seconds: int = 900
    rolling_summary_chunk_chars: int = 32_000
    rolling_summary_noise_filter: bool = False
    session_files_max_size_mb: int = 200
    share_file_max_size_mb: int = 1024
    share_file_roots: str = ""
    session_files_cleanup_seconds: int = 3600

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


_TRUE = {"1", "true", "yes", "on"}
_ORIGIN_RE = re.compile(r"^https?://[^/\s?#]+$")
_FALSE = {"0", "false", "no", "off"}


def _parse(name: str, spec: Spec, raw: str) -> Any:
    raw = raw.strip()
    if spec.kind is bool:
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        if raw == "" and spec.default is None:
            return None
        raise SettingsError(f"{spec.env}={raw!r}: expected true or false")
    if spec.kind in (int, float):
        try:
            value = spec.kind(raw)
        except ValueError:
            raise SettingsError(
                f"{spec.env}={raw!r}: expected {'an integer' if spec.kind is int else 'a number'}"
            ) from None
        if spec.min is not None and value < spec.min:
            raise SettingsError(f"{spec.env}={raw!r}: must be ≥ {spec.min:g}")
        if spec.max is not None and value > spec.max:
            raise SettingsError(f"{spec.env}={raw!r}: must be ≤ {spec.max:g}")
        return value
    if spec.choices and raw.lower() not in spec.choices:
        raise SettingsError(f"{spec.env}={raw!r}: expected one of {', '.join(spec.choices)}")
    return raw.lower() if spec.choices else raw


def read_dotenv(path: Path) -> dict[str, str]:
    """Minimal `.env` reader: KEY=VALUE lines, `#` comments, optional quotes."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.strip().removeprefix("export ").strip()
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key] = value
    return out


def load_settings(environ: dict[str, str] | None = None, dotenv: Path | None = None) -> Settings:
    """Build Settings from `environ` (default os.environ) over `.env` over defaults."""
    env = dict(read_dotenv(dotenv if dotenv is not None else Path(".env")))
    env.update(os.environ if environ is None else environ)
    values: dict[str, Any] = {}
    for name, spec in FIELDS.items():
        if spec.env in env and (env[spec.env] != "" or spec.kind is str):
            values[name] = _parse(name, spec, env[spec.env])
    settings = Settings(**values)
    _check(settings)
    return settings


def _check(s: Settings) -> None:
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
    if s.admin_token and len(s.admin_token) < 32:
        raise SettingsError("NAVI_ADMIN_TOKEN: must be at least 32 characters")
    if s.context_compression_target >= s.context_compression_threshold:
        raise SettingsError(
            "CONTEXT_COMPRESSION_TARGET: must be below CONTEXT_COMPRESSION_THRESHOLD"
        )
    for name in ("ollama_host", "embedding_ollama_host"):
        value = getattr(s, name)
        if value and not value.startswith(("http://", "https://")):
            raise SettingsError(f"{FIELDS[name].env}={value!r}: expected an http(s):// URL")


assert {f.name for f in fields(Settings)} == set(FIELDS), "FIELDS and Settings disagree"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
