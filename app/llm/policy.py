"""The gateway's call policy: bounded retries, the request's deadline, the host's breaker.

Every model call goes through :meth:`CallPolicy.call`: past the request's deadline
(``app.llm.deadline``), or while the host's circuit breaker (``app.llm.breaker``) takes it
as absent, it fails at once with :class:`LLMUnavailableError`; otherwise it is attempted
up to ``max_attempts`` times with exponential backoff + jitter (retryable failures only,
and only while the breaker stays closed), and whatever the client raised becomes an
``LLMError`` (``app.llm.errors``). Every call is timed and every failure counted by its
kind here (``navi_llm_call_seconds``, ``navi_llm_call_failures_total``: app/lib/metrics.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import ollama
import structlog
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from app.lib.metrics import LLM_CALL_FAILURES, LLM_CALL_SECONDS
from app.llm.breaker import CLOSED, CircuitBreaker, is_connection_failure
from app.llm.deadline import budget as deadline_budget
from app.llm.deadline import remaining as deadline_remaining
from app.llm.errors import (
    MALFORMED_ERRORS,
    TRANSPORT_ERRORS,
    LLMError,
    LLMUnavailableError,
    as_llm_error,
    describe,
    error_kind,
    is_retryable,
)

log = structlog.get_logger("app.llm.gateway")  # the gateway's events, named as before

T = TypeVar("T")

#: What the ollama client raises that the gateway turns into an LLMError.
CLIENT_ERRORS: tuple[type[BaseException], ...] = (
    ollama.ResponseError,
    ollama.RequestError,
    *TRANSPORT_ERRORS,
    *MALFORMED_ERRORS,
)


class CallPolicy:
    """Retries with backoff, within the request's deadline, through a circuit breaker."""

    def __init__(self, max_attempts: int, backoff_initial: float, backoff_max: float) -> None:
        if max_attempts <= 0:
            raise ValueError("max_attempts must be >= 1")
        self.max_attempts = max_attempts
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max

    async def call(
        self, operation: str, fn: Callable[[], Awaitable[T]], breaker: CircuitBreaker
    ) -> T:
        """`fn` with retries, within the request's deadline (``app.llm.deadline``) and
        through `breaker`; every failure is an ``LLMError``. Timed and counted."""
        started = time.perf_counter()
        outcome = "cancelled"  # unless it returns or raises
        try:
            result = await self._call(operation, fn, breaker)
            outcome = "ok"
            return result
        except Exception as exc:
            outcome = "error"
            LLM_CALL_FAILURES.labels(operation, failure_kind(exc)).inc()
            raise
        finally:
            LLM_CALL_SECONDS.labels(operation, outcome).observe(time.perf_counter() - started)

    async def _call(
        self, operation: str, fn: Callable[[], Awaitable[T]], breaker: CircuitBreaker
    ) -> T:
        left = deadline_remaining()
        if left is not None and left <= 0:
            raise self._out_of_time(operation)
        if not breaker.allow():
            raise tagged(
                LLMUnavailableError(
                    f"{operation}: Ollama at {breaker.host} is taken as absent (circuit "
                    f"breaker open, next probe in {breaker.retry_in():.0f}s)",
                    operation=operation,
                ),
                "breaker_open",
            )
        try:
            async with asyncio.timeout(left) as scope:
                return await self._attempts(operation, fn, breaker)
        except TimeoutError:
            if not scope.expired():
                raise
            breaker.abandon()
            raise self._out_of_time(operation) from None
        except asyncio.CancelledError:
            breaker.abandon()
            raise

    def _retrying(self, operation: str, breaker: CircuitBreaker) -> AsyncRetrying:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            log.warning(
                "llm.retry",
                operation=operation,
                attempt=state.attempt_number,
                max_attempts=self.max_attempts,
                error_kind=error_kind(exc) if exc is not None else "unknown",
                error=describe(exc) if exc is not None else None,
                sleep=round(state.upcoming_sleep, 3),
            )

        return AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=wait_exponential_jitter(
                multiplier=self.backoff_initial,
                max=self.backoff_max,
                jitter=self.backoff_initial,
            ),
            # No retry once the breaker has opened (or a probe failed): the host is absent.
            retry=retry_if_exception(lambda e: is_retryable(e) and breaker.state == CLOSED),
            before_sleep=before_sleep,
            reraise=True,
        )

    @staticmethod
    def _out_of_time(operation: str) -> LLMUnavailableError:
        log.info("llm.deadline_passed", operation=operation)
        return tagged(
            LLMUnavailableError(
                f"{operation}: the deadline for model calls ({deadline_budget()}) has passed",
                operation=operation,
            ),
            "deadline",
        )

    async def _attempts(
        self, operation: str, fn: Callable[[], Awaitable[T]], breaker: CircuitBreaker
    ) -> T:
        attempts = 0

        async def attempt() -> T:
            nonlocal attempts
            attempts += 1
            try:
                result = await fn()
            except Exception as exc:
                if is_connection_failure(exc):
                    breaker.failure()
                else:  # it answered, if badly: the host is there
                    breaker.success()
                raise
            breaker.success()
            return result

        try:
            return await self._retrying(operation, breaker)(attempt)
        except CLIENT_ERRORS as exc:
            error = as_llm_error(operation, attempts, exc)
            if isinstance(error, LLMUnavailableError) and breaker.state == CLOSED:
                # (an open breaker has said it in its own line)
                log.warning(
                    "llm.unavailable",
                    operation=operation,
                    attempts=attempts,
                    error_kind=error_kind(exc),
                )
            raise tagged(error, error_kind(exc)) from exc


E = TypeVar("E", bound=LLMError)


def tagged(error: E, kind: str) -> E:
    """`error`, labelled with the kind of failure the metrics count it under."""
    error.failure_kind = kind  # type: ignore[attr-defined]
    return error


def failure_kind(exc: BaseException) -> str:
    """The metrics' label of a failed call: the kind the policy tagged (timeout, connect,
    http503, breaker_open, deadline, ...), else the exception's type (a bounded set: the
    classes of our code and the client's)."""
    return getattr(exc, "failure_kind", None) or type(exc).__name__
