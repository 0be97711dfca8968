"""GET /health: database, migration revision, extensions, Ollama — answered within ~1 s.

GET /metrics: the Prometheus text exposition (Litestar's PrometheusController),
protected by a bearer token on the service's own port (docs/operations.md, "Metrics"):
`METRICS_TOKEN`, a token that grants nothing but this page, or an admin's token. Without
a token 401, with another valid token 403. In local mode (`NAVI_AUTH_ENABLED=false`)
anyone may read it, like every other route.
"""

from __future__ import annotations

import asyncio
import hmac
import os
from typing import Any

import msgspec
import structlog
from litestar import Controller, get
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi import ResponseSpec
from litestar.plugins.prometheus import PrometheusConfig, PrometheusController
from litestar.response import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
)
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db import migrate
from app.db.extensions import extension_state
from app.db.faults import statement_budget
from app.domain.auth.services import bearer_token, resolve_cached
from app.domain.kernel.principal import PERM_USERS_ADMIN
from app.domain.kernel.repositories import EmbedBacklogRepository
from app.domain.kernel.runtime import Runtime
from app.lib.errors import Forbidden
from app.lib.metrics import INDEX_BACKLOG_CHUNKS, INDEX_BACKLOG_OLDEST_SECONDS
from app.lib.supervisor import INDEXERS_ENV
from app.llm.fallback import fallback_reason

log = structlog.get_logger()

#: How long /health waits for the database before answering 503 `down`.
DB_HEALTH_SECONDS = 3.0
#: How long a /metrics scrape waits for the embedding backlog before leaving it out.
BACKLOG_SECONDS = 1.0


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


def embedding_by(settings: Settings) -> str:
    if settings.index_embedding != "external":
        return "this process"
    started = os.environ.get(INDEXERS_ENV)
    return f"indexer processes ({started}, navi serve's)" if started else "external"


async def _db_state(runtime: Runtime) -> tuple[str | None, ExtensionsOut, IndexOut | None]:
    assert runtime.engine is not None  # the app's runtime has its engine
    async with runtime.engine.connect() as conn:

        def read(sync_conn):  # type: ignore[no-untyped-def]
            return migrate.current_revision(sync_conn), extension_state(sync_conn)

        revision, ext = await conn.run_sync(read)
        index = None
        if revision is not None:  # a database before the migrations has no chunks
            index = _index_out(
                runtime.settings, await EmbedBacklogRepository(AsyncSession(conn)).backlog()
            )
    return (
        revision,
        ExtensionsOut(
            vector=ext.vector is not None,
            vector_version=ext.vector,
            pg_trgm=ext.pg_trgm is not None,
        ),
        index,
    )


def _index_out(settings: Settings, row: Any) -> IndexOut:
    return IndexOut(
        embedding_by=embedding_by(settings),
        backlog_chunks=int(row.chunks),
        backlog_bytes=int(row.bytes),
        oldest_seconds=round(float(row.oldest_seconds), 3),
    )


async def _bounded_db_state(
    runtime: Runtime,
) -> tuple[str | None, ExtensionsOut, IndexOut | None]:
    """`_db_state` within DB_HEALTH_SECONDS. Its statements get a short limit of their
    own, and a check still waiting then (a frozen server being connected to) is left to
    finish in the background, bounded by the connect timeout: cancelling it would make
    psycopg wait up to 10 s more asking the silent server to cancel."""
    with statement_budget(DB_HEALTH_SECONDS / 2):
        task = asyncio.create_task(_db_state(runtime))
    done, _ = await asyncio.wait({task}, timeout=DB_HEALTH_SECONDS)
    if task in done:
        return task.result()
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
    raise TimeoutError(f"no answer within {DB_HEALTH_SECONDS:g}s")


class HealthController(Controller):
    path = "/health"
    tags = ["system"]
    opt = {"public": True}

    @get(
        "/",
        cache=False,
        responses={503: ResponseSpec(data_container=HealthOut, description="The database is down")},
    )
    async def health(self, runtime: Runtime) -> Response[HealthOut]:
        body = await health_report(runtime)
        return Response(body, status_code=200 if body.status != "down" else 503)


