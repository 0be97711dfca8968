"""One deadline for all the model calls made while serving one HTTP request.

The request middleware opens `llm_deadline(LLM_REQUEST_DEADLINE_SECONDS)` (a turn opens
its own, `TURN_DEADLINE_SECONDS`, in its place: app.domain.agents.turn_state); the gateway
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

REQUEST_BUDGET = "LLM_REQUEST_DEADLINE_SECONDS"

# (the monotonic time it passes, the setting it comes from: errors name it)
_deadline: ContextVar[tuple[float, str] | None] = ContextVar("navi_llm_deadline", default=None)


@contextmanager
def llm_deadline(seconds: float, setting: str = REQUEST_BUDGET) -> Iterator[None]:
    """Model calls in this context must end within `seconds` from now (0 = no limit)."""
    with llm_deadline_at(time.monotonic() + seconds if seconds > 0 else None, setting):
        yield


@contextmanager
def llm_deadline_at(at: float | None, setting: str = REQUEST_BUDGET) -> Iterator[None]:
    """Model calls in this context must end by the monotonic time `at` (None = no limit);
    `setting` names the budget in the error once it has passed."""
    token = _deadline.set(None if at is None else (at, setting))
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
    return None if deadline is None else deadline[0] - time.monotonic()


def budget() -> str:
    """The setting the deadline in force comes from."""
    deadline = _deadline.get()
    return REQUEST_BUDGET if deadline is None else deadline[1]
