"""GET /health: database, migration revision, extensions, Ollama — answered within ~1 s."""

from __future__ import annotations

import asyncio

import msgspec
from litestar import Controller, get
from litestar.datastructures import State
from litestar.openapi import ResponseSpec
from litestar.response import Response

from app.db import migrate
from app.db.extensions import extension_state
from app.db.faults import statement_budget
from app.llm.fallback import fallback_reason

#: How long /health waits for the database before answering 503 `down`.
DB_HEALTH_SECONDS = 3.0


class ExtensionsOut(msgspec.Struct):
    vector: bool
    vector_version: str | None
    pg_trgm: bool


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


async def _db_state(state: State) -> tuple[str | None, ExtensionsOut]:
    async with state.engine.connect() as conn:

        def read(sync_conn):  # type: ignore[no-untyped-def]
            return migrate.current_revision(sync_conn), extension_state(sync_conn)

        revision, ext = await conn.run_sync(read)
    return revision, ExtensionsOut(
        vector=ext.vector is not None, vector_version=ext.vector, pg_trgm=ext.pg_trgm is not None
    )


async def _bounded_db_state(state: State) -> tuple[str | None, ExtensionsOut]:
    """`_db_state` within DB_HEALTH_SECONDS. Its statements get a short limit of their
    own, and a check still waiting then (a frozen server being connected to) is left to
    finish in the background, bounded by the connect timeout: cancelling it would make
    psycopg wait up to 10 s more asking the silent server to cancel."""
    with statement_budget(DB_HEALTH_SECONDS / 2):
        task = asyncio.create_task(_db_state(state))
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
    async def health(self, state: State) -> Response[HealthOut]:
        head = migrate.head_revision()
        ping = asyncio.create_task(state.llm.ping(timeout=1.0))
        embed = asyncio.create_task(state.llm.check_embedding(timeout=1.0))
        error = None
        try:
            revision, ext = await _bounded_db_state(state)
            db_ok = True
        except Exception as exc:  # reported, never raised: health must answer
            revision, ext, db_ok = None, ExtensionsOut(False, None, False), False
            error = (
                f"database: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            )
        ollama_ok = await ping
        emb = await embed
        embedding = (
            "ok" if emb.ok else (emb.error if emb.reachable and emb.error else "unreachable")
        )
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
            auth_enabled=state.settings.auth_enabled,
            error=error,
            llm_breakers=state.llm.breaker_states(),
            embedding_provider=state.llm.embed_provider,
            embedding_fallback=fallback_reason(),
        )
        return Response(body, status_code=200 if status != "down" else 503)
