"""A stored message as the API writes and reads it: shared by every domain that builds
or shows a turn (sessions, files, context, search)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

from app.lib.inputs import Count

Role = Literal["system", "user", "assistant", "tool"]


class MessageBody(msgspec.Struct, kw_only=True):
    """What a message carries besides its role and text, in and out alike."""

    thinking: str | None = None
    is_context: bool = True
    is_display: bool = True
    is_plan: bool = False
    is_compression: bool = False
    is_summary: bool = False
    is_compression_critical: bool = False
    is_recall: bool = False
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    elapsed_seconds: float | None = None
    tool_call_count: Count | None = None
    token_count: Count | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    files: list[Any] | None = None
    images: list[str] | None = None  # base64 image bytes


class MessageIn(MessageBody, forbid_unknown_fields=True, kw_only=True):
    role: Role
    content: str = ""
    created_at: datetime | None = None


class MessageOut(MessageBody, kw_only=True):
    sequence_number: int
    display_index: int | None
    role: str
    content: str
    created_at: datetime
    archived: bool = False
