"""The HTTP edge of the app: error handlers, the request middleware, the app-wide
guard, the `before_send` hook, CORS, and the `principal` dependency."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import structlog
from litestar import Request, Response
from litestar.config.cors import CORSConfig
from litestar.connection import ASGIConnection
from litestar.datastructures import MutableScopeHeaders
from litestar.exceptions import HTTPException, ValidationException
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from app.config import Settings
from app.console.web import on_http_error as console_error
from app.db.faults import (
    RETRY_AFTER_SECONDS,
    describe_db_error,
    statement_budget,
    unavailable_reason,
)
from app.db.replica import CURRENT_WRITER, WRITE_LSN_HEADER, format_lsn, writing_for
from app.domain.auth.services import resolve_cached
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.kernel.session_files import session_files_root
from app.lib.disk import disk_full, disk_full_cause
from app.lib.errors import AppError
from app.lib.request import validation_problem
from app.llm.deadline import llm_deadline

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
