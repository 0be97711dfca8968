"""The service's request and answer bodies as msgspec Structs.

Answers are decoded with `msgspec.json.decode(…, type=…)`, which ignores fields it does
not know: a newer service that adds a field does not break an older client. Fields the
service may leave out or that are nullable have defaults. Inputs (`Message`,
`ModelUsage`, `ToolOutput`) omit their defaults when encoded, so only what you set is
sent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

import msgspec

__all__ = [
    "AppendResult",
    "AppendedRef",
    "Categories",
    "CategoryCount",
    "ChatHistoryResult",
    "Compacted",
    "CompressionEvent",
    "ContextEvent",
    "ContextView",
    "DoneEvent",
    "ErrorEntry",
    "ErrorEvent",
    "ErrorHistoryResult",
    "Fact",
    "FactHit",
    "FactSearchResult",
    "FileCard",
    "FileInfo",
    "ForgetResult",
    "ForgottenFile",
    "Health",
    "HistoryHit",
    "HistoryMessage",
    "HistoryPage",
    "ImportReport",
    "Me",
    "MemoryHit",
    "MemorySearchResult",
    "MemorySummary",
    "MemoryToolResult",
    "Message",
    "ModelUsage",
    "Page",
    "PendingCall",
    "Planning",
    "Prepared",
    "RecallEvent",
    "ResetResult",
    "SavedFact",
    "ScratchpadSection",
    "Session",
    "SessionMatch",
    "SessionMatches",
    "SessionSummary",
    "ShareLink",
    "SharedMessage",
    "SharedMessages",
    "SharedSession",
    "StoredMessage",
    "ThinkingEvent",
    "TokenEvent",
    "TokenInfo",
    "IssuedToken",
    "ToolCallEvent",
    "ToolOutput",
    "ToolResultEvent",
    "TurnEvent",
    "TurnResult",
    "UnknownEvent",
    "UploadResult",
    "UsageEvent",
    "User",
    "WriteErrorResult",
]

T = TypeVar("T")
Role = Literal["system", "user", "assistant", "tool"]


class _Out(msgspec.Struct, kw_only=True):
    """Base of the answers: keyword-only, unknown fields ignored."""


class Page(_Out, Generic[T], kw_only=True):
    """One page of a list: `items`, `total` and where the page is."""

    items: list[T]
    total: int
    limit: int
    offset: int
    has_more: bool

    @property
    def next_offset(self) -> int | None:
        """The `offset` of the next page, None on the last one."""
        return self.offset + len(self.items) if self.has_more else None


# --- users and tokens


class Me(_Out, kw_only=True):
    id: str
    name: str
    is_admin: bool = False
    permissions: list[str] = msgspec.field(default_factory=list)
    auth_enabled: bool = True


class User(_Out, kw_only=True):
    id: str
    name: str
    is_admin: bool = False
    permissions: list[str] = msgspec.field(default_factory=list)
    created_at: datetime | None = None


class TokenInfo(_Out, kw_only=True):
    """A token as listed: its prefix, never the token."""

    id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None
    expires_at: datetime | None = None  # a console sign-in's token; API tokens: never


class IssuedToken(_Out, kw_only=True):
    """A new token: `token` is shown this once."""

    id: str
    user_id: str
    name: str
    token: str


# --- sessions and messages


class Session(_Out, kw_only=True):
    id: str
    profile_id: str
    user_id: str | None = None
    name: str | None = None
    pinned: bool = False
    created_at: datetime
    last_active: datetime
    context_token_count: int = 0
    display_message_count: int = 0
    session_metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class SessionSummary(_Out, kw_only=True):
    id: str
    profile_id: str
    user_id: str | None = None
    name: str | None = None
    pinned: bool = False
    created_at: datetime
    last_active: datetime
    display_message_count: int = 0
    preview: str | None = None


class SessionMatch(_Out, kw_only=True):
    session_id: str
    positions: list[int]
    match_count: int
    snippet: str | None = None
    truncated: bool = False


class SessionMatches(_Out, kw_only=True):
    query: str
    sessions: list[SessionMatch]


class Message(msgspec.Struct, omit_defaults=True):
    """A message to append: `Message("user", "hello")`. Set only what you need; the
    service's defaults apply to the rest (docs/api.md)."""

    role: Role
    content: str = ""
    thinking: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    images: list[str] | None = None  # base64
    metadata: dict[str, Any] | None = None
    elapsed_seconds: float | None = None
    tool_call_count: int | None = None
    token_count: int | None = None
    created_at: datetime | None = None
    is_context: bool = True
    is_display: bool = True
    is_plan: bool = False
    is_summary: bool = False
    is_compression: bool = False
    is_compression_critical: bool = False
    is_recall: bool = False


