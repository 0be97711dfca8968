"""What a share-link holder sees. No session id, no owner id, no files, no LLM context,
no message metadata: only what the transcript shows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec


class ShareOut(msgspec.Struct):
    token: str
    url: str  # "/#share=<token>": the token travels in the URL hash, never a request line


class SharedMessage(msgspec.Struct):
    sequence_number: int  # the paging cursor (before_seq), not an identifier
    role: str
    content: str
    created_at: datetime
    thinking: str | None = None
    is_plan: bool = False
    is_compression: bool = False
    is_recall: bool = False
    tool_calls: list[dict[str, Any]] | None = None
    name: str | None = None  # the tool's name on a tool result
    images: list[str] | None = None  # base64, as displayed to the owner


class SharedMessages(msgspec.Struct):
    messages: list[SharedMessage]  # oldest first within the page
    has_more: bool
    next_before_seq: int | None


class SharedSession(msgspec.Struct):
    name: str | None
    profile_id: str
    profile_name: str
    created_at: datetime
    last_active: datetime
    messages: list[SharedMessage]
    has_more: bool
    next_before_seq: int | None
