"""GET /health: database, migration revision, extensions, Ollama, the embedding backlog.
GET /health/ready: the readiness check of a load balancer (200 ready, 503 not).
GET /health/live: the liveness check (no I/O: the process answers).

All three are public, so what they cost is bounded by the process, not by the callers
(docs/api.md, "Health"): the probes — the model's (`GET /api/version` and one real
embedding) and the database's (revision, extensions, the embedding backlog: a pooled
connection) — run at most once per `HEALTH_CHECK_SECONDS` per process, and callers that
arrive while one runs wait for that one (single flight). A flood of `/health` costs the
model at most one embedding per period, and the pool one connection.

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
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

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
from sqlalchemy import text
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
#: The oldest database probe `/health/ready` answers from (`HEALTH_CHECK_SECONDS` when
#: that is shorter): a load balancer learns of a database gone within this + 3 s.
READY_MAX_AGE_SECONDS = 1.0

T = TypeVar("T")


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


def embedding_by(settings: Settings) -> str:
    if settings.index_embedding != "external":
        return "this process"
    started = os.environ.get(INDEXERS_ENV)
    return f"indexer processes ({started}, navi serve's)" if started else "external"


@dataclass(frozen=True)
class DbProbe:
    ok: bool
    revision: str | None
    extensions: ExtensionsOut
    writable: bool
    index: IndexOut | None
    error: str | None


@dataclass(frozen=True)
class ModelProbe:
    ollama: bool
    embedding_ok: bool
    embedding: str  # "ok" | "unreachable" | error text


async def _db_state(runtime: Runtime) -> tuple[str | None, ExtensionsOut, bool, IndexOut | None]:
    assert runtime.engine is not None  # the app's runtime has its engine
    async with runtime.engine.connect() as conn:

        def read(sync_conn):  # type: ignore[no-untyped-def]
            recovery = sync_conn.execute(text("SELECT pg_is_in_recovery()")).scalar()
            return migrate.current_revision(sync_conn), extension_state(sync_conn), not recovery

        revision, ext, writable = await conn.run_sync(read)
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
        writable,
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
) -> tuple[str | None, ExtensionsOut, bool, IndexOut | None]:
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


class SingleFlight(Generic[T]):
    """The last result of `check`, reused while it is younger than the caller's
    `max_age`; else one new run of `check`, which every caller arriving meanwhile awaits
    (single flight). A caller that goes away (a closed connection) leaves the run going
    for the others. `check` must answer, not raise: a failure is a result too, kept like
    one (a flood during an outage costs no more than one check per period either)."""

    def __init__(self, check: Callable[[], Awaitable[T]]) -> None:
        self._check = check
        self._last: tuple[T, float] | None = None  # (result, monotonic time it came)
        self._running: asyncio.Task[tuple[T, float]] | None = None
        #: how many times `check` ran (the tests read it)
        self.runs = 0

    async def get(self, max_age: float) -> tuple[T, float]:
        """(the result, its age in seconds)."""
        last = self._last
        if last is not None and time.monotonic() - last[1] <= max_age:
            return last[0], time.monotonic() - last[1]
        if self._running is None:
            self._running = asyncio.create_task(self._run())
        result, at = await asyncio.shield(self._running)
        return result, time.monotonic() - at

    async def _run(self) -> tuple[T, float]:
        self.runs += 1
        try:
            result = await self._check()
            self._last = (result, time.monotonic())
            return self._last
        finally:
            self._running = None


class HealthProbes:
    """One process's probes behind `/health`, `/health/ready` and the console's system
    page (one per runtime: per process, per app)."""

    def __init__(self, runtime: Runtime) -> None:
        self.db: SingleFlight[DbProbe] = SingleFlight(lambda: _probe_db(runtime))
        self.model: SingleFlight[ModelProbe] = SingleFlight(lambda: _probe_model(runtime))


_PROBES: weakref.WeakKeyDictionary[Runtime, HealthProbes] = weakref.WeakKeyDictionary()


def probes(runtime: Runtime) -> HealthProbes:
    found = _PROBES.get(runtime)
    if found is None:
        found = _PROBES[runtime] = HealthProbes(runtime)
    return found


async def _probe_db(runtime: Runtime) -> DbProbe:
    try:
        revision, ext, writable, index = await _bounded_db_state(runtime)
    except Exception as exc:  # reported, never raised: health must answer
        error = f"database: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return DbProbe(False, None, ExtensionsOut(False, None, False), False, None, error)
    return DbProbe(True, revision, ext, writable, index, None)


async def _probe_model(runtime: Runtime) -> ModelProbe:
    ping = asyncio.create_task(runtime.llm.ping(timeout=1.0))
    emb = await runtime.llm.check_embedding(timeout=1.0)
    ollama_ok = await ping
    embedding = "ok" if emb.ok else (emb.error if emb.reachable and emb.error else "unreachable")
    return ModelProbe(ollama=ollama_ok, embedding_ok=emb.ok, embedding=embedding)


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
        """Everything at a glance, from probes at most `HEALTH_CHECK_SECONDS` old: 503
        when the database is down, behind the code's migrations or without pgvector;
        `degraded` (200) when the model side is."""
        body = await health_report(runtime)
        return Response(body, status_code=200 if body.status != "down" else 503)

    @get(
        "/ready",
        cache=False,
        responses={503: ResponseSpec(data_container=ReadyOut, description="Not ready")},
    )
    async def ready(self, runtime: Runtime) -> Response[ReadyOut]:
        """For a load balancer: 200 when this process can serve — the database answers,
        is a writable primary, with pgvector, at this code's head revision or past it —
        else 503.
        The database probe is at most 1 s old; the model's state is reported, never a 503."""
        body = await ready_report(runtime)
        return Response(body, status_code=200 if body.ready else 503)

    @get("/live", cache=False)
    async def live(self) -> LiveOut:
        """The process answers: no database, no model (a liveness probe restarts a process
        only for its own faults, never for the database's)."""
        return LiveOut(status="alive")