class ModelUsage(msgspec.Struct, omit_defaults=True):
    """What the runtime's model reported for the prompt of the appended reply."""

    model: str
    prompt_eval_count: int
    sent_chars: int | None = None
    sent_tokens: int | None = None
    had_images: bool | None = None


class StoredMessage(_Out, kw_only=True):
    """A stored message, as history pages and contexts show it."""

    sequence_number: int
    display_index: int | None = None
    role: str
    content: str = ""
    created_at: datetime
    archived: bool = False
    thinking: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    images: list[str] | None = None
    files: list[Any] | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    elapsed_seconds: float | None = None
    tool_call_count: int | None = None
    token_count: int | None = None
    is_context: bool = True
    is_display: bool = True
    is_plan: bool = False
    is_compression: bool = False
    is_summary: bool = False
    is_compression_critical: bool = False
    is_recall: bool = False


class ContextEvent(_Out, kw_only=True):
    """What the context service did: `type` is `CompressionStarted` or
    `ContextCompressed` (then `summary`, `messages_before/after`, `method`, `reason`)."""

    type: str
    context_tokens: int = 0
    max_context_tokens: int = 0
    summary: str | None = None
    messages_before: int | None = None
    messages_after: int | None = None
    method: str | None = None
    reason: str | None = None


class AppendedRef(_Out, kw_only=True):
    sequence_number: int
    display_index: int | None = None


class AppendResult(_Out, kw_only=True):
    session_id: str
    messages: list[AppendedRef]
    events: list[ContextEvent] = msgspec.field(default_factory=list)


class HistoryPage(_Out, kw_only=True):
    """Display history, oldest first within the page; ask again with
    `before_seq=next_before_seq` for the page before it."""

    messages: list[StoredMessage]
    has_more: bool
    next_before_seq: int | None = None


class ContextView(_Out, kw_only=True):
    session_id: str
    messages: list[StoredMessage]
    context_token_count: int


class Planning(_Out, kw_only=True):
    session_id: str
    planning_logs: list[Any]
    total: int
    limit: int
    offset: int
    has_more: bool


class Prepared(_Out, kw_only=True):
    """`prepare`: the context to send (the incoming message excluded), its size in
    tokens, the window, and what happened (compressions)."""

    session_id: str
    context: list[StoredMessage]
    tokens: int
    window: int
    events: list[ContextEvent] = msgspec.field(default_factory=list)


class Compacted(_Out, kw_only=True):
    session_id: str
    events: list[ContextEvent]
    context_token_count: int
    window: int


class ResetResult(_Out, kw_only=True):
    session_id: str
    messages_cleared: int
    archived_cleared: int
    embeddings_cleared: int
    compression_state_cleared: list[str]
    rolling_summary_kept: bool


# --- the turn endpoint


class ToolOutput(msgspec.Struct, omit_defaults=True):
    """The client's result of a pending tool call, to resume a `requires_action` turn."""

    tool_call_id: str
    content: str = ""
    is_error: bool = False


class PendingCall(_Out, kw_only=True):
    """A tool call the service does not know: run it, post its result."""

    id: str
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)


class _Event(msgspec.Struct, kw_only=True, tag_field="event"):
    """Base of the turn's events; `event` (the tag) is the SSE event name."""

    @property
    def event(self) -> str:
        return str(type(self).__struct_config__.tag)


class TokenEvent(_Event, tag="token", kw_only=True):
    """A piece of the reply."""

    text: str


class ThinkingEvent(_Event, tag="thinking", kw_only=True):
    """A piece of the model's reasoning."""

    text: str


class UsageEvent(_Event, tag="usage", kw_only=True):
    """One model call of the turn (a round)."""

    round: int
    model: str
    prompt_eval_count: int
    eval_count: int


class ToolCallEvent(_Event, tag="tool_call", kw_only=True):
    """A tool call of the model; `builtin: false` ones come back in `done.pending`."""

    id: str
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    builtin: bool = True


class ToolResultEvent(_Event, tag="tool_result", kw_only=True):
    """A built-in tool's result, as the model reads it."""

    id: str
    name: str
    content: str
    is_error: bool = False


