"""A circuit breaker per Ollama host: an absent server costs one failed probe per
interval, not retries on every call.

* **closed**: calls go through; `failures` consecutive connection failures (refused,
  connect timeout — counted per attempt, retries included) open it, with one warning.
* **open**: calls fail at once (`allow()` is False): no connection, no retry, no log.
* **half-open**: `reset_after` seconds after it opened, the next call is let through
  alone as a probe (one attempt). Its success closes the breaker (logged); a connection
  failure opens it for another interval.

Any answer from the server, even an error status or a slow reply, counts as a success:
the breaker is about presence; slowness is bounded by the request deadline
(`app.llm.deadline`). The clock is injectable for tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import structlog

log = structlog.get_logger(__name__)

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


def is_connection_failure(exc: BaseException) -> bool:
    """The host could not be reached at all (ollama re-raises httpx.ConnectError as the
    builtin ConnectionError)."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | ConnectionError)


class CircuitBreaker:
    def __init__(
        self,
        host: str,
        failures: int = 3,
        reset_after: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failures < 1:
            raise ValueError("failures must be >= 1")
        self.host = host
        self.threshold = failures
        self.reset_after = reset_after
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> str:
        if self._opened_at is None:
            return CLOSED
        return HALF_OPEN if self._probing else OPEN

    def retry_in(self) -> float:
        """Seconds until the next probe may go (0 when closed or due)."""
        if self._opened_at is None:
            return 0.0
        return max(0.0, self._opened_at + self.reset_after - self._clock())

    def allow(self) -> bool:
        """May a call go now? When open and due, this call becomes the probe."""
        if self._opened_at is None:
            return True
        if self._probing or self.retry_in() > 0:
            return False
        self._probing = True
        return True

    def success(self) -> None:
        if self._opened_at is not None:
            log.info("llm.breaker_closed", host=self.host)
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def failure(self) -> None:
        """A connection failure."""
        if self._opened_at is not None:  # the probe failed: another interval
            self._opened_at = self._clock()
            self._probing = False
            log.info("llm.breaker_probe_failed", host=self.host, retry_in=self.reset_after)
            return
        self._failures += 1
        if self._failures >= self.threshold:
            self._opened_at = self._clock()
            log.warning(
                "llm.breaker_open",
                host=self.host,
                failures=self._failures,
                hint=f"Ollama taken as absent: calls fail at once, one probe every "
                f"{self.reset_after:g}s",
            )

    def abandon(self) -> None:
        """The call ended without a verdict (cancelled, deadline): a probe in flight is
        counted as failed, so another may go after the interval."""
        if self._probing:
            self._opened_at = self._clock()
            self._probing = False
