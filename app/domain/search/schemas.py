from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from app.lib.inputs import Count


class MemorySearchIn(msgspec.Struct, forbid_unknown_fields=True):
    query: str
    scope: str = "all"
    k: Count | None = 5  # then clamped to 1..20 (unified.clamp_k)
    session_id: str | None = None  # narrows raw chunks to one conversation
    current_session_id: str | None = None  # orders sketches, freshness boundary
    best_window: bool = True
    # the facts as they were then (their versions); the other stores are searched as now
    as_of: datetime | None = None


class ToolMemorySearchIn(msgspec.Struct):
    """The `memory_search` tool call, verbatim (unknown fields are ignored)."""

    query: str = ""
    scope: Any = "all"
    k: Any = 5
    session_id: str | None = None
    as_of: Any = None  # an ISO 8601 time with its zone: the facts as they were then


class HitOut(msgspec.Struct):
    source_type: str
    text: str
    session_id: str | None
    timestamp: datetime | None
    key: str | None
    category: str | None
    start_seq: int
    end_seq: int
    chunk_id: str | None
    score: float | None
    rank: float | None  # raw: the fused relevance the hits are ordered by
    terms_hit: int
    superseded_by: str | None
    superseded_value: str | None  # the value of the fact that replaced this excerpt's
    before_summary: bool
    breadcrumbs: list[str]


class MemorySearchOut(msgspec.Struct):
    query: str
    scope: str
    k: int
    hits: list[HitOut]
    text: str
