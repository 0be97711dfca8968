"""The answers read as they arrive: a turn's Server-Sent Events and an export's NDJSON
lines, for the sync client (`TurnStream`, `ExportStream`) and the async one
(`AsyncTurnStream`, `AsyncExportStream`), over the same SSE parser and event decoding."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from types import TracebackType
from typing import IO, Any

import httpx
import msgspec

from navi_client._models import DoneEvent, ErrorEvent, TurnEvent
from navi_client._sse import SSEDecoder, decode_event

__all__ = ["AsyncExportStream", "AsyncTurnStream", "ExportStream", "TurnStream"]

_RECORD = msgspec.json.Decoder(dict[str, Any])


class _TurnState:
    """What a turn's stream has shown so far."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        #: the `done` event, once it arrived (`status`, final `content`, `pending`)
        self.done: DoneEvent | None = None
        #: the `error` event, if the turn failed (nothing follows it)
        self.error: ErrorEvent | None = None
        self._decoder = SSEDecoder()

    def _events(self, line: str | None) -> list[TurnEvent]:
        sse = self._decoder.flush() if line is None else self._decoder.feed(line)
        if sse is None:
            return []
        event = decode_event(sse)
        if isinstance(event, DoneEvent):
            self.done = event
        elif isinstance(event, ErrorEvent):
            self.error = event
        return [event]

    @property
    def requires_action(self) -> bool:
        """The turn ended asking for the client's tools (`done.pending`)."""
        return self.done is not None and self.done.status == "requires_action"


class TurnStream(_TurnState):
    """A turn's events as they arrive: iterate it (once). The connection is closed at
    the end of the stream, by `close()`, or when a `with` block ends; leaving early
    interrupts the turn (what the model produced so far is saved)."""

    def __iter__(self) -> Iterator[TurnEvent]:
        try:
            for line in self.response.iter_lines():
                yield from self._events(line)
            yield from self._events(None)
        finally:
            self.response.close()

    def close(self) -> None:
        self.response.close()

    def __enter__(self) -> TurnStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncTurnStream(_TurnState):
    """`TurnStream` for `AsyncNavi`: `async for event in stream`."""

    async def __aiter__(self) -> AsyncIterator[TurnEvent]:
        try:
            async for line in self.response.aiter_lines():
                for event in self._events(line):
                    yield event
            for event in self._events(None):
                yield event
        finally:
            await self.response.aclose()

    async def aclose(self) -> None:
        await self.response.aclose()

    async def __aenter__(self) -> AsyncTurnStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _open_target(target: str | os.PathLike[str] | IO[bytes]) -> tuple[IO[bytes], bool]:
    if isinstance(target, str | os.PathLike):
        return open(target, "wb"), True
    return target, False


class ExportStream:
    """An export (`GET /me/export`, NDJSON) as it arrives: iterate it for the records
    (dicts, each with its `type`; the first is the `header`, the last the `end`), or
    `iter_bytes()` / `save(path)` to keep the file as the service wrote it (what
    `import_account` takes)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            for line in self.response.iter_lines():
                if line.strip():
                    yield _RECORD.decode(line)
        finally:
            self.response.close()

    def iter_bytes(self) -> Iterator[bytes]:
        try:
            yield from self.response.iter_bytes()
        finally:
            self.response.close()

    def save(self, target: str | os.PathLike[str] | IO[bytes]) -> int:
        """Write the export to a path or a binary file; the number of bytes written."""
        out, owned = _open_target(target)
        written = 0
        try:
            for chunk in self.iter_bytes():
                written += out.write(chunk)
        finally:
            if owned:
                out.close()
        return written

    def close(self) -> None:
        self.response.close()

    def __enter__(self) -> ExportStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncExportStream:
    """`ExportStream` for `AsyncNavi`."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        try:
            async for line in self.response.aiter_lines():
                if line.strip():
                    yield _RECORD.decode(line)
        finally:
            await self.response.aclose()

    async def iter_bytes(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.response.aiter_bytes():
                yield chunk
        finally:
            await self.response.aclose()

    async def save(self, target: str | os.PathLike[str] | IO[bytes]) -> int:
        out, owned = _open_target(target)
        written = 0
        try:
            async for chunk in self.iter_bytes():
                written += out.write(chunk)
        finally:
            if owned:
                out.close()
        return written

    async def aclose(self) -> None:
        await self.response.aclose()

    async def __aenter__(self) -> AsyncExportStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
