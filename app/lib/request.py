"""The HTTP side of app/lib/inputs.py: the request class whose JSON body is depth-checked,
and the guard that refuses a NUL in any query or path parameter."""

from __future__ import annotations

import re
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import ValidationException
from litestar.handlers.base import BaseRouteHandler

from app.lib.errors import Unprocessable
from app.lib.inputs import MAX_JSON_DEPTH, NUL, check_depth, explain_pattern, reject_nul

__all__ = ["NaviRequest", "reject_nul_parameters", "validation_problem"]

_MISSING = re.compile(r"Missing required (\w+) parameter '([^']*)' for path ")


def validation_problem(exc: ValidationException) -> tuple[int, str]:
    """The status and the message of a request Litestar refused before the handler ran,
    naming the offending field(s): "limit: Expected `int` <= 200" (422; 413 for a body
    too large). The API answers it as JSON, the console as a page."""
    parts = []
    for item in exc.extra if isinstance(exc.extra, list) else []:
        if isinstance(item, dict):
            key = item.get("key") or item.get("source") or "body"
            parts.append(f"{key}: {explain_pattern(str(item.get('message', 'invalid')))}")
    detail = "; ".join(parts) or str(exc.detail)
    missing = _MISSING.match(detail)
    if missing:  # Litestar's wording echoes the whole URL: name the parameter instead
        detail = f"{missing.group(2)}: a required {missing.group(1)} parameter is missing"
    if "Content-Length" in detail or "too large" in detail.lower():
        return 413, detail
    return 422, detail


class NaviRequest(Request[Any, Any, Any]):
    """A request whose JSON body nests at most MAX_JSON_DEPTH levels: deeper → 422,
    before any schema, service or serializer could recurse into it."""

    async def json(self) -> Any:
        try:
            value = await super().json()
        except RecursionError:  # the decoder gave up far past the limit (≈ 1,000 levels)
            raise Unprocessable(
                f"body: JSON nested more than {MAX_JSON_DEPTH} levels deep"
            ) from None
        check_depth(value)
        return value


async def reject_nul_parameters(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """App-wide guard: a query or path parameter holding a NUL is a 422 naming it
    (PostgreSQL text cannot hold one; parameters are identifiers, never stored as-is)."""
    for name, value in connection.path_params.items():
        if isinstance(value, str):
            reject_nul(value, name)
    for name, value in connection.query_params.multi_items():
        if NUL in name:
            raise Unprocessable("query: a parameter name must not contain a NUL character")
        reject_nul(value, name)
