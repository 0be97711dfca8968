"""The probes behind `/health`, `/health/ready` and the console's system page.

All three routes are public, so what they cost is bounded by the process, not by the
callers (docs/api.md, "Health"): the probes — the model's (`GET /api/version` and one real
embedding) and the database's (revision, extensions, standby or not, the embedding
backlog: a pooled connection) — run at most once per `HEALTH_CHECK_SECONDS` per process,
and callers that arrive while one runs wait for that one (single flight). A flood of
`/health` costs the model at most one embedding per period, and the pool one connection.
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db import migrate
from app.db.extensions import extension_state, in_recovery
from app.db.faults import statement_budget
from app.domain.kernel.repositories import EmbedBacklogRepository
from app.domain.kernel.runtime import Runtime
from app.domain.system.schemas import ExtensionsOut, HealthOut, IndexOut, ReadyChecks, ReadyOut
from app.lib.supervisor import INDEXERS_ENV
from app.llm.fallback import fallback_reason

#: How long /health waits for the database before answering 503 `down`.
DB_HEALTH_SECONDS = 3.0
#: The oldest database probe `/health/ready` answers from (`HEALTH_CHECK_SECONDS` when
#: that is shorter): a load balancer learns of a database gone within this + 3 s.
READY_MAX_AGE_SECONDS = 1.0

T = TypeVar("T")


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
            return (
                migrate.current_revision(sync_conn),
                extension_state(sync_conn),
                not in_recovery(sync_conn),
            )

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
