"""The per-user message-storage quota (USER_MESSAGE_STORAGE_MB).

Every append adds the bytes of its messages to its session's `message_bytes`, in the
UPDATE that reserves their sequence numbers (no statement of its own); a user's usage is
the sum over their sessions' rows — one indexed read, not a scan of their messages.
Checked where a user adds messages (an append, a turn's new message or tool results, an
import), never on what the service writes itself (summaries, a turn's answer): those
count, but are never refused. Two appends of one user at once each see the other's
bytes only once it committed: together they may pass the quota by one request.

The sum is not read on every append: a process remembers each user's usage for
`USAGE_TTL_SECONDS` and adds its own appends to it (`UsageMemory`), and reads again when
that is stale or within `USAGE_RECHECK_SHARE` of the quota. What the memory can miss is
what other processes appended meanwhile, so a user can pass the quota only by what they
write in other workers within those seconds while they are under 90 % of it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import msgspec

from app.config import Settings
from app.lib.errors import PayloadTooLarge

SETTING = "USER_MESSAGE_STORAGE_MB"
USAGE_TTL_SECONDS = 30.0  # a user's usage remembered this long by a process …
USAGE_RECHECK_SHARE = 0.9  # … unless it is past this share of the quota: read each time
USAGE_USERS = 10_000  # users remembered per process (the least recent forgotten)


class UsageMemory:
    """Per process: each user's usage as last read plus this process's appends since."""

    def __init__(self) -> None:
        self._users: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def estimate(self, user_id: str, quota: int, adding: int) -> int | None:
        """The user's usage before `adding`, or None when it must be read (unknown,
        stale, or close enough to `quota` that only the stored sum will do). A usage
        returned is counted with `adding` already."""
        known = self._users.get(user_id)
        if known is None or time.monotonic() - known[0] > USAGE_TTL_SECONDS:
            return None
        if known[1] + adding > quota * USAGE_RECHECK_SHARE:
            return None
        self._users[user_id] = (known[0], known[1] + adding)
        return known[1]

    def remember(self, user_id: str, used: int) -> None:
        self._users[user_id] = (time.monotonic(), used)
        self._users.move_to_end(user_id)
        while len(self._users) > USAGE_USERS:
            self._users.popitem(last=False)


USAGE = UsageMemory()


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
