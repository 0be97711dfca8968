from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

import msgspec

from app.domain.kernel.events import ContextEvent, UsageIn
from app.domain.kernel.messages import MessageIn, MessageOut

SortBy = Literal["last_active", "created_at", "name"]
SortOrder = Literal["asc", "desc"]

MAX_APPEND = 500


class SessionCreate(msgspec.Struct, forbid_unknown_fields=True):
    profile_id: str = "default"
    name: str | None = None


class SessionPatch(msgspec.Struct, forbid_unknown_fields=True):
    name: str | None | msgspec.UnsetType = msgspec.UNSET
    pinned: bool | msgspec.UnsetType = msgspec.UNSET
    profile_id: str | msgspec.UnsetType = msgspec.UNSET


class SessionOut(msgspec.Struct):
    id: uuid.UUID
    profile_id: str
    user_id: str | None
    name: str | None
    pinned: bool
    created_at: datetime
    last_active: datetime
    context_token_count: int
    display_message_count: int
    session_metadata: dict[str, Any]


class SessionSummary(msgspec.Struct):
    id: uuid.UUID
    profile_id: str
    user_id: str | None
    name: str | None
    pinned: bool
    created_at: datetime
    last_active: datetime
    display_message_count: int
    preview: str | None


class AppendRequest(msgspec.Struct, forbid_unknown_fields=True):
    messages: list[MessageIn]
    # What the runtime's LLM reported for the prompt that produced this reply: recorded
    # as the real-token baseline, then the post-turn compression check runs.
    usage: UsageIn | None = None


class AppendedRef(msgspec.Struct):
    sequence_number: int
    display_index: int | None


class AppendResult(msgspec.Struct):
    session_id: uuid.UUID
    messages: list[AppendedRef]
    events: list[ContextEvent] = msgspec.field(default_factory=list)


class HistoryPage(msgspec.Struct):
    """Display history, oldest first within the page; `next_before_seq` pages further back."""

    messages: list[MessageOut]
    has_more: bool
    next_before_seq: int | None


class SessionMatches(msgspec.Struct):
    """The first `max_positions` matches of a session in display order. `match_count`
    is how many `positions` there are; `truncated`: the session has more matches."""

    session_id: uuid.UUID
    positions: list[int]
    match_count: int
    snippet: str | None
    truncated: bool = False


class MatchesOut(msgspec.Struct):
    query: str
    sessions: list[SessionMatches]


class ContextOut(msgspec.Struct):
    session_id: uuid.UUID
    messages: list[MessageOut]
    context_token_count: int


class PlanningLogIn(msgspec.Struct, forbid_unknown_fields=True):
    entry: dict[str, Any]


class PlanningOut(msgspec.Struct):
    """A page of the session's planning logs, oldest first (`total` kept in all)."""

    session_id: uuid.UUID
    planning_logs: list[Any]
    total: int
    limit: int
    offset: int
    has_more: bool


class SessionPage(msgspec.Struct):
    """A page of `GET /sessions`. `next_cursor` (when `has_more`): pass it as `cursor` for
    the next page — keyset paging, which neither skips nor repeats a session when others
    become active meanwhile, as offsets over `last_active` do. With a cursor, `offset`
    is 0 and `total` still counts every session the filters match."""

    items: list[SessionSummary]
    total: int
    limit: int
    offset: int
    has_more: bool
    next_cursor: str | None = None
