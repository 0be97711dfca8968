"""What every memory store returns to the unified search: one hit, whatever its store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

SourceType = Literal["fact", "raw", "sketch", "error"]
# (offset in a raw hit's text, day) where each day of its messages begins, in text order
DayStarts = tuple[tuple[int, date], ...]


@dataclass(frozen=True)
class MemoryHit:
    source_type: SourceType
    text: str
    session_id: str | None = None
    timestamp: datetime | None = None
    key: str | None = None  # fact key / sketch section / error kind
    category: str | None = None  # fact category
    start_seq: int = -1  # raw: first demoted turn
    end_seq: int = -1  # raw: last demoted turn
    chunk_id: str | None = None
    score: float | None = None  # vector similarity, 0..1 when available
    terms_hit: int = 0  # lexical overlap, for the text-search path
    superseded_by: str | None = None  # the newer fact overriding this: "<key> (updated …)"
    superseded_value: str | None = None  # that fact's value: what replaced this one
    before_summary: bool = False  # raw, older than the current session's last summary
    breadcrumbs: tuple[str, ...] = ()
    matched_terms: tuple[str, ...] = ()  # terms the store matched, if it reports them
    # raw: the store's fused relevance (ranks before `score` / `terms_hit` when set) and
    # the (start, end) spans of the lines the excerpt centres on, best first
    rank: float | None = None
    focus: tuple[tuple[int, int], ...] = ()
    focus_scores: tuple[float, ...] = ()  # the focus lines' scores, comparable across hits
    started_at: datetime | None = None  # raw: its first message's time (`timestamp`: its last)
    # raw, its messages spanning several days: where each day begins (`line_days`)
    day_starts: DayStarts = ()