async def health_report(runtime: Runtime) -> HealthOut:
    """What `GET /health` answers (the console's system page shows the same)."""
    head = migrate.head_revision()
    ping = asyncio.create_task(runtime.llm.ping(timeout=1.0))
    embed = asyncio.create_task(runtime.llm.check_embedding(timeout=1.0))
    error = None
    index = None
    try:
        revision, ext, index = await _bounded_db_state(runtime)
        db_ok = True
    except Exception as exc:  # reported, never raised: health must answer
        revision, ext, db_ok = None, ExtensionsOut(False, None, False), False
        error = f"database: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    ollama_ok = await ping
    emb = await embed
    embedding = "ok" if emb.ok else (emb.error if emb.reachable and emb.error else "unreachable")
    at_head = db_ok and revision == head
    status = "ok" if db_ok and at_head and ext.vector else "down"
    if status == "ok" and (not ollama_ok or not emb.ok):
        status = "degraded"
    body = HealthOut(
        status=status,
        database=db_ok,
        revision=revision,
        head=head,
        at_head=at_head,
        extensions=ext,
        ollama=ollama_ok,
        embedding=embedding,
        auth_enabled=runtime.settings.auth_enabled,
        error=error,
        llm_breakers=runtime.llm.breaker_states(),
        embedding_provider=runtime.llm.embed_provider,
        embedding_fallback=fallback_reason(),
        index=index,
    )
    return body


async def metrics_access(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """The scraper's token (compared in constant time), else an admin's. `OPTIONS` is
    Litestar's generated handler (it names the allowed methods): open, as everywhere."""
    if connection.scope.get("method") == "OPTIONS":
        return
    runtime: Runtime = connection.app.state.runtime
    settings: Settings = runtime.settings
    authorization = connection.headers.get("authorization")
    token = bearer_token(authorization)
    if settings.metrics_token and token and hmac.compare_digest(token, settings.metrics_token):
        return
    principal = await resolve_cached(
        runtime.session_factory, settings, runtime.principal_cache, authorization
    )
    if principal.auth_disabled:
        return
    if not principal.has(PERM_USERS_ADMIN):
        raise Forbidden("/metrics needs METRICS_TOKEN or an admin's token")


class MetricsController(PrometheusController):
    """The request metrics of the Prometheus plugin (app/asgi.py) and ours
    (app/lib/metrics.py), in the Prometheus text format."""

    path = "/metrics"
    opt = {"own_auth": True}  # `metrics_access`, not the app-wide guard (app/asgi.py)
    guards = [metrics_access]
    tags = ["system"]

    @get(cache=False)
    async def get(self, runtime: Runtime) -> Response[bytes]:  # type: ignore[override]
        """The plugin's page, after the embedding backlog's gauges are read."""
        await _read_backlog(runtime)
        registry = REGISTRY
        if "PROMETHEUS_MULTIPROC_DIR" in os.environ:  # every worker's samples, summed
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return Response(generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _read_backlog(runtime: Runtime) -> None:
    """The backlog gauges, from the database; left as they were when it does not answer
    within BACKLOG_SECONDS (a scrape never waits longer on it)."""
    try:
        with statement_budget(BACKLOG_SECONDS):
            async with asyncio.timeout(BACKLOG_SECONDS * 2):
                async with runtime.session_factory() as db:
                    row = await EmbedBacklogRepository(db).backlog()
    except Exception as exc:  # a scrape answers whatever the database does
        log.info("metrics.backlog_unread", error=f"{type(exc).__name__}: {exc}"[:200])
        return
    INDEX_BACKLOG_CHUNKS.set(int(row.chunks))
    INDEX_BACKLOG_OLDEST_SECONDS.set(float(row.oldest_seconds))


#: Request latency per route *template* (`/sessions/{session_id}`, not the raw path:
#: bounded series) and status: `navi_http_request_duration_seconds`, `…_requests_total`,
#: `…_requests_in_progress`, `…_requests_error_total`. Unrouted paths (404s of the router)
#: are left out for the same reason.
PROMETHEUS = PrometheusConfig(
    app_name="navi", prefix="navi_http", group_path=True, exclude_unhandled_paths=True
)
