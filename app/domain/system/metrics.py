"""GET /metrics: the Prometheus text exposition (Litestar's PrometheusController).

Protected by a bearer token on the service's own port (docs/operations.md, "Metrics"):
`METRICS_TOKEN`, a token that grants nothing but this page, or an admin's token. Without
a token 401, with another valid token 403. In local mode (`NAVI_AUTH_ENABLED=false`)
anyone may read it, like every other route.
"""

from __future__ import annotations

import hmac

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.plugins.prometheus import PrometheusConfig, PrometheusController

from app.config import Settings
from app.domain.auth.services import bearer_token, resolve_cached
from app.domain.kernel.principal import PERM_USERS_ADMIN
from app.lib.errors import Forbidden


async def metrics_access(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """The scraper's token (compared in constant time), else an admin's. `OPTIONS` is
    Litestar's generated handler (it names the allowed methods): open, as everywhere."""
    if connection.scope.get("method") == "OPTIONS":
        return
    state = connection.app.state
    settings: Settings = state.settings
    authorization = connection.headers.get("authorization")
    token = bearer_token(authorization)
    if settings.metrics_token and token and hmac.compare_digest(token, settings.metrics_token):
        return
    principal = await resolve_cached(
        state.session_factory, settings, state.principal_cache, authorization
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


#: Request latency per route *template* (`/sessions/{session_id}`, not the raw path:
#: bounded series) and status: `navi_http_request_duration_seconds`, `…_requests_total`,
#: `…_requests_in_progress`, `…_requests_error_total`. Unrouted paths (404s of the router)
#: are left out for the same reason.
PROMETHEUS = PrometheusConfig(
    app_name="navi", prefix="navi_http", group_path=True, exclude_unhandled_paths=True
)
