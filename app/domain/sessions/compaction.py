"""Compaction of the hot history by size (seed 001: `max_history_bytes`, 4 MiB → 80 %).

When a session's hot rows hold more than SESSION_MAX_HISTORY_BYTES (content + thinking),
the oldest move to the archive until the hot history is at most 80 % of the limit. The
cut is always just before a user message, so the first message kept is a user message
and no assistant reply is separated from the user message it answers. Rows still in the
LLM context (`is_context`) stay hot whatever their age (the context is read from the hot
table); they count towards what remains.

When to measure. Summing the sizes of a session's hot rows reads one index range and
the row headers — no detoasting, `octet_length` reads the stored length — but it is
still work per append. It runs when an append crosses a multiple of CHECK_EVERY
sequence numbers, or when the append itself is large (≥ limit / 64 bytes): the hot
history can overshoot the limit by less than CHECK_EVERY × limit / 64 = limit / 4
between two checks. (`bench/bench_history_bytes.py` measures the check.) The SQL is in
`compaction_repository.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.sessions.compaction_repository import CompactionRepository, HotRow
from app.domain.sessions.message_repository import MessageRepository

log = structlog.get_logger()

KEEP_RATIO = 0.8
CHECK_EVERY = 16  # sequence numbers between two measurements
LARGE_APPEND_SHARE = 64  # an append of ≥ limit / 64 bytes is measured at once


def should_check(first_seq: int, count: int, appended_bytes: int, limit: int) -> bool:
    """Whether an append of `count` messages from `first_seq` triggers a measurement."""
    if limit <= 0 or count <= 0:
        return False
    crossed = first_seq // CHECK_EVERY != (first_seq + count) // CHECK_EVERY
    return crossed or appended_bytes * LARGE_APPEND_SHARE >= limit


def compaction_cut(rows: Sequence[HotRow], limit: int, ratio: float = KEEP_RATIO) -> int | None:
    """The sequence number to archive below (rows with a smaller one, not in context, go),
    or None when nothing should move.

    `rows` are the hot rows in sequence order. The cut is the first user message at
    which what stays hot is ≤ ratio × limit; when no cut reaches that, the last user
    message (everything before the newest exchange goes).
    """
    total = sum(r.nbytes for r in rows)
    if limit <= 0 or total <= limit:
        return None
    target = int(limit * ratio)
    removed = 0
    best: int | None = None
    for i, row in enumerate(rows):
        if i > 0 and row.role == "user" and removed > 0:
            best = row.sequence_number
            if total - removed <= target:
                return best
        if not row.is_context:
            removed += row.nbytes
    return best


async def compact_by_bytes(
    db: AsyncSession, user_id: str, session_id: uuid.UUID, limit: int
) -> int:
    """Archive the oldest hot messages when the hot history exceeds `limit` bytes.
    Returns how many rows moved. Runs in the caller's transaction (the session row is
    locked by the append that triggered it); `user_id` is the session's."""
    repo = CompactionRepository(db)
    if limit <= 0 or await repo.hot_bytes(user_id, session_id) <= limit:
        return 0
    cut = compaction_cut(await repo.hot_rows(user_id, session_id), limit)
    if cut is None:
        return 0
    moved = await MessageRepository(db).archive_old_messages(user_id, session_id, cut)
    log.info("history.compacted", session_id=str(session_id), below_seq=cut, moved=moved)
    return moved


def appended_bytes(contents: Sequence[tuple[str, str | None]]) -> int:
    return sum(len(c.encode()) + len((t or "").encode()) for c, t in contents)


async def after_append(
    db: AsyncSession,
    user_id: str,
    session_id: uuid.UUID,
    first_seq: int,
    contents: Sequence[tuple[str, str | None]],
    limit: int,
) -> int:
    """The hook SessionService.append calls: measure only when `should_check` says so."""
    if not should_check(first_seq, len(contents), appended_bytes(contents), limit):
        return 0
    return await compact_by_bytes(db, user_id, session_id, limit)
