"""Exceptions: every non-2xx answer of the service raises a `NaviError` subclass carrying
the `{"error", "detail"}` body (docs/api.md)."""

from __future__ import annotations

import email.utils
import math
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec

__all__ = [
    "BadGateway",
    "BadRequest",
    "ClientError",
    "Conflict",
    "ContextTooLarge",
    "Forbidden",
    "MethodNotAllowed",
    "NaviError",
    "NotFound",
    "PayloadTooLarge",
    "ServerError",
    "Unauthorized",
    "Unavailable",
    "Unprocessable",
    "UnsupportedMediaType",
    "error_for",
    "parse_retry_after",
]


class NaviError(Exception):
    """A non-2xx answer.

    `status` is the HTTP status, `error` the body's kind (`not_found`, `conflict`,
    `unprocessable`, `llm_unavailable`, …), `detail` what is wrong, `body` the whole
    decoded body (some errors carry more, e.g. `context_too_large`'s `tokens` and
    `limit`), `headers` the response's headers.
    """

    status: int

    def __init__(
        self,
        status: int,
        error: str,
        detail: str,
        body: dict[str, Any] | None = None,
        headers: httpx.Headers | None = None,
    ) -> None:
        super().__init__(f"{status} {error}: {detail}")
        self.status = status
        self.error = error
        self.detail = detail
        self.body = body if body is not None else {"error": error, "detail": detail}
        self.headers = headers if headers is not None else httpx.Headers()

    @property
    def request_id(self) -> str | None:
        """The service's `X-Request-ID` of the failed request (for its log), if any."""
        value = self.headers.get("x-request-id")
        return str(value) if value is not None else None


class ClientError(NaviError):
    """A 4xx answer without a class of its own."""


class ServerError(NaviError):
    """A 5xx answer without a class of its own (500 `internal`: see the server log)."""


class BadRequest(ClientError):
    """400: a malformed request (e.g. a truncated multipart body)."""


class Unauthorized(ClientError):
    """401: no token, or a token the service does not know (revoked, deleted user)."""


class Forbidden(ClientError):
    """403: something you may see but not change, or a permission you lack."""


class NotFound(ClientError):
    """404: absent, or not yours to see (Navi never confirms that another's exists)."""


class MethodNotAllowed(ClientError):
    """405."""


class Conflict(ClientError):
    """409: e.g. deleting a built-in user, compacting an already compact context,
    importing into an account that is not empty, resuming a turn with nothing pending."""


class PayloadTooLarge(ClientError):
    """413: a body, file or value over its limit."""


class UnsupportedMediaType(ClientError):
    """415: e.g. an executable upload, or an image that is not PNG/JPEG/GIF/WebP."""


class Unprocessable(ClientError):
    """422: a field out of its bounds; `detail` names it."""


class ContextTooLarge(Unprocessable):
    """422 `context_too_large`: the context cannot fit the window even after
    compression (a compression that ran is kept). `tokens` and `limit` from the body."""

    @property
    def tokens(self) -> int | None:
        value = self.body.get("tokens")
        return value if isinstance(value, int) else None

    @property
    def limit(self) -> int | None:
        value = self.body.get("limit")
        return value if isinstance(value, int) else None


class BadGateway(ServerError):
    """502 `llm_rejected`: the model server refused the turn's request."""


class Unavailable(ServerError):
    """503: the database (`unavailable`, with `Retry-After`: the client retries those,
    within its bounds) or the model (`llm_unavailable`, never retried: the turn's user
    message is already stored)."""

    @property
    def retry_after(self) -> float | None:
        """The `Retry-After` of the answer, in seconds, if it had one."""
        return parse_retry_after(self.headers.get("retry-after"))


class InsufficientStorage(ServerError):
    """507 `insufficient_storage`: the server's disk for session files is full; nothing
    of the request was stored (not retried: it succeeds once the operator made room)."""


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """`Retry-After` in seconds: a number of seconds or an HTTP date; None when absent
    or unreadable (then the answer is not retried)."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(0.0, seconds)


_BY_STATUS: dict[int, type[NaviError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    422: Unprocessable,
    502: BadGateway,
    503: Unavailable,
    507: InsufficientStorage,
}

_BODY = msgspec.json.Decoder(dict[str, Any])


def error_for(status: int, content: bytes, headers: httpx.Headers | None = None) -> NaviError:
    """The exception of an answer: its class from the status (and `context_too_large`
    from the body), its fields from the `{"error", "detail"}` body; a body that is not
    that shape (a proxy's HTML page) becomes `error` `http_<status>` with the text."""
    body: dict[str, Any] | None = None
    try:
        decoded = _BODY.decode(content) if content else None
    except msgspec.DecodeError:
        decoded = None
    if isinstance(decoded, dict):
        body = decoded
    error = str(body.get("error")) if body and body.get("error") is not None else f"http_{status}"
    if body and isinstance(body.get("detail"), str):
        detail = body["detail"]
    elif body and "detail" in body:
        detail = str(body["detail"])
    else:
        detail = content.decode("utf-8", "replace")[:500] if content else ""
    if status == 422 and error == "context_too_large":
        cls: type[NaviError] = ContextTooLarge
    else:
        cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ClientError)
    return cls(status, error, detail, body, headers)
