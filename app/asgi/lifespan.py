"""The lifespan: `build_runtime` (the composition root), start-up in order (the built-in
users, trigram indexes, the embedded watchdog, the periodic jobs) and the shutdown."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any

import structlog
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import NullPool

from app.config import Settings
from app.db.embedded import EmbeddedWatchdog
from app.db.engine import (
    behind_pooler,
    create_engine,
    direct_url,
    embedded_server,
    normalize_url,
    pool_stats,
    resolve_database_url,
    session_factory,
    transaction,
)
from app.db.extensions import build_trigram_indexes, trigram_indexes_missing
from app.db.faults import statement_budget, unavailable_reason
from app.db.replica import ReplicaRouter
from app.db.write_positions import WritePositions
from app.domain.agents.mcp import NaviMCP
from app.domain.auth.services import bootstrap
from app.domain.context.lifecycle import ContextSessionHooks
from app.domain.kernel.jobs import periodic, spawn
from app.domain.kernel.leader import run_as_leader
from app.domain.kernel.principal_cache import PrincipalCache
from app.domain.kernel.profiles import Profiles
from app.domain.kernel.runtime import Runtime
from app.domain.raw_history.hooks import raw_history_hook
from app.lib.metrics import POOL
from app.lib.runtime import freeze_startup_heap
from app.llm.factory import build_gateway
from app.routes import BACKGROUND_JOBS

log = structlog.get_logger()


SHUTDOWN_TASKS_SECONDS = 10.0
#: how long a starting worker waits for an unavailable database before it gives up
STARTUP_DB_WAIT_SECONDS = 120.0


async def _cancel_tasks(tasks: set[asyncio.Task[Any]]) -> None:
    """Cancel the background tasks and wait for them, at most SHUTDOWN_TASKS_SECONDS: a
    task that does not stop is logged by name instead of holding the shutdown forever."""
    pending = list(tasks)
    for task in pending:
        task.cancel()
    if not pending:
        return
    _, still = await asyncio.wait(pending, timeout=SHUTDOWN_TASKS_SECONDS)
    if still:
        log.error(
            "app.shutdown_tasks_stuck",
            tasks=sorted(t.get_name() for t in still),
            waited_seconds=SHUTDOWN_TASKS_SECONDS,
        )


def make_lifespan(
    settings: Settings,
    profiles: Profiles,
    database_url: str | None,
    engine: AsyncEngine | None,
    background_jobs: bool,
) -> Callable[[Litestar], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        own_engine = engine is None
        eng = engine or create_engine(database_url or resolve_database_url(settings), settings)
        runtime = await build_runtime(settings, profiles, eng)
        app.state.runtime = runtime
        await _start(runtime, background_jobs)
        app.state.mcp = NaviMCP(runtime)  # its session manager runs once: one per start
        try:
            async with app.state.mcp.manager.run():
                yield
        finally:
            await _cancel_tasks(runtime.jobs.tasks)
            await runtime.llm.aclose()
            if runtime.replica is not None:
                await runtime.replica.replica.dispose()
            if own_engine:
                await eng.dispose()

    return lifespan


async def build_runtime(settings: Settings, profiles: Profiles, eng: AsyncEngine) -> Runtime:
    """The one composition root of the domain: the engine's session factories (and the
    replica router), the model gateway, the hooks, the token cache. Every service, tool,
    job and the turn loop is built from what this returns."""
    POOL.watch(lambda: pool_stats(eng))  # the pool gauges of /metrics, read at scrape
    llm = build_gateway(settings)
    runtime = Runtime(
        settings,
        profiles,
        llm,
        session_factory(eng),
        # READ_ONLY_STANDALONE's sessions: the same pool, each statement its own transaction
        # (none behind a transaction pooler: there a statement needs its transaction's
        # SET LOCAL statement limit)
        autocommit_sessions=None
        if behind_pooler(eng)
        else session_factory(eng.execution_options(isolation_level="AUTOCOMMIT")),
        engine=eng,
        # the leader locks' connections (kernel/leader.py): a lock's transaction sits idle
        # for its whole tick, so no idle-in-transaction limit ends it (and the lead) early
        leader_sessions=session_factory(
            create_engine(
                eng.url.render_as_string(hide_password=False),
                dataclasses.replace(settings, db_idle_in_transaction_seconds=0),
                poolclass=NullPool,
            )
        ),
        session_hooks=ContextSessionHooks(),
        principal_cache=PrincipalCache(settings.auth_cache_ttl_seconds),
    )
    if settings.memory_search_enabled:  # the raw history index (memory_chunks)
        # its chunks' vectors: embedded before the compression's lock when this process
        # embeds, else by the indexer processes (INDEX_EMBEDDING=external)
        embeds = settings.index_embedding != "external"
        runtime.demotion_hooks.register(raw_history_hook(llm, embed=embeds))
    if settings.database_replica_url:  # read-only endpoints may read there (db/replica.py)
        replica_engine = create_engine(
            normalize_url(settings.database_replica_url),
            # a replica that went away must cost a read little: refused at once, or 2 s
            dataclasses.replace(settings, db_connect_timeout_seconds=2),
        )
        router = ReplicaRouter(
            eng,
            replica_engine,
            settings.replica_max_lag_seconds,
            settings.replica_check_seconds,
            # the supervisor's table under `navi serve` with workers, else this process's
            WritePositions.from_env(),
        )
        runtime.replica = router
        # every commit on the primary is noted for read-your-writes from here on
        runtime.session_factory = router.primary_sessions
        await router.refresh()
        spawn(runtime.jobs, router.watch(), "db.replica_watch")
    return runtime


async def _bootstrap(runtime: Runtime) -> bool:
    """The built-in users, and whether trigram indexes are missing. A database that is
    unavailable (restarting, frozen) is waited for, up to STARTUP_DB_WAIT_SECONDS: a
    worker that uvicorn restarts meanwhile (kill -9, a failed health check) must not fail
    its start-up — uvicorn then stops the whole service, every worker."""
    deadline = time.monotonic() + STARTUP_DB_WAIT_SECONDS
    delay = 0.5
    with _stop_signalled() as stop:
        while True:
            try:
                async with transaction(runtime.session_factory) as session:
                    await bootstrap(session, runtime.settings)
                    # trigram indexes appear once pg_trgm exists: a catalog read, DDL only
                    # when one is missing, and then concurrently, in the background
                    # (app/db/extensions.py)
                    conn = await session.connection()
                    return bool(await conn.run_sync(trigram_indexes_missing))
            except Exception as exc:
                reason = unavailable_reason(exc)
                if reason is None or time.monotonic() + delay > deadline or stop.is_set():
                    raise
                log.warning("app.start_waits_for_database", reason=reason, retry_in_seconds=delay)
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                except TimeoutError:
                    delay = min(delay * 2, 5.0)
                    continue
                log.warning("app.start_stopped", reason=reason)
                raise


@contextmanager
def _stop_signalled() -> Iterator[asyncio.Event]:
    """An event set when SIGINT or SIGTERM arrives while it is open, the handlers set
    before it (uvicorn's) still called: a start-up waiting for the database gives up when
    the service is being stopped, instead of holding the stop for STARTUP_DB_WAIT_SECONDS.
    Only the main thread can listen to signals, and only a signal someone handles is
    wrapped (a default SIGTERM still ends the process)."""
    stop = asyncio.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    loop = asyncio.get_running_loop()
    before: dict[int, Any] = {}

    def handle(sig: int, frame: Any) -> None:
        loop.call_soon_threadsafe(stop.set)
        before[sig](sig, frame)

    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sig)
        if callable(handler):
            before[sig] = handler
            signal.signal(sig, handle)
    try:
        yield stop
    finally:
        for number, previous in before.items():
            signal.signal(number, previous)


async def _start(runtime: Runtime, background_jobs: bool) -> None:
    """Start-up, in order: the built-in users and trigram indexes, the embedded server's
    watchdog, the periodic jobs."""
    settings = runtime.settings
    missing = await _bootstrap(runtime)
    if missing and runtime.engine is not None:
        spawn(runtime.jobs, _build_trigram_indexes(runtime), "db.trigram_indexes")
    if not settings.auth_enabled:
        log.warning("app.auth_disabled", hint="every request is the user anonymous")
    elif not settings.admin_token:
        log.info("app.no_admin_token", hint="set NAVI_ADMIN_TOKEN to bootstrap an admin")
    if not settings.database_url and settings.db_embedded_check_seconds > 0:
        if embedded_server(settings.data_path) is not None:  # started by this process
            watchdog = EmbeddedWatchdog(settings.data_path, settings.db_embedded_check_seconds)
            runtime.embedded_watchdog = watchdog
            spawn(runtime.jobs, watchdog.run(), "db.embedded_watchdog")
    if background_jobs:
        for job in BACKGROUND_JOBS:
            every = job.interval(settings)
            if every > 0:
                run: Callable[[], Awaitable[object]] = functools.partial(job.run, runtime)
                key = job.leader_key(settings)
                if key is not None:  # one process at a time runs the tick (kernel/leader.py)
                    leaders = runtime.leader_sessions or runtime.session_factory
                    run = functools.partial(run_as_leader, leaders, key, run)
                spawn(runtime.jobs, periodic(runtime.jobs, job.name, every, run), job.name)
    freeze_startup_heap()  # after start-up: full GC passes stop walking its objects
    log.info("app.started", auth_enabled=settings.auth_enabled)


async def _build_trigram_indexes(runtime: Runtime) -> None:
    """`CREATE INDEX CONCURRENTLY` of the missing trigram indexes, outside a transaction
    and without a statement limit (it blocks no writer; on a large table it takes long).
    Behind a transaction pooler on `DATABASE_DIRECT_URL` (its session advisory lock and
    its statements need one server connection), or not at all without one."""
    engine = runtime.engine
    assert engine is not None
    own = None
    if behind_pooler(engine):
        settings = runtime.settings
        if not settings.database_direct_url:
            log.warning(
                "db.trigram_indexes_not_built",
                reason="behind a transaction pooler (DB_POOLER) without DATABASE_DIRECT_URL",
            )
            return
        engine = own = create_engine(direct_url(settings, ""), None, poolclass=NullPool)
    try:
        with statement_budget(0):
            async with engine.connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                await conn.run_sync(build_trigram_indexes)
    finally:
        if own is not None:
            await own.dispose()