class CompressionEvent(_Event, tag="compression", kw_only=True):
    """A compression of the context: `phase` started/done, `reason`
    preturn/midturn/postturn."""

    phase: str
    reason: str
    context_tokens: int
    max_context_tokens: int
    messages_before: int | None = None
    messages_after: int | None = None
    method: str | None = None


class RecallEvent(_Event, tag="recall", kw_only=True):
    """Raw-history excerpts injected for this turn."""

    chunk_ids: list[int]
    chars: int


class DoneEvent(_Event, tag="done", kw_only=True):
    """The turn's end: `status` completed / requires_action / max_rounds."""

    status: str
    content: str
    rounds: int
    tool_call_count: int
    elapsed_seconds: float
    pending: list[PendingCall] = msgspec.field(default_factory=list)


class ErrorEvent(_Event, tag="error", kw_only=True):
    """The turn failed (nothing follows): `error` llm_unavailable / llm_rejected /
    context_too_large / internal, and the HTTP `status` the JSON answer would have."""

    error: str
    detail: str
    status: int


class UnknownEvent(msgspec.Struct, kw_only=True):
    """An event this client does not know (a newer service): its name and data."""

    event: str
    data: Any


TurnEvent = (
    TokenEvent
    | ThinkingEvent
    | UsageEvent
    | ToolCallEvent
    | ToolResultEvent
    | CompressionEvent
    | RecallEvent
    | DoneEvent
    | ErrorEvent
    | UnknownEvent
)


class TurnResult(_Out, kw_only=True):
    """The JSON answer of a turn: the stream's events with the `token` / `thinking`
    deltas joined into `content` / `thinking`."""

    session_id: str
    status: str
    content: str
    thinking: str | None = None
    rounds: int
    tool_call_count: int
    elapsed_seconds: float
    pending: list[PendingCall] = msgspec.field(default_factory=list)
    events: list[TurnEvent] = msgspec.field(default_factory=list)

    @property
    def requires_action(self) -> bool:
        """The model called the client's tools: run `pending`, then resume the turn."""
        return self.status == "requires_action"


# --- memory: search, facts, summary


class MemoryHit(_Out, kw_only=True):
    """One hit of the unified search: `source_type` fact / raw / sketch / error."""

    source_type: str
    text: str
    session_id: str | None = None
    timestamp: datetime | None = None
    key: str | None = None
    category: str | None = None
    start_seq: int = 0
    end_seq: int = 0
    chunk_id: str | None = None
    score: float | None = None
    rank: float | None = None
    terms_hit: int = 0
    superseded_by: str | None = None
    superseded_value: str | None = None
    before_summary: bool = False
    breadcrumbs: list[str] = msgspec.field(default_factory=list)


class MemorySearchResult(_Out, kw_only=True):
    """`hits` and `text`, the hits rendered for a model."""

    query: str
    scope: str
    k: int
    hits: list[MemoryHit]
    text: str = ""


class Fact(_Out, kw_only=True):
    id: int
    user_id: str
    category: str
    key: str
    value: str
    source: str
    confidence: int
    expires_at: datetime | None = None
    source_context: str | None = None
    source_session_id: str | None = None
    merged_into: int | None = None
    has_embedding: bool = False
    created_at: datetime
    updated_at: datetime
    # set in an `as_of` answer: the version that was true then, and its validity
    version_id: int | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class FactVersion(_Out, kw_only=True):
    """One value a fact held; `valid_to` is None while it is the current one."""

    id: int
    fact_id: int
    category: str
    key: str
    value: str
    source: str
    confidence: int
    session_id: str | None = None
    message_seq: int | None = None
    valid_from: datetime
    valid_to: datetime | None = None
    expires_at: datetime | None = None
    recorded_at: datetime
    current: bool = False


class FactHistory(_Out, kw_only=True):
    """A page of a fact's versions, newest first; pass `next_cursor` as `cursor`."""

    items: list[FactVersion]
    total: int
    limit: int
    has_more: bool
    next_cursor: str | None = None


class SavedFact(Fact, kw_only=True):
    """A saved fact and the ids of the facts it hid (`merged`)."""

    merged: list[int] = msgspec.field(default_factory=list)


class FactHit(Fact, kw_only=True):
    match: str
    score: float


class FactSearchResult(_Out, kw_only=True):
    query: str
    mode: str  # vector | text | none
    items: list[FactHit]


