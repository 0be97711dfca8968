"""Server-Sent Events, parsed a line at a time (the same parser for the sync and the
async stream), and the turn's events decoded into their Structs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from navi_client._models import (
    CompressionEvent,
    DoneEvent,
    ErrorEvent,
    RecallEvent,
    ThinkingEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
    UnknownEvent,
    UsageEvent,
)

__all__ = ["SSEDecoder", "ServerSentEvent", "decode_event", "decode_event_data"]

_KNOWN = (
    TokenEvent
    | ThinkingEvent
    | UsageEvent
    | ToolCallEvent
    | ToolResultEvent
    | CompressionEvent
    | RecallEvent
    | DoneEvent
    | ErrorEvent
)
_TAGS = frozenset(
    str(cls.__struct_config__.tag)
    for cls in (
        TokenEvent,
        ThinkingEvent,
        UsageEvent,
        ToolCallEvent,
        ToolResultEvent,
        CompressionEvent,
        RecallEvent,
        DoneEvent,
        ErrorEvent,
    )
)
_ANY = msgspec.json.Decoder(Any)


@dataclass(slots=True)
class ServerSentEvent:
    event: str
    data: str
    id: str | None = None


@dataclass(slots=True)
class SSEDecoder:
    """Feed it the stream's lines (without their line breaks); it returns an event at
    each blank line that ends one (the WHATWG rules: `event`, `data` (joined by
    newlines), `id`; `:` comments and unknown fields ignored)."""

    _event: str = ""
    _data: list[str] = field(default_factory=list)
    _id: str | None = None

    def feed(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self.flush()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None

    def flush(self) -> ServerSentEvent | None:
        """The pending event (at a blank line, or at the end of the stream)."""
        if not self._data and not self._event:
            return None
        out = ServerSentEvent(self._event or "message", "\n".join(self._data), self._id)
        self._event, self._data = "", []
        return out


def decode_event_data(name: str | None, data: bytes | str) -> TurnEvent:
    """One turn event from its JSON (which names itself in `event`); an event this
    client does not know becomes an `UnknownEvent` rather than an error."""
    raw = data.encode() if isinstance(data, str) else data
    decoded: Any = None
    try:
        decoded = _ANY.decode(raw)
    except msgspec.DecodeError:
        return UnknownEvent(event=name or "message", data=raw.decode("utf-8", "replace"))
    if isinstance(decoded, dict):
        tag = decoded.get("event")
        if tag is None and name is not None:
            decoded = {**decoded, "event": name}
            tag = name
        if tag in _TAGS:
            try:
                event: TurnEvent = msgspec.convert(decoded, type=_KNOWN)
            except msgspec.ValidationError:
                pass
            else:
                return event
    tag = decoded.get("event") if isinstance(decoded, dict) else None
    return UnknownEvent(event=str(name or tag or "message"), data=decoded)


def decode_event(sse: ServerSentEvent) -> TurnEvent:
    return decode_event_data(sse.event, sse.data)
