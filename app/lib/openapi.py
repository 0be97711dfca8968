"""The OpenAPI document tells the truth about errors.

Every error this service sends has one body, `{"error": kind, "detail": text}`
(`app/lib/errors.py`, the handlers in `app/asgi/http.py`). Litestar documents only a 400 of its
own shape (`{status_code, detail, extra}`); `document_errors` replaces it and adds, to
every operation, the error statuses it can answer, by what the route is:

* every operation: 400 (malformed request), 422 (a value out of its rules), 503 (a
  dependency unavailable);
* behind authentication: 401 (no or a bad token), 403 (not allowed);
* with parameters, a body or behind authentication: 404 (a resource you may not see);
* with a body: 413 (too large), 415 (unsupported media type);
* writes (not GET/HEAD): 409 (a conflict with the stored state).

A route adds statuses of its own with `opt={"errors": [...]}` (the turn's 502 when the
model refuses; 507 where a request writes session files and the disk is full). A status the route documents itself (e.g. /health's 503 with its report)
is kept.
"""

from __future__ import annotations

from typing import Any

from litestar import Litestar
from litestar.openapi.spec import (
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Reference,
    Schema,
)
from litestar.routes import HTTPRoute

ERROR_SCHEMA = "Error"
_DESCRIPTIONS = {
    "400": "Malformed request (unreadable JSON, a parameter of the wrong type)",
    "401": "Missing or invalid bearer token",
    "403": "The caller may not do this",
    "404": "No such resource, or one the caller may not see",
    "409": "Conflicts with the stored state",
    "413": "Request body or a field too large",
    "415": "Unsupported media type",
    "429": "Too many requests of this kind (`rate_limited`); retry after `Retry-After` seconds",
    "422": "A value breaks the rules of its field (the detail names it)",
    "502": "The model server refused the request (`llm_rejected`)",
    "507": "The server's disk for session files is full (`insufficient_storage`); nothing "
    "was stored",
    "503": "A dependency (the database) is unavailable; retry after `Retry-After` seconds",
}
_LITESTAR_400 = "Bad request syntax or unsupported method"
_BODY_METHODS = {"POST", "PUT", "PATCH"}


def error_statuses(method: str, *, public: bool, has_params: bool) -> list[str]:
    """The error statuses an operation documents (see the module docstring)."""
    codes = {"400", "422", "503"}
    if not public:
        codes |= {"401", "403", "404"}
    if has_params or method in _BODY_METHODS:
        codes.add("404")
    if method in _BODY_METHODS:
        codes |= {"413", "415"}
    if method not in ("GET", "HEAD"):
        codes.add("409")
    return sorted(codes)


def _error_response(code: str) -> OpenAPIResponse:
    return OpenAPIResponse(
        description=_DESCRIPTIONS[code],
        content={
            "application/json": OpenAPIMediaType(
                schema=Reference(ref=f"#/components/schemas/{ERROR_SCHEMA}")
            )
        },
    )


def _has_params(handler: Any) -> bool:
    params = handler.parsed_fn_signature.parameters
    return any(name not in ("db", "principal", "settings", "state", "request") for name in params)


def document_errors(app: Litestar) -> None:
    """Rewrite the error responses of `app`'s OpenAPI document (built here, cached by
    Litestar, so `/schema/openapi.json` serves the result)."""
    spec = app.openapi_schema
    if spec.components.schemas is None:
        spec.components.schemas = {}
    spec.components.schemas[ERROR_SCHEMA] = Schema(
        type=OpenAPIType.OBJECT,
        required=["error", "detail"],
        properties={
            "error": Schema(type=OpenAPIType.STRING, description="the kind, e.g. not_found"),
            "detail": Schema(type=OpenAPIType.STRING, description="what is wrong"),
        },
    )
    for route in app.routes:
        if not isinstance(route, HTTPRoute) or spec.paths is None:
            continue
        item = spec.paths.get(route.path_format)
        if item is None:
            continue
        for handler in route.route_handlers:
            for method in handler.http_methods:
                operation = getattr(item, method.lower(), None)
                if operation is None:
                    continue
                responses = operation.responses if operation.responses is not None else {}
                operation.responses = responses
                default_400 = responses.get("400")
                if isinstance(default_400, OpenAPIResponse) and (
                    default_400.description == _LITESTAR_400
                ):
                    del responses["400"]
                codes = error_statuses(
                    method,
                    public=bool(handler.opt.get("public")),
                    has_params=bool(route.path_parameters) or _has_params(handler),
                )
                for code in sorted({*codes, *handler.opt.get("errors", ())}):
                    responses.setdefault(code, _error_response(code))
