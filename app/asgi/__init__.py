"""create_app(): routes, dependencies, error handlers, lifespan (`http.py`, `lifespan.py`)."""

from __future__ import annotations

from litestar import Litestar
from litestar.contrib.jinja import JinjaTemplateEngine
from litestar.di import Provide
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.template.config import TemplateConfig
from sqlalchemy.ext.asyncio import AsyncEngine

from app import __version__
from app.asgi.http import (
    RequestContextMiddleware,
    authenticate,
    cors_config,
    handle_app_error,
    handle_http,
    handle_internal,
    handle_validation,
    provide_principal,
    security_headers,
)
from app.asgi.lifespan import make_lifespan
from app.config import Settings, get_settings
from app.console.web import TEMPLATES as CONSOLE_TEMPLATES
from app.domain.kernel.deps import (
    provide_db,
    provide_primary_db,
    provide_read_db,
    provide_runtime,
    provide_session_access,
    provide_settings,
)
from app.domain.kernel.profiles import load_profiles
from app.domain.system.controllers import PROMETHEUS
from app.lib.docs_ui import openapi_config
from app.lib.errors import AppError
from app.lib.logging import configure_logging
from app.lib.openapi import document_errors
from app.lib.request import NaviRequest, reject_nul_parameters
from app.lib.tracing import tracing_plugin
from app.routes import ROUTE_HANDLERS


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
        lifespan=[make_lifespan(settings, profiles, database_url, engine, background_jobs)],
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
