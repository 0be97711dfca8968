"""The answers of `/health`, `/health/ready` and `/health/live` (docs/api.md, "Health")."""

from __future__ import annotations

import msgspec


class ExtensionsOut(msgspec.Struct):
    vector: bool
    vector_version: str | None
    pg_trgm: bool


class IndexOut(msgspec.Struct):
    """The live index's embedding queue: chunks found by their words that wait for
    their vectors (docs/operations.md, "The indexers")."""

    #: who embeds: "indexer processes" (`navi serve`'s), "this process" (an app's own
    #: job) or "external" (`navi indexer` run apart)
    embedding_by: str
    backlog_chunks: int
    backlog_bytes: int
    oldest_seconds: float


class HealthOut(msgspec.Struct):
    status: str  # "ok" | "degraded" | "down"
    database: bool
    revision: str | None
    head: str | None
    at_head: bool
    extensions: ExtensionsOut
    ollama: bool
    embedding: str  # "ok" | "unreachable" | error text (wrong dimension, missing model)
    auth_enabled: bool
    error: str | None = None
    #: The Ollama hosts' circuit breakers: "closed" | "open" | "half_open".
    llm_breakers: dict[str, str] = msgspec.field(default_factory=dict)
    embedding_provider: str = ""  # "ollama" | "local" | "none"
    #: Why `serve` chose the offline `local` embedder itself (app.llm.fallback), if it did.
    embedding_fallback: str | None = None
    #: The embedding queue (None when the database did not answer).
    index: IndexOut | None = None
    #: The age of the oldest probe this answer is made of (they run at most once per
    #: `HEALTH_CHECK_SECONDS` per process; 0: just run).
    checked_seconds_ago: float = 0.0


class ReadyChecks(msgspec.Struct):
    database: bool  # answered within 3 s
    writable: bool  # a primary, not a standby in recovery
    #: the schema is at this code's head revision, or past it (a revision this code
    #: does not know: a later release's `navi migrate` ran while this one still serves);
    #: false while it is behind (this release's `navi migrate` has not run yet)
    schema: bool
    vector: bool  # pgvector is installed


class ReadyOut(msgspec.Struct):
    ready: bool
    checks: ReadyChecks
    revision: str | None
    head: str | None
    #: The model side, reported and never a reason for 503: without Ollama the service
    #: degrades (text search, summaries later), and a shared model host that is down
    #: must not take every replica out of the load balancer at once.
    model: str  # "ok" | "degraded"
    error: str | None = None
    checked_seconds_ago: float = 0.0


class LiveOut(msgspec.Struct):
    status: str  # "alive"
