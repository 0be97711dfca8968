"""Pure parsing of chat exports: one conversation's JSON (already decoded) → a transcript.

The shapes are described in /work/shared/notes/chat-export-formats.md (nobody publishes
a schema): every field is optional, unknown fields are ignored, and what cannot be read
is counted under a reason instead of guessed. A conversation that cannot be read at all
raises `RecordError` (the importer skips it and names it); a message that cannot be read
is skipped and counted on the conversation.

The shared types and helpers are here, and the JSON Lines line parser; ChatGPT's
parser is `chatgpt.py`, Claude's `claude.py`.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

CHATGPT, CLAUDE, JSONL = "chatgpt", "claude", "jsonl"
FORMATS = (CHATGPT, CLAUDE, JSONL)
TITLE_MAX_CHARS = 200
ID_MAX_CHARS = 200  # a source's conversation or message id (the unique index holds it)

# citation markers of ChatGPT answers: \ue200cite\ue202turn0search1\ue201 and 【11†source】
_CITATIONS = re.compile("\ue200[^\ue201]*\ue201|【[^】]*†[^】]*】")
ROLES = {"human": "user", "user": "user", "assistant": "assistant"}


class RecordError(ValueError):
    """A conversation that cannot be imported (the message says why)."""


@dataclass
class Attachment:
    """A file a message refers to: `ref` is the export's id of its bytes (ChatGPT's
    asset id), `data` the bytes when the export carries them inline (Claude's extracted
    text)."""

    name: str
    ref: str | None = None
    mime: str | None = None
    data: bytes | None = None


@dataclass
class ChatMessage:
    key: str  # the source's message id, else a hash of role + text (re-import matching)
    role: str  # "user" | "assistant"
    content: str
    created_at: datetime | None
    thinking: str | None = None
    attachments: list[Attachment] = field(default_factory=list)
    time_inferred: bool = False


@dataclass
class Conversation:
    source: str
    source_id: str
    title: str
    created_at: datetime | None
    messages: list[ChatMessage]
    skipped: Counter[str] = field(default_factory=Counter)  # reason → messages
    notes: list[str] = field(default_factory=list)  # what the reader should know


def clean_text(text: str) -> str:
    """The text PostgreSQL can store (no NUL), citation markers removed, stripped."""
    return _CITATIONS.sub("", text.replace("\x00", "\ufffd")).strip()


def message_key(mid: Any, role: str, text: str) -> str:
    """The source's message id, else (none, or an absurdly long one) a hash of the text."""
    if isinstance(mid, str) and 0 < len(mid) <= ID_MAX_CHARS and "\x00" not in mid:
        return mid
    return content_key(role, text)


def conversation_id(value: Any, field: str) -> str:
    """A conversation's id in the source, or RecordError naming the field."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise RecordError(f"no `{field}`")
    if len(value) > ID_MAX_CHARS or "\x00" in value:
        raise RecordError(f"`{field}`: longer than {ID_MAX_CHARS} characters, or with a NUL")
    return value


def content_key(role: str, text: str) -> str:
    return "h:" + hashlib.sha1(f"{role}\n{text}".encode(), usedforsecurity=False).hexdigest()[:20]


def epoch_time(value: Any) -> datetime | None:
    """Float epoch seconds (ChatGPT) → an aware datetime; None when absent or absurd."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not 0 < value < 32_503_680_000:  # before year 3000
        return None
    return datetime.fromtimestamp(float(value), UTC)


def iso_time(value: Any) -> datetime | None:
    """ISO 8601 (Claude, `…Z`) → an aware datetime; None when absent or unreadable.
    Epoch numbers are accepted too (JSON Lines' `time`)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_time(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if not 1900 <= parsed.year < 3000:  # a placeholder, not a time
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def title_of(raw: Any) -> str:
    if not isinstance(raw, str):
        return ""
    return " ".join(clean_text(raw).split())[:TITLE_MAX_CHARS]


def fill_times(messages: list[ChatMessage], start: datetime | None) -> None:
    """A message without a time takes its predecessor's (else the conversation's start),
    flagged `time_inferred`; never a time made up from nothing but the import's."""
    last = start
    for m in messages:
        if m.created_at is None:
            m.created_at, m.time_inferred = last, True
        else:
            last = m.created_at
    if any(m.created_at is None for m in messages):
        first = next((m.created_at for m in messages if m.created_at), None)
        for m in messages:
            if m.created_at is None:
                m.created_at, m.time_inferred = first, True


# --- JSON Lines: one OpenAI-style message a line ------------------------------------


@dataclass
class JsonlLine:
    conversation_id: str
    title: str
    message: ChatMessage | None
    skip: str | None = None


def parse_jsonl_line(record: Any) -> JsonlLine:
    """One line `{conversation_id, role, content, created_at|time, title?}`; RecordError
    when it has no conversation id."""
    if not isinstance(record, dict):
        raise RecordError("not a JSON object")
    cid = conversation_id(record.get("conversation_id"), "conversation_id")
    title = title_of(record.get("title"))
    role = ROLES.get(record.get("role"))  # type: ignore[arg-type]
    if role is None:
        return JsonlLine(cid, title, None, f"role {str(record.get('role'))[:40]!r}")
    raw = record.get("content")
    if isinstance(raw, list):  # OpenAI content parts
        raw = "\n".join(
            p.get("text", "") for p in raw if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    text = clean_text(raw) if isinstance(raw, str) else ""
    if not text:
        return JsonlLine(cid, title, None, "no text content")
    at = iso_time(record.get("created_at", record.get("time")))
    return JsonlLine(
        cid, title, ChatMessage(message_key(record.get("id"), role, text), role, text, at)
    )