async def health_report(runtime: Runtime) -> HealthOut:
    """What `GET /health` answers (the console's system page shows the same)."""
    head = migrate.head_revision()
    every = runtime.settings.health_check_seconds
    p = probes(runtime)
    (db, db_age), (model, model_age) = await asyncio.gather(p.db.get(every), p.model.get(every))
    at_head = db.ok and db.revision == head
    status = "ok" if db.ok and at_head and db.extensions.vector else "down"
    if status == "ok" and (not model.ollama or not model.embedding_ok):
        status = "degraded"
    return HealthOut(
        status=status,
        database=db.ok,
        revision=db.revision,
        head=head,
        at_head=at_head,
        extensions=db.extensions,
        ollama=model.ollama,
        embedding=model.embedding,
        auth_enabled=runtime.settings.auth_enabled,
        error=db.error,
        llm_breakers=runtime.llm.breaker_states(),
        embedding_provider=runtime.llm.embed_provider,
        embedding_fallback=fallback_reason(),
        index=db.index,
        checked_seconds_ago=round(max(db_age, model_age), 3),
    )


async def ready_report(runtime: Runtime) -> ReadyOut:
    """What `GET /health/ready` answers."""
    head = migrate.head_revision()
    every = runtime.settings.health_check_seconds
    p = probes(runtime)
    (db, db_age), (model, _) = await asyncio.gather(
        p.db.get(min(every, READY_MAX_AGE_SECONDS)), p.model.get(every)
    )
    schema = db.revision is not None and (
        db.revision == head or not migrate.known_revision(db.revision)
    )
    checks = ReadyChecks(
        database=db.ok,
        writable=db.ok and db.writable,
        schema=db.ok and schema,
        vector=db.extensions.vector,
    )
    ready = checks.database and checks.writable and checks.schema and checks.vector
    return ReadyOut(
        ready=ready,
        checks=checks,
        revision=db.revision,
        head=head,
        model="ok" if model.ollama and model.embedding_ok else "degraded",
        error=db.error,
        checked_seconds_ago=round(db_age, 3),
    )


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