class CategoryCount(_Out, kw_only=True):
    category: str
    count: int


class Categories(_Out, kw_only=True):
    categories: list[CategoryCount]
    total: int
    category_count: int
    limit: int
    offset: int
    has_more: bool


class MemorySummary(_Out, kw_only=True):
    content: str
    updated_at: datetime | None = None


class ForgottenFile(_Out, kw_only=True):
    session_id: str
    path: str


class ForgetResult(_Out, kw_only=True):
    """Rows redacted per store (`changed`; facts: deleted), files that hold the text."""

    dry_run: bool
    changed: dict[str, int]
    files: list[ForgottenFile] = msgspec.field(default_factory=list)
    total: int


# --- the tools


class MemoryToolResult(_Out, kw_only=True):
    """The `memory` tool's answer; `text` is what the model reads."""

    action: str
    ok: bool
    text: str
    fact: Fact | None = None
    facts: list[FactHit] | None = None
    categories: list[CategoryCount] | None = None
    deleted: int | None = None
    merged: list[int] | None = None
    forgotten: dict[str, Any] | None = None


class HistoryMessage(_Out, kw_only=True):
    sequence_number: int
    role: str
    content: str
    created_at: datetime
    archived: bool = False
    name: str | None = None
    truncated: bool = False


class HistoryHit(HistoryMessage, kw_only=True):
    kind: str
    score: float | None = None
    before: list[HistoryMessage] = msgspec.field(default_factory=list)
    after: list[HistoryMessage] = msgspec.field(default_factory=list)


class ChatHistoryResult(_Out, kw_only=True):
    session_id: str
    mode: str
    match: str | None = None
    query: str = ""
    limit: int
    fallback: str | None = None
    hits: list[HistoryHit]
    text: str = ""


class ErrorEntry(_Out, kw_only=True):
    id: int
    tool: str
    error: str
    fix: str
    context: str | None = None
    created_at: datetime
    last_hit_at: datetime | None = None
    expires_at: datetime
    hit_count: int = 0
    embedded: bool = False
    score: float | None = None


class WriteErrorResult(_Out, kw_only=True):
    entry: ErrorEntry
    created: bool
    text: str = ""


class ErrorHistoryResult(_Out, kw_only=True):
    query: str
    tool: str | None = None
    limit: int
    hits: list[ErrorEntry]
    text: str = ""


class ScratchpadSection(_Out, kw_only=True):
    section: str
    value: str
    updated_at: datetime


# --- files and shares


class FileInfo(_Out, kw_only=True):
    name: str
    size: int
    content_type: str
    type: str
    path: str
    url: str
    modified_at: datetime | None = None
    original_name: str | None = None


class UploadResult(_Out, kw_only=True):
    """The stored files and `message_block`, to append to the user's message."""

    files: list[FileInfo]
    message_block: str = ""


class FileCard(_Out, kw_only=True):
    type: str
    content_type: str
    size: int
    url: str
    name: str


class ShareLink(_Out, kw_only=True):
    token: str
    url: str


class SharedMessage(_Out, kw_only=True):
    sequence_number: int
    role: str
    content: str
    created_at: datetime
    thinking: str | None = None
    is_plan: bool = False
    is_compression: bool = False
    is_recall: bool = False
    tool_calls: list[dict[str, Any]] | None = None
    name: str | None = None
    images: list[str] | None = None


class SharedMessages(_Out, kw_only=True):
    messages: list[SharedMessage]
    has_more: bool
    next_before_seq: int | None = None


class SharedSession(SharedMessages, kw_only=True):
    name: str | None = None
    profile_id: str
    profile_name: str
    created_at: datetime
    last_active: datetime


# --- transfer and system


class ImportReport(_Out, kw_only=True):
    user_id: str
    records: dict[str, int]
    vectors: str
    dropped_records: int = 0
    trimmed_planning_entries: int = 0


class Health(_Out, kw_only=True):
    status: str
    database: bool = False
    revision: str | None = None
    head: str | None = None
    at_head: bool = False
    extensions: dict[str, Any] = msgspec.field(default_factory=dict)
    ollama: bool = False
    embedding: str = ""
    auth_enabled: bool = True
    error: str | None = None
    #: the live index's embedding queue: backlog_chunks, backlog_bytes, oldest_seconds,
    #: embedding_by (None when the database did not answer)
    index: dict[str, Any] | None = None
