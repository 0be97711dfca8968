"""The day of each line of a raw chunk whose messages span several days (issue 44).

A chunk's header shows its first and last day (`search/render.py`); a "when did…"
question needs the day of its evidence line. A chunk's text is its kept messages in
sequence order, each written as `chunks.entry_text` (label, content capped), joined by
a blank line — so the messages of its turn range, read back, give each message's start
offset, and a line takes the day of the message it is in. `day_starts` rebuilds the
text from the messages and gives up (no days) when it differs: a piece of a message
split over several chunks (one message, one day), a text changed since it was indexed.

The rendering (`window.interleave_windows`) marks `[MM-DD] ` (`day_mark`) on the first
shown line of such a hit and on each shown line whose day differs from the line shown
before it. The search reads the messages (`search.dated_lines`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime

from app.domain.kernel.hits import DayStarts, MemoryHit
from app.domain.raw_history.chunks import CHUNK_SEPARATOR, ChunkMessage, entry_text

__all__ = ["DayStarts", "day_at", "day_mark", "day_starts", "multi_day", "with_days"]

# the marks name the year (`[2023-05-07] `) only when the chunk's days cross a year, else
# `[05-07] ` (the header names the first day's year). why: docs/performance.md, "Time in
# the question"
MARK_YEAR = False


def multi_day(started_at: datetime | None, ended_at: datetime | None) -> bool:
    """A chunk whose messages span more than one day (by its first and last times)."""
    return started_at is not None and ended_at is not None and started_at.date() != ended_at.date()


def day_starts(content: str, messages: Iterable[ChunkMessage]) -> DayStarts:
    """Where each day of `content`'s messages begins (`messages`: those of the chunk's
    turn range, in any order; the ones a chunk leaves out are skipped). Empty when the
    messages do not rebuild `content` exactly, or they span a single day."""
    pos = 0
    out: list[tuple[int, date]] = []
    for m in sorted(messages, key=lambda m: m.sequence_number):
        text = entry_text(m)
        if text is None:
            continue
        if not content.startswith(text, pos):
            return ()
        if m.created_at is not None and (not out or out[-1][1] != m.created_at.date()):
            out.append((pos, m.created_at.date()))
        pos += len(text) + len(CHUNK_SEPARATOR)
    if pos != len(content) + len(CHUNK_SEPARATOR) or len(out) < 2:
        return ()
    return tuple(out)


def day_at(starts: DayStarts, offset: int) -> date | None:
    """The day of the text at `offset` (None before the first dated message)."""
    i = bisect_right(starts, offset, key=lambda s: s[0]) - 1
    return starts[i][1] if i >= 0 else None


def day_mark(day: date, starts: DayStarts = ()) -> str:
    """The prefix a line of `day` is marked with (in a chunk of those `starts`)."""
    if MARK_YEAR or not starts or starts[0][1].year != starts[-1][1].year:
        return f"[{day:%Y-%m-%d}] "
    return f"[{day:%m-%d}] "


def with_days(
    hits: Sequence[MemoryHit], messages: Mapping[tuple[str, int], ChunkMessage]
) -> list[MemoryHit]:
    """`hits` (raw) with `day_starts` set on those spanning several days, from
    `messages` keyed by (session id, sequence number)."""
    out = []
    for hit in hits:
        if hit.session_id and multi_day(hit.started_at, hit.timestamp):
            msgs = [
                m
                for seq in range(hit.start_seq, hit.end_seq + 1)
                if (m := messages.get((hit.session_id, seq))) is not None
            ]
            starts = day_starts(hit.text, msgs)
            if starts:
                hit = replace(hit, day_starts=starts)
        out.append(hit)
    return out
