"""The LLM errors, and how the ``ollama`` client's failures map onto them.

:class:`LLMError` is the base of every error the gateway (``app.llm.gateway``, which
re-exports them) and the embedders (``app.llm.embedders``) raise; the classification
below (``is_retryable``, ``error_kind``, ``describe``) is what the gateway's retry core
uses to turn a client failure into one of them.

How ollama 0.6.3's ``AsyncClient`` reports failures (see ``ollama/_client.py``):

* connection refused / DNS failure: ``httpx.ConnectError`` is re-raised as the builtin
  ``ConnectionError`` (``from None``, the httpx cause is dropped);
* connect/read/write timeouts: the raw ``httpx.TimeoutException`` subclasses
  (``ConnectTimeout``, ``ReadTimeout``, ...) propagate unchanged;
* other transport failures: raw ``httpx.TransportError`` (``RemoteProtocolError``,
  ``ReadError``, ...);
* any HTTP status >= 400: ``ollama.ResponseError(error, status_code)``, where ``error`` is the
  ``"error"`` field of a JSON body, or the raw body text;
* a 200 with a body that is not JSON: ``json.JSONDecodeError`` (a ``ValueError``) from
  ``httpx.Response.json()``; valid JSON with the wrong shape: ``pydantic.ValidationError``
  (also a ``ValueError``).
"""

from __future__ import annotations

import json

import httpx
import ollama
import pydantic

__all__ = [
    "MALFORMED_ERRORS",
    "TRANSPORT_ERRORS",
    "EmbeddingDimensionError",
    "EmbeddingDisabledError",
    "LLMError",
    "LLMRequestError",
    "LLMUnavailableError",
    "MalformedResponseError",
    "as_llm_error",
    "describe",
    "error_kind",
    "is_retryable",
]


# --------------------------------------------------------------------------- errors
class LLMError(Exception):
    """Base class of all gateway errors."""


class LLMUnavailableError(LLMError):
    """The LLM server is unreachable or kept failing (after retries)."""

    def __init__(
        self,
        message: str,
        *,
        operation: str = "",
        attempts: int = 0,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.operation = operation
        self.attempts = attempts
        self.cause = cause


class LLMRequestError(LLMError):
    """The LLM server rejected the request (HTTP 4xx, unknown model, invalid input)."""

    def __init__(
        self,
        message: str,
        *,
        operation: str = "",
        status_code: int | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.operation = operation
        self.status_code = status_code
        self.cause = cause


class EmbeddingDimensionError(LLMError):
    """The embedding model produced vectors of an unexpected dimension."""

    def __init__(self, expected: int, got: int, model: str) -> None:
        super().__init__(
            f"embedding model {model!r} returned vectors of dimension {got}, expected {expected}"
        )
        self.expected = expected
        self.got = got
        self.model = model


class EmbeddingDisabledError(LLMError):
    """Embeddings are switched off (``EMBEDDING_PROVIDER=none``): callers use text search."""


# --------------------------------------------------------------------------- classification
class MalformedResponseError(ValueError):
    """A 2xx response whose content does not make sense (e.g. wrong number of vectors)."""


TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    httpx.TransportError,  # ConnectError, ConnectTimeout, ReadTimeout, RemoteProtocolError, ...
    httpx.DecodingError,
    ConnectionError,  # ollama re-raises httpx.ConnectError as the builtin ConnectionError
    TimeoutError,  # == asyncio.TimeoutError on 3.11
)
MALFORMED_ERRORS: tuple[type[BaseException], ...] = (
    json.JSONDecodeError,
    pydantic.ValidationError,
    MalformedResponseError,
)


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, ollama.ResponseError):
        return exc.status_code >= 500
    return isinstance(exc, TRANSPORT_ERRORS + MALFORMED_ERRORS)


def error_kind(exc: BaseException) -> str:
    if isinstance(exc, ollama.ResponseError):
        return f"http{exc.status_code}"
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return "timeout"
    if isinstance(exc, httpx.ConnectError | ConnectionError):
        return "connect"
    if isinstance(exc, httpx.TransportError):
        return "transport"
    if isinstance(exc, MALFORMED_ERRORS + (httpx.DecodingError,)):
        return "malformed"
    return type(exc).__name__


def as_llm_error(operation: str, attempts: int, exc: BaseException) -> LLMError:
    """The gateway's error for a client failure that survived the retries: 4xx and bad
    requests are the caller's (LLMRequestError), the rest means unavailable."""
    if isinstance(exc, ollama.ResponseError) and exc.status_code < 500:
        if exc.status_code >= 400:
            message = f"{operation} rejected by LLM server: {exc.error} (HTTP {exc.status_code})"
            return LLMRequestError(
                message, operation=operation, status_code=exc.status_code, cause=exc
            )
        # e.g. an error line inside a stream (status -1)
        return LLMRequestError(f"{operation} failed: {exc.error}", operation=operation, cause=exc)
    if isinstance(exc, ollama.RequestError):
        return LLMRequestError(
            f"{operation}: invalid request: {exc.error}", operation=operation, cause=exc
        )
    return LLMUnavailableError(
        f"{operation} failed after {attempts} attempt(s) ({error_kind(exc)}): {describe(exc)}",
        operation=operation,
        attempts=attempts,
        cause=exc,
    )


def describe(exc: BaseException) -> str:
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {text[:300]}" if text else name
