"""The per-user message-storage quota (USER_MESSAGE_STORAGE_MB).

Every append adds the bytes of its messages to its session's `message_bytes`, in the
UPDATE that reserves their sequence numbers (no statement of its own); a user's usage is
the sum over their sessions' rows — one indexed read, not a scan of their messages.
Checked where a user adds messages (an append, a turn's new message or tool results, an
import), never on what the service writes itself (summaries, a turn's answer): those
count, but are never refused. Two appends of one user at once each see the other's
bytes only once it committed: together they may pass the quota by one request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from app.config import Settings
from app.lib.errors import PayloadTooLarge

SETTING = "USER_MESSAGE_STORAGE_MB"


def message_bytes(
    content: str | None, thinking: str | None, tool_calls: Any, images: Iterable[str] | None
) -> int:
    """What one message keeps: its text and thinking (UTF-8), its tool calls (as JSON),
    its pasted images (their base64, as the row stores them)."""
    total = len((content or "").encode()) + len((thinking or "").encode())
    if tool_calls:
        total += len(msgspec.json.encode(tool_calls))
    return total + sum(len(i) for i in images or ())


def quota_bytes(settings: Settings) -> int:
    """The quota in bytes; 0: none."""
    return settings.user_message_storage_mb * 1024 * 1024


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


def check_quota(settings: Settings, used: int, adding: int, what: str) -> None:
    """413 when `used` (before) plus `adding` passes the quota, naming the setting and
    the user's usage."""
    quota = quota_bytes(settings)
    if quota and used + adding > quota:
        raise PayloadTooLarge(
            f"{what}: the user's messages may take {settings.user_message_storage_mb} MiB "
            f"({SETTING}); {_mib(used)} are in use and this adds {_mib(adding)} — delete "
            "sessions to make room"
        )
