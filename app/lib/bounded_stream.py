"""A streamed response with a deadline on the whole and on each write.

Litestar's `Stream` waits for the client as long as the client wants: when it stops
reading, the server's flow control suspends the `send` of the next chunk, forever. A
`BoundedStream` gives each `send` at most `idle_seconds` and the whole body at most
`max_seconds`; past either the body stops where it is (the connection is closed without
the end of the response, so the client sees a cut transfer) and the iterator is closed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import structlog
from litestar.response import Stream
from litestar.response.base import ASGIResponse
from litestar.response.streaming import ASGIStreamingResponse
from litestar.types import Message, Receive, Send

log = structlog.get_logger()

#: How long closing the iterator after a cut may take (its `finally` blocks).
CLOSE_SECONDS = 5.0


class _BoundedASGIStream(ASGIStreamingResponse):
    """Litestar's streaming response, its `send_body` bounded. Made from a built one
    (`of`): Litestar's constructor arguments stay Litestar's business."""

    __slots__ = ("idle", "total", "what")

    idle: float
    total: float
    what: str

    @classmethod
    def of(
        cls, plain: ASGIStreamingResponse, idle: float, total: float, what: str
    ) -> _BoundedASGIStream:
        bounded = cls.__new__(cls)
        for klass in type(plain).__mro__:
            for slot in getattr(klass, "__slots__", ()):
                if hasattr(plain, slot):
                    setattr(bounded, slot, getattr(plain, slot))
        bounded.idle, bounded.total, bounded.what = idle, total, what
        return bounded

    async def send_body(self, send: Send, receive: Receive) -> None:
        stalled = False

        async def bounded_send(message: Message) -> None:
            nonlocal stalled
            with anyio.move_on_after(self.idle) as scope:
                await send(message)
            if scope.cancelled_caught:
                stalled = True
                raise TimeoutError

        try:
            with anyio.fail_after(self.total):
                await super().send_body(bounded_send, receive)
        except* TimeoutError:  # from the task group Litestar runs the body in
            reason = "idle" if stalled else "total"
            limit = self.idle if stalled else self.total
            log.warning("http.stream_cut", what=self.what, reason=reason, seconds=limit)
        finally:
            aclose = getattr(self.iterator, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_SECONDS):
                    await aclose()


class BoundedStream(Stream):
    """`Stream` whose body must be taken within `max_seconds`, and each write within
    `idle_seconds`; `what` names it in the log line of a cut."""

    __slots__ = ("idle_seconds", "max_seconds", "what")

    def __init__(
        self,
        content: AsyncIterator[bytes],
        *,
        idle_seconds: float,
        max_seconds: float,
        what: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(content, **kwargs)
        self.idle_seconds = idle_seconds
        self.max_seconds = max_seconds
        self.what = what

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> ASGIResponse:
        plain = super().to_asgi_response(*args, **kwargs)
        assert isinstance(plain, ASGIStreamingResponse)
        return _BoundedASGIStream.of(plain, self.idle_seconds, self.max_seconds, self.what)
