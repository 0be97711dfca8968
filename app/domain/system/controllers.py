"""GET /health, /health/ready, /health/live: answered from the process's probes
(`health.py`: at most one per `HEALTH_CHECK_SECONDS`, single flight).

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

from app.config import Settings
from app.db.faults import statement_budget
from app.domain.auth.services import bearer_token, resolve_cached
from app.domain.kernel.principal import PERM_USERS_ADMIN
from app.domain.kernel.repositories import EmbedBacklogRepository
from app.domain.kernel.runtime import Runtime
from app.domain.system.health import health_report, ready_report
from app.domain.system.schemas import HealthOut, LiveOut, ReadyOut
from app.lib.errors import Forbidden
from app.lib.metrics import INDEX_BACKLOG_CHUNKS, INDEX_BACKLOG_OLDEST_SECONDS

log = structlog.get_logger()

#: How long a /metrics scrape waits for the embedding backlog before leaving it out.
BACKLOG_SECONDS = 1.0


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
    """The request metrics of the Prometheus plugin (app/asgi/__init__.py) and ours
    (app/lib/metrics.py), in the Prometheus text format."""

    path = "/metrics"
    opt = {"own_auth": True}  # `metrics_access`, not the app-wide guard (app/asgi/http.py)
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
