"""One deadline for all the model calls made while serving one HTTP request.

The request middleware opens `llm_deadline(LLM_REQUEST_DEADLINE_SECONDS)`; the gateway
(`app.llm.gateway`) bounds every call by what is left of it and fails at once, with
`LLMUnavailableError`, once it has passed — callers degrade as when Ollama is down.
Outside a request (background jobs, CLI commands) there is no deadline: each call is
bounded by `OLLAMA_TIMEOUT` and the retries. A task started from a request (`spawn`)
drops the request's deadline with `no_deadline()`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_deadline: ContextVar[float | None] = ContextVar("navi_llm_deadline", default=None)


@contextmanager
def llm_deadline(seconds: float) -> Iterator[None]:
    """Model calls in this context must end within `seconds` from now (0 = no limit)."""
    token = _deadline.set(time.monotonic() + seconds if seconds > 0 else None)
    try:
        yield
    finally:
        _deadline.reset(token)


def no_deadline() -> None:
    """Drop the deadline in the current context (a background task started by a request)."""
    _deadline.set(None)


def remaining() -> float | None:
    """Seconds left before the deadline (≤ 0 when passed), None when there is none."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()
