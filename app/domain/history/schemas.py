from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec


class ChatHistoryIn(msgspec.Struct):
    """The `chat_history` tool call, verbatim (unknown fields are ignored, odd values
    normalised: see `search.normalize_call`)."""

    mode: Any = None
    query: Any = ""
    match: Any = "keyword"
    limit: Any = 5
    session_id: str | None = None


class HistoryMessageOut(msgspec.Struct):
    sequence_number: int
    role: str
    content: str
    created_at: datetime  # UTC
    archived: bool
    name: str | None = None
    truncated: bool = False


class HistoryHitOut(msgspec.Struct):
    sequence_number: int
    role: str
    content: str
    created_at: datetime  # UTC
    archived: bool
    kind: str  # fulltext | substring | semantic | recent
    score: float | None
    before: list[HistoryMessageOut]
    after: list[HistoryMessageOut]
    name: str | None = None
    truncated: bool = False


class ChatHistoryOut(msgspec.Struct):
    session_id: str
    mode: str
    match: str | None
    query: str
    limit: int
    fallback: str | None
    hits: list[HistoryHitOut]
    text: str
