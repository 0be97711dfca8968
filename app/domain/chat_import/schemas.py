"""The answer of a chat import (`POST /me/import/chats`, the console's upload, the CLI)."""

from __future__ import annotations

import msgspec


class SkippedItem(msgspec.Struct):
    where: str
    reason: str


class MissingFile(msgspec.Struct):
    conversation_id: str
    name: str
    reason: str


class ConversationCounts(msgspec.Struct):
    imported: int = 0
    topped_up: int = 0
    unchanged: int = 0
    skipped: int = 0


class MessageCounts(msgspec.Struct):
    imported: int = 0
    skipped: int = 0
    skipped_by_reason: dict[str, int] = {}


class FileCounts(msgspec.Struct):
    stored: int = 0
    missing: int = 0


class ChatImportReport(msgspec.Struct):
    """What an import of a chat export did."""

    user_id: str
    format: str
    conversations: ConversationCounts
    messages: MessageCounts
    files: FileCounts
    skipped: list[SkippedItem]
    missing_files: list[MissingFile]
    truncated: str | None
    notes: list[str]
    seconds: float
