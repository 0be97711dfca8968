"""Request and response shapes of the facts API and the memory tool (msgspec)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from app.lib.inputs import INT8_MAX, NUL_PATTERN

Source = Literal["conversation", "tool_call", "auto_discovery", "user_explicit"]
SOURCES: tuple[str, ...] = ("conversation", "tool_call", "auto_discovery", "user_explicit")
FactSortBy = Literal["category", "key", "updated_at", "confidence", "created_at"]
SortOrder = Literal["asc", "desc"]
# The HTTP lists' default: newest first (the most recently saved or updated fact).
DEFAULT_FACT_SORT_BY: FactSortBy = "updated_at"
DEFAULT_FACT_SORT_ORDER: SortOrder = "desc"
ToolAction = Literal["save", "search", "forget", "list", "history"]
SearchMode = Literal["vector", "text", "none"]

MAX_CATEGORY = 100
MAX_KEY = 200
MAX_VALUE = 10_000
MAX_SOURCE_CONTEXT = 2_000
MAX_SUMMARY = 50_000
MAX_QUERY = 1_000
MAX_FORGET_TEXT = 1_000  # the memory tool's `forget` with `text` (app/domain/forget)
MAX_EXPIRES_DAYS = 36_500
DEFAULT_SEARCH_LIMIT = 15
MAX_SEARCH_LIMIT = 50

# Identifiers: a NUL is refused (422); a value's NUL is replaced (services.upsert_fact).
Category = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CATEGORY, pattern=NUL_PATTERN)]
Key = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_KEY, pattern=NUL_PATTERN)]
ToolCategory = Annotated[str, msgspec.Meta(max_length=MAX_CATEGORY, pattern=NUL_PATTERN)]
ToolKey = Annotated[str, msgspec.Meta(max_length=MAX_KEY, pattern=NUL_PATTERN)]
FactId = Annotated[int, msgspec.Meta(ge=1, le=INT8_MAX)]
Value = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_VALUE)]
Confidence = Annotated[int, msgspec.Meta(ge=0, le=100)]
ExpiresDays = Annotated[int, msgspec.Meta(ge=1, le=MAX_EXPIRES_DAYS)]
SourceContext = Annotated[str, msgspec.Meta(max_length=MAX_SOURCE_CONTEXT)]
Query = Annotated[str, msgspec.Meta(max_length=MAX_QUERY)]
SearchLimit = Annotated[int, msgspec.Meta(ge=1, le=MAX_SEARCH_LIMIT)]


class FactIn(msgspec.Struct, forbid_unknown_fields=True):
    category: Category
    key: Key
    value: Value
    source: Source = "conversation"
    confidence: Confidence | None = None  # None: by source (see services.default_confidence)
    expires_days: ExpiresDays | None = None
    source_context: SourceContext | None = None
    source_session_id: uuid.UUID | None = None
    dedupe: bool = False


class FactOut(msgspec.Struct):
    id: int
    user_id: str
    category: str
    key: str
    value: str
    source: str
    confidence: int
    expires_at: datetime | None
    source_context: str | None
    source_session_id: uuid.UUID | None
    merged_into: int | None
    has_embedding: bool
    created_at: datetime
    updated_at: datetime
    # an `as_of` answer: the version that was true then, and its validity (else null)
    version_id: int | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class FactHit(FactOut, kw_only=True):
    match: Literal["vector", "text"]
    score: float  # vector: 1 - cosine distance; text: matched query words (+ similarity)


class SearchOut(msgspec.Struct):
    query: str
    mode: SearchMode  # which path answered; "none" when neither found anything
    items: list[FactHit]


class CategoryCount(msgspec.Struct):
    category: str
    count: int


class CategoriesOut(msgspec.Struct):
    """A page of the categories, most facts first; `total` counts the live facts of all of them,
    `category_count` the categories."""

    categories: list[CategoryCount]
    total: int
    category_count: int
    limit: int
    offset: int
    has_more: bool


class SummaryIn(msgspec.Struct, forbid_unknown_fields=True):
    content: Annotated[str, msgspec.Meta(max_length=MAX_SUMMARY)]


class SummaryOut(msgspec.Struct):
    content: str
    updated_at: datetime | None


class FactPatch(msgspec.Struct, forbid_unknown_fields=True):
    # null restores a hidden (merged) fact; an id hides this fact behind that live fact.
    merged_into: FactId | None | msgspec.UnsetType = msgspec.UNSET


class FactVersionOut(msgspec.Struct):
    """One value a fact held: `valid_to` null while it is the current one."""

    id: int
    fact_id: int
    category: str
    key: str
    value: str
    source: str
    confidence: int
    session_id: uuid.UUID | None
    message_seq: int | None
    valid_from: datetime
    valid_to: datetime | None
    expires_at: datetime | None
    recorded_at: datetime
    current: bool


class FactHistoryPage(msgspec.Struct):
    """A page of a fact's versions, newest first. `next_cursor` (when `has_more`): pass it
    as `cursor` for the next page (keyset paging on the version id)."""

    items: list[FactVersionOut]
    total: int
    limit: int
    has_more: bool
    next_cursor: str | None = None


class RestoreIn(msgspec.Struct, forbid_unknown_fields=True):
    version_id: FactId


class MemoryToolCall(msgspec.Struct, forbid_unknown_fields=True):
    """The `memory` tool's arguments, exactly as the model produced them."""

    action: ToolAction
    category: ToolCategory | None = None
    key: ToolKey | None = None
    value: Annotated[str, msgspec.Meta(max_length=MAX_VALUE)] | None = None
    source: Source | None = None
    confidence: Confidence | None = None
    expires_days: ExpiresDays | None = None
    source_context: SourceContext | None = None
    query: Query | None = None
    limit: SearchLimit | None = None
    # forget: a text to redact everywhere (app/domain/forget), instead of a fact's key
    text: Annotated[str, msgspec.Meta(max_length=MAX_FORGET_TEXT)] | None = None


class MemoryToolResult(msgspec.Struct, omit_defaults=True):
    action: str
    ok: bool
    text: str  # what the agent runtime hands back to the model
    fact: FactOut | None = None
    facts: list[FactHit] | None = None
    categories: list[CategoryCount] | None = None
    deleted: int | None = None
    merged: list[int] | None = None
    versions: list[FactVersionOut] | None = None  # history: newest first
    forgotten: dict[str, Any] | None = None  # forget with `text`: the forget's answer
