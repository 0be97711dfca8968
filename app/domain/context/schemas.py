"""Request and response shapes of the context triggers (prepare, usage, compact)."""

from __future__ import annotations

import uuid
from typing import Any, Literal

import msgspec

from app.domain.kernel.events import (
    CompressionStarted,
    ContextCompressed,
    ContextEvent,
    ModelName,
    UsageIn,
)
from app.domain.kernel.messages import MessageOut

__all__ = [
    "CompactOut",
    "CompactRequest",
    "CompressionStarted",
    "ContextCompressed",
    "ContextEvent",
    "IncomingMessage",
    "PrepareOut",
    "PrepareRequest",
    "ResetOut",
    "UsageIn",
]


class IncomingMessage(msgspec.Struct, forbid_unknown_fields=True):
    """The message about to be sent (not stored by prepare)."""

    role: Literal["user", "assistant", "tool", "system"] = "user"
    content: str = ""
    images: list[str] | None = None  # base64
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class PrepareRequest(msgspec.Struct, forbid_unknown_fields=True):
    message: IncomingMessage | None = None
    mid_turn: bool = False
    model: ModelName | None = None


class PrepareOut(msgspec.Struct):
    """The context to send (incoming message excluded), its size and what happened."""

    session_id: uuid.UUID
    context: list[MessageOut]
    tokens: int
    window: int
    events: list[ContextEvent]


class CompactRequest(msgspec.Struct, forbid_unknown_fields=True):
    model: ModelName | None = None


class CompactOut(msgspec.Struct):
    session_id: uuid.UUID
    events: list[ContextEvent]
    context_token_count: int
    window: int


class ResetOut(msgspec.Struct):
    """What `POST /sessions/{id}/reset` cleared and what it kept."""

    session_id: uuid.UUID
    messages_cleared: int  # hot rows deleted (context and display history)
    archived_cleared: int  # archived rows deleted
    embeddings_cleared: int  # chat_history vectors deleted
    compression_state_cleared: list[str]  # session_metadata keys dropped
    rolling_summary_kept: bool  # the session had a rolling summary, and keeps it
