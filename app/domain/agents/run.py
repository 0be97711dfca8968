"""A turn running as its own task, its events read as Server-Sent Events or gathered
into one JSON answer.

The task is apart from the request so a client that goes away cannot cut a step's
transaction in half: the reader tells the loop (``interrupt``), which cuts only the
model call and saves what it produced.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import structlog

from app.db.faults import unavailable_reason
from app.domain.agents.schemas import PendingCall, TurnOut, TurnStatus
from app.domain.agents.stream import Done, ErrorEvent, Thinking, Token, TurnEvent, sse
from app.domain.agents.turns import TurnLoop
from app.domain.compression import ContextTooLargeError
from app.domain.kernel.jobs import Jobs
from app.lib.errors import AppError
from app.llm.errors import LLMError, LLMRequestError

log = structlog.get_logger("app.agents.turns")

__all__ = ["TurnRun"]


def error_event(exc: BaseException) -> ErrorEvent:
    if isinstance(exc, LLMRequestError):
        return ErrorEvent("llm_rejected", str(exc), 502)
    if isinstance(exc, LLMError):
        return ErrorEvent("llm_unavailable", str(exc), 503)
    if isinstance(exc, ContextTooLargeError):
        return ErrorEvent("context_too_large", exc.message, 422)
    if isinstance(exc, AppError):  # e.g. the session deleted while its turn ran: 404
        return ErrorEvent(exc.kind, exc.detail, exc.status_code)
    reason = unavailable_reason(exc)
    if reason is not None:  # the database, not a bug: a 503 as every route answers it
        return ErrorEvent("unavailable", reason, 503)
    return ErrorEvent("internal", f"the turn failed ({type(exc).__name__})", 500)


class TurnRun:
    def __init__(self, jobs: Jobs, loop: TurnLoop, first: list[TurnEvent]) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[TurnEvent] = asyncio.Queue()
        for ev in first:
            self.queue.put_nowait(ev)
        self.task = asyncio.create_task(self._run(), name="agents.turn")
        jobs.tasks.add(self.task)  # cancelled at shutdown (the model call's output saved)
        self.task.add_done_callback(jobs.tasks.discard)

    async def _run(self) -> None:
        try:
            self.queue.put_nowait(await self.loop.run(self.queue.put_nowait))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            ev = error_event(exc)
            (log.exception if ev.status == 500 else log.warning)(
                "turn.failed",
                session_id=str(self.loop.session_id),
                error=ev.error,
                detail=ev.detail,
            )
            self.queue.put_nowait(ev)

    async def events(self) -> AsyncIterator[TurnEvent]:
        """The turn's events up to ``done`` or ``error``; a reader that stops early
        interrupts the turn."""
        try:
            while True:
                ev = await self.queue.get()
                yield ev
                if isinstance(ev, Done | ErrorEvent):
                    return
        finally:
            if not self.task.done():
                self.loop.interrupt(self.task)

    async def sse(self) -> AsyncIterator[bytes]:
        async for ev in self.events():
            yield sse(ev)

    async def answer(self) -> tuple[TurnOut, ErrorEvent | None]:
        """The JSON answer (deltas joined) and the error that ended the turn, if any."""
        events: list[TurnEvent] = []
        content, thinking = [], []
        last: TurnEvent | None = None
        async for ev in self.events():
            last = ev
            if isinstance(ev, Token):
                content.append(ev.text)
            elif isinstance(ev, Thinking):
                thinking.append(ev.text)
            else:
                events.append(ev)
        loop = self.loop
        status: TurnStatus = "failed"
        pending: list[dict[str, Any]] = []
        text = "".join(content)  # a failed turn: what came before the failure
        if isinstance(last, Done):
            status = last.status  # type: ignore[assignment]
            pending, text = last.pending, last.content
        out = TurnOut(
            session_id=loop.session_id,
            status=status,
            content=text,
            thinking="".join(thinking) or None,
            rounds=loop.rounds,
            tool_call_count=loop.tool_call_count,
            elapsed_seconds=isinstance(last, Done) and last.elapsed_seconds or 0.0,
            pending=[PendingCall(**p) for p in pending],
            events=events,
        )
        return out, last if isinstance(last, ErrorEvent) else None
