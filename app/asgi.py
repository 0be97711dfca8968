"""create_app(): routes, dependencies, error handlers, lifespan."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import structlog
from litestar import Litestar, Request, Response
from litestar.config.cors import CORSConfig
from litestar.connection import ASGIConnection
from litestar.contrib.jinja import JinjaTemplateEngine
from litestar.datastructures import MutableScopeHeaders
from litestar.di import Provide
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import ASGIMiddleware
from litestar.template.config import TemplateConfig
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import NullPool

from app import __version__
from app.config import Settings, get_settings
from app.console.web import TEMPLATES as CONSOLE_TEMPLATES
from app.console.web import on_http_error as console_error
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
from app.db.faults import (
    RETRY_AFTER_SECONDS,
    describe_db_error,
    statement_budget,
    unavailable_reason,
)
from app.db.replica import CURRENT_WRITER, WRITE_LSN_HEADER, ReplicaRouter, format_lsn, writing_for
from app.db.write_positions import WritePositions
from app.domain.agents.mcp import NaviMCP
from app.domain.auth.services import bootstrap, resolve_cached
from app.domain.context.lifecycle import ContextSessionHooks
from app.domain.kernel.deps import (
    provide_db,
    provide_primary_db,
    provide_read_db,
    provide_runtime,
    provide_session_access,
    provide_settings,
)
from app.domain.kernel.jobs import periodic, spawn
from app.domain.kernel.leader import run_as_leader
from app.domain.kernel.principal import Principal
from app.domain.kernel.principal_cache import PrincipalCache
from app.domain.kernel.profiles import Profiles, load_profiles
from app.domain.kernel.runtime import Runtime
from app.domain.kernel.session_files import session_files_root
from app.domain.raw_history.hooks import raw_history_hook
from app.domain.system.controllers import PROMETHEUS
from app.lib.disk import disk_full, disk_full_cause
from app.lib.docs_ui import openapi_config
from app.lib.errors import AppError
from app.lib.logging import configure_logging
from app.lib.metrics import POOL
from app.lib.openapi import document_errors
from app.lib.request import NaviRequest, reject_nul_parameters, validation_problem
from app.lib.runtime import freeze_startup_heap
from app.lib.tracing import tracing_plugin
from app.llm.deadline import llm_deadline
from app.llm.factory import build_gateway
from app.routes import BACKGROUND_JOBS, ROUTE_HANDLERS

log = structlog.get_logger()


def _error(
    status: int, kind: str, detail: str, retry_after: int | None = None
) -> Response[dict[str, str]]:
    if retry_after is None and status == 503:
        retry_after = RETRY_AFTER_SECONDS
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return Response({"error": kind, "detail": detail}, status_code=status, headers=headers)


def handle_app_error(_: Request, exc: AppError) -> Response[dict[str, str]]:
    return _error(exc.status_code, exc.kind, exc.detail, getattr(exc, "retry_after", None))


def handle_validation(_: Request, exc: ValidationException) -> Response[dict[str, str]]:
    status, detail = validation_problem(exc)
    return _error(status, "payload_too_large" if status == 413 else "unprocessable", detail)


def handle_http(request: Request, exc: HTTPException) -> Response[Any]:
    if (
        request.url.path.startswith("/console/")
        and request.app.state.runtime.settings.console_enabled
    ):
        return console_error(request, exc)  # a mistyped console address: a page, not JSON
    kinds = {
        404: "not_found",
        405: "method_not_allowed",
        413: "payload_too_large",
        401: "unauthorized",
    }
    return _error(exc.status_code, kinds.get(exc.status_code, "http_error"), str(exc.detail))


def handle_internal(request: Request, exc: Exception) -> Response[dict[str, str]]:
    reason = unavailable_reason(exc)
    if reason is not None:  # the database, not a bug: 503 with Retry-After
        log.warning("db.unavailable", reason=reason, error=describe_db_error(exc))
        runtime: Runtime | None = request.app.state.get("runtime")  # None before start-up
        watchdog = runtime.embedded_watchdog if runtime is not None else None
        if watchdog is not None:
            watchdog.poke()
        return _error(503, "unavailable", f"{reason}; retry later")
    full = disk_full_cause(exc)
    if full is not None:  # a writer that did not say so itself: still 507, never 500
        err = disk_full(_full_path(request, full), full, request_path=request.url.path)
        return _error(err.status_code, err.kind, err.detail)
    log.exception("http.internal_error", error_type=type(exc).__name__)
    return _error(500, "internal", "internal error; see the server log for the request id")


def _full_path(request: Request, exc: OSError) -> Path:
    """The path a full-disk error names, else the session files folder."""
    if isinstance(exc.filename, str):
        return Path(exc.filename)
    runtime: Runtime | None = request.app.state.get("runtime")
    return session_files_root(runtime.settings) if runtime is not None else Path.cwd()


def _loggable_path(path: str) -> str:
    # Share tokens travel in the path of the share API: never write them to a log.
    if path.startswith("/shared/"):
        return "/shared/[redacted]" + ("/messages" if path.endswith("/messages") else "")
    return path


class RequestContextMiddleware(ASGIMiddleware):
    """Binds a request id to every log line of the request and logs one access line."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        headers = dict(scope.get("headers") or [])
        raw = headers.get(b"x-request-id", b"").decode("latin-1")
        request_id = raw if raw and len(raw) <= 64 and raw.isascii() else uuid.uuid4().hex
        structlog.contextvars.bind_contextvars(request_id=request_id)
        settings = self.settings
        status = 500
        started = time.perf_counter()

        async def send_wrapper(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            # One budget per request: database statements and model calls.
            with (
                statement_budget(settings.db_statement_timeout_seconds),
                llm_deadline(settings.llm_request_deadline_seconds),
            ):
                await next_app(scope, receive, send_wrapper)
        finally:
            log.info(
                "http.request",
                method=scope.get("method"),
                path=_loggable_path(scope.get("path", "")),
                status=status,
                ms=round((time.perf_counter() - started) * 1000, 2),
            )
            structlog.contextvars.clear_contextvars()


async def authenticate(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """App-wide guard: resolve the caller before any parameter is parsed, so a request
    without a valid token is a 401 whatever else is wrong with it. Public routes opt out
    with `opt={"public": True}` (and the OpenAPI pages under /schema), a route with its
    own guard with `opt={"own_auth": True}` (/metrics); so does `OPTIONS` (Litestar's
    generated handler: it names the allowed methods and reads nothing)."""
    handler = connection.route_handler
    if (
        handler.opt.get("public")
        or handler.opt.get("own_auth")
        or connection.scope["path"].startswith("/schema")
        or connection.scope.get("method") == "OPTIONS"
    ):
        return
    runtime: Runtime = connection.app.state.runtime
    principal = await resolve_cached(
        runtime.session_factory,
        runtime.settings,
        runtime.principal_cache,
        connection.headers.get("authorization"),
    )
    connection.state.principal = principal
    writing_for(principal.id)  # this request's commits are its caller's (db/replica.py)


async def security_headers(message: Message, _: Scope) -> None:
    """`before_send` hook: every response, including the router's own 404/405 and the
    error handlers', tells browsers not to guess its content type; the response to a
    write carries its WAL position when a read replica is configured."""
    if message["type"] == "http.response.start":
        headers = MutableScopeHeaders.from_message(message)
        headers["X-Content-Type-Options"] = "nosniff"
        mark = CURRENT_WRITER.get()
        if mark is not None and mark.lsn:  # a write committed, a replica configured
            headers[WRITE_LSN_HEADER] = format_lsn(mark.lsn)  # read-your-writes


def cors_config(settings: Settings) -> CORSConfig | None:
    """CORS_ALLOW_ORIGINS (empty = off). Bearer tokens, no cookies: no credentials mode.
    Litestar answers a preflight before routing, so it needs no token."""
    if not settings.cors_origins:
        return None
    return CORSConfig(
        allow_origins=list(settings.cors_origins),
        allow_headers=[
            "Authorization",
            "Content-Type",
            "X-Navi-Session-Id",
            "X-Request-ID",
            "Navi-Min-LSN",
        ],
        expose_headers=["X-Request-ID", "Retry-After", WRITE_LSN_HEADER],
    )


def provide_principal(request: Request) -> Principal:
    return request.state.principal


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


def _lifespan(
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
    while True:
        try:
            async with transaction(runtime.session_factory) as session:
                await bootstrap(session, runtime.settings)
                # trigram indexes appear once pg_trgm exists: a catalog read, DDL only when
                # one is missing, and then concurrently, in the background
                # (app/db/extensions.py)
                conn = await session.connection()
                return bool(await conn.run_sync(trigram_indexes_missing))
        except Exception as exc:
            reason = unavailable_reason(exc)
            if reason is None or time.monotonic() + delay > deadline:
                raise
            log.warning("app.start_waits_for_database", reason=reason, retry_in_seconds=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


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


def create_app(
    settings: Settings | None = None,
    *,
    database_url: str | None = None,
    engine: AsyncEngine | None = None,
    background_jobs: bool = True,
) -> Litestar:
    settings = settings or get_settings()
    configure_logging(settings.log_level, settings.log_json)
    profiles = load_profiles(settings)  # a bad NAVI_PROFILES_FILE fails here, by field
    tracing = tracing_plugin(settings.otel_endpoint, service="navi")  # None when unset

    app = Litestar(
        route_handlers=ROUTE_HANDLERS,
        dependencies={
            "db": Provide(provide_db),
            "read_db": Provide(provide_read_db),
            "primary_db": Provide(provide_primary_db),
            "principal": Provide(provide_principal, sync_to_thread=False),
            "settings": Provide(provide_settings, sync_to_thread=False),
            "runtime": Provide(provide_runtime, sync_to_thread=False),
            "access": Provide(provide_session_access, sync_to_thread=False),
        },
        exception_handlers={
            AppError: handle_app_error,
            ValidationException: handle_validation,
            NotFoundException: handle_http,
            HTTPException: handle_http,
            Exception: handle_internal,
        },
        guards=[authenticate, reject_nul_parameters],
        middleware=[RequestContextMiddleware(settings), PROMETHEUS.middleware],
        plugins=[tracing[0]] if tracing else [],
        on_shutdown=[tracing[1]] if tracing else [],
        before_send=[security_headers],
        cors_config=cors_config(settings),
        lifespan=[_lifespan(settings, profiles, database_url, engine, background_jobs)],
        request_class=NaviRequest,
        template_config=TemplateConfig(directory=CONSOLE_TEMPLATES, engine=JinjaTemplateEngine),
        openapi_config=openapi_config(title="Navi", version=__version__),
        request_max_body_size=settings.max_request_body_mb * 1024 * 1024,
        debug=False,
        # Litestar's default logging config puts its own format on the root logger;
        # configure_logging's (structlog for every line) is the one.
        logging_config=None,
    )
    document_errors(app)  # the spec lists each route's real error responses
    return app


def create_app_from_env() -> Litestar:
    """`uvicorn --factory` entry of the worker processes of `navi serve` when
    WEB_CONCURRENCY > 1: settings (and the resolved DATABASE_URL) from the environment."""
    return create_app()
