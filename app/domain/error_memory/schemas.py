from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec


class WriteErrorIn(msgspec.Struct):
    """The `write_error` tool call, verbatim (unknown fields are ignored)."""

    tool: Any = None
    error: Any = None
    fix: Any = None
    context: Any = None


class ErrorHistoryIn(msgspec.Struct):
    """The `error_history` tool call, verbatim (unknown fields are ignored)."""

    query: Any = ""
    tool: Any = None
    limit: Any = 5


class ErrorEntryOut(msgspec.Struct):
    id: int
    tool: str
    error: str
    fix: str
    context: str | None
    created_at: datetime
    last_hit_at: datetime | None
    expires_at: datetime
    hit_count: int
    embedded: bool
    score: float | None


class WriteErrorOut(msgspec.Struct):
    entry: ErrorEntryOut
    created: bool
    text: str


class ErrorHistoryOut(msgspec.Struct):
    query: str
    tool: str | None
    limit: int
    hits: list[ErrorEntryOut]
    text: str
