"""The turn's events: one msgspec Struct each, tagged by its SSE event name.

A turn emits, in order (docs/agents.md, "The turn endpoint"):
``compression``* (pre-turn) ``recall``? then per round (``thinking`` | ``token``)*
``usage`` ``tool_call``* ``tool_result``* ``compression``* (mid-turn, before the next
round), after the last round ``compression``* (post-turn), and last ``done`` or ``error``.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from app.domain.kernel.events import CompressionStarted, ContextCompressed, ContextEvent

__all__ = [
    "Compression",
    "Done",
    "ErrorEvent",
    "Recall",
    "Thinking",
    "Token",
    "ToolCall",
    "ToolResult",
    "TurnEvent",
    "Usage",
    "compression_events",
    "sse",
]


class Token(msgspec.Struct, tag="token", tag_field="event"):
    text: str


class Thinking(msgspec.Struct, tag="thinking", tag_field="event"):
    text: str


class ToolCall(msgspec.Struct, tag="tool_call", tag_field="event"):
    id: str
    name: str
    arguments: dict[str, Any]
    builtin: bool  # false: handed back to the client (requires_action)


class ToolResult(msgspec.Struct, tag="tool_result", tag_field="event"):
    id: str
    name: str
    content: str
    is_error: bool


class Compression(msgspec.Struct, tag="compression", tag_field="event"):
    phase: Literal["started", "done"]
    reason: str  # preturn | midturn | postturn
    context_tokens: int
    max_context_tokens: int
    messages_before: int | None = None
    messages_after: int | None = None
    method: str | None = None  # summary | truncate


class Recall(msgspec.Struct, tag="recall", tag_field="event"):
    chunk_ids: list[int]
    chars: int


class Usage(msgspec.Struct, tag="usage", tag_field="event"):
    round: int
    model: str
    prompt_eval_count: int
    eval_count: int


class Done(msgspec.Struct, tag="done", tag_field="event"):
    status: str  # completed | requires_action | max_rounds
    content: str
    rounds: int
    tool_call_count: int
    elapsed_seconds: float
    pending: list[dict[str, Any]]


class ErrorEvent(msgspec.Struct, tag="error", tag_field="event"):
    error: str
    detail: str
    status: int  # the HTTP status the JSON answer has for it


TurnEvent = (
    Token | Thinking | ToolCall | ToolResult | Compression | Recall | Usage | Done | ErrorEvent
)

_encoder = msgspec.json.Encoder()


def sse(event: TurnEvent) -> bytes:
    """One Server-Sent Event: ``event: <name>`` and its fields as JSON."""
    name = type(event).__struct_config__.tag
    return b"event: " + str(name).encode() + b"\ndata: " + _encoder.encode(event) + b"\n\n"


def compression_events(events: list[ContextEvent], reason: str) -> list[Compression]:
    """The context service's events as the stream's ``compression`` events."""
    out: list[Compression] = []
    for ev in events:
        if isinstance(ev, CompressionStarted):
            out.append(Compression("started", reason, ev.context_tokens, ev.max_context_tokens))
        elif isinstance(ev, ContextCompressed):
            out.append(
                Compression(
                    "done",
                    ev.reason or reason,
                    ev.context_tokens,
                    ev.max_context_tokens,
                    ev.messages_before,
                    ev.messages_after,
                    ev.method,
                )
            )
    return out
