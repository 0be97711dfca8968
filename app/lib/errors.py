"""One error hierarchy, mapped to HTTP by one handler in app/asgi/http.py.

Body shape: `{"error": "<kind>", "detail": "<what is wrong>"}`.
"""

from __future__ import annotations


class AppError(Exception):
    status_code = 400
    kind = "bad_request"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class BadRequest(AppError):
    status_code = 400
    kind = "bad_request"


class Unauthorized(AppError):
    status_code = 401
    kind = "unauthorized"


class Forbidden(AppError):
    status_code = 403
    kind = "forbidden"


class NotFound(AppError):
    status_code = 404
    kind = "not_found"


class RequestTimeout(AppError):
    status_code = 408
    kind = "request_timeout"


class Conflict(AppError):
    status_code = 409
    kind = "conflict"


class PayloadTooLarge(AppError):
    status_code = 413
    kind = "payload_too_large"


class TooManyRequests(AppError):
    """429; the answer carries `Retry-After: retry_after` (whole seconds, at least 1)."""

    status_code = 429
    kind = "rate_limited"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = max(1, retry_after)


class UnsupportedMedia(AppError):
    status_code = 415
    kind = "unsupported_media_type"


class Unprocessable(AppError):
    status_code = 422
    kind = "unprocessable"


class InsufficientStorage(AppError):
    """507: the disk a write needed is full (ENOSPC); nothing of the request was kept."""

    status_code = 507
    kind = "insufficient_storage"
