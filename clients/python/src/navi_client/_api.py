"""Every endpoint of the API, built once as a `Call` (docs/api.md, docs/agents.md).

`Navi` and `AsyncNavi` have one method per function here, of the same name and
parameters, that sends what the function builds; tests/test_parity.py holds them to
that. Parameters left at None are not sent: the service's defaults apply.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import IO, Any

import httpx
import msgspec

from navi_client._core import (
    SESSION_HEADER,
    Call,
    body,
    content_bytes,
    json_as,
    no_content,
    path,
    raw_response,
)
from navi_client._core import query as params
from navi_client._models import (
    AppendResult,
    Categories,
    ChatHistoryResult,
    Compacted,
    ContextView,
    ErrorHistoryResult,
    Fact,
    FactHistory,
    FactSearchResult,
    FileCard,
    FileInfo,
    ForgetResult,
    Health,
    HistoryPage,
    ImportReport,
    IssuedToken,
    Me,
    MemorySearchResult,
    MemorySummary,
    MemoryToolResult,
    Message,
    ModelUsage,
    Page,
    PendingCall,
    Planning,
    Prepared,
    ResetResult,
    SavedFact,
    ScratchpadSection,
    Session,
    SessionMatches,
    SessionSummary,
    SharedMessages,
    SharedSession,
    ShareLink,
    TokenInfo,
    ToolOutput,
    TurnResult,
    UploadResult,
    User,
    WriteErrorResult,
)
from navi_client._sse import decode_event_data

UNSET: Any = msgspec.UNSET

#: What `upload_files` takes for one file: a local path, or (name, bytes or a binary
#: file), or (name, bytes or a binary file, content type).
UploadFile = (
    str | os.PathLike[str] | tuple[str, bytes | IO[bytes]] | tuple[str, bytes | IO[bytes], str]
)
#: What `import_account` takes: the export's bytes, a local path, a binary file, or an
#: iterable of byte chunks (e.g. another service's `export_account().iter_bytes()`).
ImportData = bytes | str | os.PathLike[str] | IO[bytes] | Iterable[bytes]
MessageLike = Message | Mapping[str, Any]

_CHUNK = 1 << 20
_INCOMING = ("role", "content", "images", "name", "tool_calls")


# --- system


def health() -> Call[Health]:
    return Call("GET", "/health", json_as(Health))


# --- the caller, tokens, users


def me() -> Call[Me]:
    return Call("GET", "/me", json_as(Me))


def list_tokens(*, limit: int | None = None, offset: int | None = None) -> Call[Page[TokenInfo]]:
    return Call("GET", "/me/tokens", json_as(Page[TokenInfo]), params(limit=limit, offset=offset))


def create_token(name: str = "") -> Call[IssuedToken]:
    return Call("POST", "/me/tokens", json_as(IssuedToken), json={"name": name})


def revoke_token(token_id: str) -> Call[None]:
    return Call("DELETE", path("/me/tokens/{}", token_id), no_content)


def admin_create_user(
    name: str, *, is_admin: bool = False, permissions: Sequence[str] = ()
) -> Call[User]:
    data = {"name": name, "is_admin": is_admin, "permissions": list(permissions)}
    return Call("POST", "/admin/users", json_as(User), json=data)


def admin_list_users(*, limit: int | None = None, offset: int | None = None) -> Call[Page[User]]:
    return Call("GET", "/admin/users", json_as(Page[User]), params(limit=limit, offset=offset))


def admin_issue_token(user_id: str, name: str = "") -> Call[IssuedToken]:
    url = path("/admin/users/{}/tokens", user_id)
    return Call("POST", url, json_as(IssuedToken), json={"name": name})


def admin_delete_user(user_id: str) -> Call[None]:
    return Call("DELETE", path("/admin/users/{}", user_id), no_content)


def admin_forget(user_id: str, text: str, *, dry_run: bool = False) -> Call[ForgetResult]:
    url = path("/admin/users/{}/forget", user_id)
    return Call("POST", url, json_as(ForgetResult), json={"text": text, "dry_run": dry_run})


def admin_export(user_id: str) -> Call[httpx.Response]:
    return _export(path("/admin/users/{}/export", user_id))


# --- export and import


def _export(url: str) -> Call[httpx.Response]:
    headers = {"Accept": "application/x-ndjson"}
    return Call("GET", url, raw_response, headers=headers, stream=True)


def export_account() -> Call[httpx.Response]:
    return _export("/me/export")


def _file_chunks(source: str | os.PathLike[str]) -> Iterator[bytes]:
    with open(source, "rb") as f:
        while chunk := f.read(_CHUNK):
            yield chunk


def _reader_chunks(reader: IO[bytes]) -> Iterator[bytes]:
    while chunk := reader.read(_CHUNK):
        yield chunk


def import_account(data: ImportData) -> Call[ImportReport]:
    content: bytes | Iterable[bytes]
    if isinstance(data, bytes | bytearray | memoryview):
        content = bytes(data)
    elif isinstance(data, str | os.PathLike):
        content = _file_chunks(data)
    elif hasattr(data, "read"):
        content = _reader_chunks(data)  # type: ignore[arg-type]
    else:
        content = data
    headers = {"Content-Type": "application/x-ndjson"}
    return Call(
        "POST",
        "/me/import",
        json_as(ImportReport),
        content=content,
        headers=headers,
        replayable=isinstance(content, bytes),
    )


# --- sessions


def create_session(profile_id: str = "default", name: str | None = None) -> Call[Session]:
    data = body(profile_id=profile_id, name=name)
    return Call("POST", "/sessions", json_as(Session), json=data)


def list_sessions(
    *,
    limit: int | None = None,
    offset: int | None = None,
    profile_id: str | None = None,
    search: str | None = None,
    sort_by: str | None = None,
    sort_order: str | None = None,
) -> Call[Page[SessionSummary]]:
    qs = params(
        limit=limit,
        offset=offset,
        profile_id=profile_id,
        search=search,
        sort_by=sort_by,
        sort_order=sort_order,
    )
    return Call("GET", "/sessions", json_as(Page[SessionSummary]), qs)


def get_session(session_id: str) -> Call[Session]:
    return Call("GET", path("/sessions/{}", session_id), json_as(Session))


def update_session(
    session_id: str,
    *,
    name: str | None = UNSET,
    pinned: bool = UNSET,
    profile_id: str = UNSET,
) -> Call[Session]:
    """PATCH: only the fields given are changed (`name=None` clears the name)."""
    data = {
        k: v
        for k, v in (("name", name), ("pinned", pinned), ("profile_id", profile_id))
        if v is not UNSET
    }
    return Call("PATCH", path("/sessions/{}", session_id), json_as(Session), json=data)


def delete_session(session_id: str) -> Call[None]:
    return Call("DELETE", path("/sessions/{}", session_id), no_content)


def session_matches(
    q: str, session_ids: Sequence[str], *, max_positions: int | None = None
) -> Call[SessionMatches]:
    qs = params(q=q, session_id=list(session_ids), max_positions=max_positions)
    return Call("GET", "/sessions/matches", json_as(SessionMatches), qs)


# --- messages and context


def _message(m: MessageLike) -> Any:
    return m if isinstance(m, Message) else dict(m)


def append_messages(
    session_id: str,
    messages: Sequence[MessageLike],
    *,
    usage: ModelUsage | Mapping[str, Any] | None = None,
) -> Call[AppendResult]:
    data: dict[str, Any] = {"messages": [_message(m) for m in messages]}
    if usage is not None:
        data["usage"] = usage if isinstance(usage, ModelUsage) else dict(usage)
    url = path("/sessions/{}/messages", session_id)
    return Call("POST", url, json_as(AppendResult), json=data)


def list_messages(
    session_id: str, *, before_seq: int | None = None, limit: int | None = None
) -> Call[HistoryPage]:
    url = path("/sessions/{}/messages", session_id)
    return Call("GET", url, json_as(HistoryPage), params(before_seq=before_seq, limit=limit))


def get_context(session_id: str) -> Call[ContextView]:
    return Call("GET", path("/sessions/{}/context", session_id), json_as(ContextView))


def list_planning(
    session_id: str, *, limit: int | None = None, offset: int | None = None
) -> Call[Planning]:
    url = path("/sessions/{}/planning", session_id)
    return Call("GET", url, json_as(Planning), params(limit=limit, offset=offset))


def add_planning(session_id: str, entry: Mapping[str, Any]) -> Call[None]:
    url = path("/sessions/{}/planning", session_id)
    return Call("POST", url, no_content, json={"entry": dict(entry)})


def prepare(
    session_id: str,
    message: str | MessageLike | None = None,
    *,
    mid_turn: bool = False,
    model: str | None = None,
) -> Call[Prepared]:
    """`message`: a user message's text, or a `Message` (role, content, images, name,
    tool_calls are sent: the message is only priced, never stored)."""
    incoming: dict[str, Any] | None = None
    if isinstance(message, str):
        incoming = {"role": "user", "content": message}
    elif message is not None:
        fields = msgspec.to_builtins(message) if isinstance(message, Message) else dict(message)
        incoming = {k: v for k, v in fields.items() if k in _INCOMING}
    data = body(message=incoming, model=model)
    data["mid_turn"] = mid_turn
    return Call("POST", path("/sessions/{}/prepare", session_id), json_as(Prepared), json=data)


def compact(session_id: str, *, model: str | None = None) -> Call[Compacted]:
    url = path("/sessions/{}/compact", session_id)
    return Call("POST", url, json_as(Compacted), json=body(model=model))


def reset_session(session_id: str) -> Call[ResetResult]:
    return Call("POST", path("/sessions/{}/reset", session_id), json_as(ResetResult))


# --- the turn endpoint


class _TurnWire(msgspec.Struct, kw_only=True):
    session_id: str
    status: str
    content: str
    thinking: str | None = None
    rounds: int
    tool_call_count: int
    elapsed_seconds: float
    pending: list[PendingCall] = msgspec.field(default_factory=list)
    events: list[msgspec.Raw] = msgspec.field(default_factory=list)


_TURN = msgspec.json.Decoder(_TurnWire)


def _turn_result(response: httpx.Response) -> TurnResult:
    wire = _TURN.decode(response.content)
    events = [decode_event_data(None, bytes(raw)) for raw in wire.events]
    return TurnResult(
        session_id=wire.session_id,
        status=wire.status,
        content=wire.content,
        thinking=wire.thinking,
        rounds=wire.rounds,
        tool_call_count=wire.tool_call_count,
        elapsed_seconds=wire.elapsed_seconds,
        pending=wire.pending,
        events=events,
    )


def _turn_body(
    message: str | None,
    images: Sequence[str] | None,
    tools: Sequence[Mapping[str, Any]] | None,
    tool_results: Sequence[ToolOutput | Mapping[str, Any]] | None,
) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if message is not None or images is not None:
        data["message"] = body(content=message or "", images=list(images) if images else None)
    if tool_results is not None:
        data["tool_results"] = [r if isinstance(r, ToolOutput) else dict(r) for r in tool_results]
    if tools is not None:
        data["tools"] = [dict(t) for t in tools]
    return data


def turn(
    session_id: str,
    message: str | None = None,
    *,
    images: Sequence[str] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_results: Sequence[ToolOutput | Mapping[str, Any]] | None = None,
) -> Call[TurnResult]:
    """One turn, answered in one piece. `message` (and `images`, base64) starts a turn;
    `tool_results` (one per pending call) resumes one that answered `requires_action`;
    `tools`: the client's own tools (Ollama's definitions), sent again when resuming."""
    data = _turn_body(message, images, tools, tool_results)
    return Call("POST", path("/sessions/{}/turns", session_id), _turn_result, json=data)


def stream_turn(
    session_id: str,
    message: str | None = None,
    *,
    images: Sequence[str] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_results: Sequence[ToolOutput | Mapping[str, Any]] | None = None,
) -> Call[httpx.Response]:
    data = _turn_body(message, images, tools, tool_results)
    return Call(
        "POST",
        path("/sessions/{}/turns", session_id),
        raw_response,
        json=data,
        headers={"Accept": "text/event-stream"},
        stream=True,
    )


# --- memory: search, facts, summary, forget


def search_memory(
    query: str,
    *,
    scope: str | None = None,
    k: int | None = None,
    session_id: str | None = None,
    current_session_id: str | None = None,
    best_window: bool | None = None,
    as_of: str | None = None,
) -> Call[MemorySearchResult]:
    data = body(
        query=query,
        scope=scope,
        k=k,
        session_id=session_id,
        current_session_id=current_session_id,
        best_window=best_window,
        as_of=as_of,
    )
    return Call("POST", "/memory/search", json_as(MemorySearchResult), json=data)


def list_facts(
    *,
    limit: int | None = None,
    offset: int | None = None,
    search: str | None = None,
    sort_by: str | None = None,
    sort_order: str | None = None,
    category: str | None = None,
    key: str | None = None,
    as_of: str | None = None,
) -> Call[Page[Fact]]:
    qs = params(
        limit=limit,
        offset=offset,
        search=search,
        sort_by=sort_by,
        sort_order=sort_order,
        category=category,
        key=key,
        as_of=as_of,
    )
    return Call("GET", "/memory/facts", json_as(Page[Fact]), qs)


def fact_history(
    fact_id: int, *, limit: int | None = None, cursor: str | None = None
) -> Call[FactHistory]:
    url = path("/memory/facts/{}/history", str(fact_id))
    return Call("GET", url, json_as(FactHistory), params(limit=limit, cursor=cursor))


def restore_fact(fact_id: int, version_id: int) -> Call[SavedFact]:
    url = path("/memory/facts/{}/restore", str(fact_id))
    return Call("POST", url, json_as(SavedFact), json={"version_id": version_id})


def save_fact(
    category: str,
    key: str,
    value: str,
    *,
    source: str | None = None,
    confidence: int | None = None,
    expires_days: int | None = None,
    source_context: str | None = None,
    source_session_id: str | None = None,
    dedupe: bool | None = None,
) -> Call[SavedFact]:
    data = body(
        category=category,
        key=key,
        value=value,
        source=source,
        confidence=confidence,
        expires_days=expires_days,
        source_context=source_context,
        source_session_id=source_session_id,
        dedupe=dedupe,
    )
    return Call("POST", "/memory/facts", json_as(SavedFact), json=data)


def search_facts(q: str, *, limit: int | None = None) -> Call[FactSearchResult]:
    qs = params(q=q, limit=limit)
    return Call("GET", "/memory/facts/search", json_as(FactSearchResult), qs)


def delete_fact(key: str, *, category: str | None = None) -> Call[None]:
    url = path("/memory/facts/{}", key)
    return Call("DELETE", url, no_content, params(category=category))


def list_categories(*, limit: int | None = None, offset: int | None = None) -> Call[Categories]:
    qs = params(limit=limit, offset=offset)
    return Call("GET", "/memory/categories", json_as(Categories), qs)


def get_memory_summary() -> Call[MemorySummary]:
    return Call("GET", "/memory/summary", json_as(MemorySummary))


def set_memory_summary(content: str) -> Call[MemorySummary]:
    return Call("PUT", "/memory/summary", json_as(MemorySummary), json={"content": content})


def forget(text: str, *, dry_run: bool = False) -> Call[ForgetResult]:
    data = {"text": text, "dry_run": dry_run}
    return Call("POST", "/memory/forget", json_as(ForgetResult), json=data)


def admin_list_facts(
    *,
    user_id: str | None = None,
    include_merged: bool | None = None,
    limit: int | None = None,
    offset: int | None = None,
    search: str | None = None,
    sort_by: str | None = None,
    sort_order: str | None = None,
) -> Call[Page[Fact]]:
    qs = params(
        user_id=user_id,
        include_merged=include_merged,
        limit=limit,
        offset=offset,
        search=search,
        sort_by=sort_by,
        sort_order=sort_order,
    )
    return Call("GET", "/admin/memory", json_as(Page[Fact]), qs)


def admin_search_facts(
    q: str, *, user_id: str | None = None, limit: int | None = None
) -> Call[FactSearchResult]:
    qs = params(q=q, user_id=user_id, limit=limit)
    return Call("GET", "/admin/memory/search", json_as(FactSearchResult), qs)


def admin_merge_fact(fact_id: int, merged_into: int | None) -> Call[Fact]:
    """Hide a fact behind another (`merged_into`), or restore it (None)."""
    url = path("/admin/memory/{}", fact_id)
    return Call("PATCH", url, json_as(Fact), json={"merged_into": merged_into})


# --- the tools (docs/api.md: the model's tool calls, answered with a `text` for it)


def memory_tool(
    action: str,
    *,
    category: str | None = None,
    key: str | None = None,
    value: str | None = None,
    source: str | None = None,
    confidence: int | None = None,
    expires_days: int | None = None,
    source_context: str | None = None,
    query: str | None = None,
    limit: int | None = None,
    text: str | None = None,
) -> Call[MemoryToolResult]:
    data = body(
        action=action,
        category=category,
        key=key,
        value=value,
        source=source,
        confidence=confidence,
        expires_days=expires_days,
        source_context=source_context,
        query=query,
        limit=limit,
        text=text,
    )
    return Call("POST", "/tools/memory", json_as(MemoryToolResult), json=data)


def memory_search_tool(
    query: str,
    *,
    scope: str | None = None,
    k: int | None = None,
    session_id: str | None = None,
) -> Call[MemorySearchResult]:
    data = body(query=query, scope=scope, k=k, session_id=session_id)
    return Call("POST", "/tools/memory_search", json_as(MemorySearchResult), json=data)


def chat_history(
    session_id: str,
    query: str | None = None,
    *,
    mode: str | None = None,
    match: str | None = None,
    limit: int | None = None,
) -> Call[ChatHistoryResult]:
    data = body(session_id=session_id, query=query, mode=mode, match=match, limit=limit)
    return Call("POST", "/tools/chat_history", json_as(ChatHistoryResult), json=data)


def write_error(
    tool: str, error: str, fix: str, *, context: str | None = None
) -> Call[WriteErrorResult]:
    data = body(tool=tool, error=error, fix=fix, context=context)
    return Call("POST", "/tools/write_error", json_as(WriteErrorResult), json=data)


def error_history(
    query: str | None = None, *, tool: str | None = None, limit: int | None = None
) -> Call[ErrorHistoryResult]:
    data = body(query=query, tool=tool, limit=limit)
    return Call("POST", "/tools/error_history", json_as(ErrorHistoryResult), json=data)


def call_tool(
    name: str, arguments: Mapping[str, Any] | None = None, *, session_id: str | None = None
) -> Call[dict[str, Any]]:
    """A model's tool call passed on verbatim (`POST /tools/<name>`, the current session
    in `X-Navi-Session-Id`); the answer as a dict, its `text` for the model."""
    headers = {SESSION_HEADER: session_id} if session_id else {}
    url = path("/tools/{}", name)
    return Call("POST", url, json_as(dict[str, Any]), json=dict(arguments or {}), headers=headers)


# --- scratchpad


def list_scratchpad(
    session_id: str, *, limit: int | None = None, offset: int | None = None
) -> Call[Page[ScratchpadSection]]:
    url = path("/sessions/{}/scratchpad", session_id)
    return Call("GET", url, json_as(Page[ScratchpadSection]), params(limit=limit, offset=offset))


def read_scratchpad(session_id: str, section: str) -> Call[ScratchpadSection]:
    url = path("/sessions/{}/scratchpad/{}", session_id, section)
    return Call("GET", url, json_as(ScratchpadSection))


def write_scratchpad(session_id: str, section: str, value: str) -> Call[ScratchpadSection]:
    url = path("/sessions/{}/scratchpad/{}", session_id, section)
    return Call("PUT", url, json_as(ScratchpadSection), json={"value": value})


def delete_scratchpad(session_id: str, section: str) -> Call[None]:
    url = path("/sessions/{}/scratchpad/{}", session_id, section)
    return Call("DELETE", url, no_content)


# --- files


def _upload_part(item: UploadFile) -> tuple[tuple[str, Any], bool]:
    """One `files` part and whether it can be sent again."""
    if isinstance(item, str | os.PathLike):
        with open(item, "rb") as f:
            return ("files", (os.path.basename(os.fspath(item)), f.read())), True
    name, data, *rest = item
    part = (name, data, rest[0]) if rest else (name, data)
    return ("files", part), isinstance(data, bytes)


def upload_files(session_id: str, files: Sequence[UploadFile]) -> Call[UploadResult]:
    parts = [_upload_part(item) for item in files]
    return Call(
        "POST",
        path("/sessions/{}/files", session_id),
        json_as(UploadResult),
        files=[p for p, _ in parts],
        replayable=all(ok for _, ok in parts),
    )


def list_files(
    session_id: str, *, limit: int | None = None, offset: int | None = None
) -> Call[Page[FileInfo]]:
    url = path("/sessions/{}/files", session_id)
    return Call("GET", url, json_as(Page[FileInfo]), params(limit=limit, offset=offset))


def download_file(session_id: str, filename: str) -> Call[bytes]:
    url = path("/sessions/{}/files/{}", session_id, filename)
    return Call("GET", url, content_bytes, headers={"Accept": "*/*"})


def share_file(session_id: str, local_path: str) -> Call[FileInfo]:
    url = path("/sessions/{}/share_file", session_id)
    return Call("POST", url, json_as(FileInfo), json={"path": local_path})


def publish_file(session_id: str, filename: str) -> Call[FileCard]:
    url = path("/sessions/{}/publish", session_id)
    return Call("POST", url, json_as(FileCard), json={"filename": filename})


# --- shares


def share_session(session_id: str) -> Call[ShareLink]:
    return Call("POST", path("/sessions/{}/share", session_id), json_as(ShareLink))


def get_shared(token: str, *, limit: int | None = None) -> Call[SharedSession]:
    return Call("GET", path("/shared/{}", token), json_as(SharedSession), params(limit=limit))


def shared_messages(
    token: str, *, before_seq: int | None = None, limit: int | None = None
) -> Call[SharedMessages]:
    url = path("/shared/{}/messages", token)
    return Call("GET", url, json_as(SharedMessages), params(before_seq=before_seq, limit=limit))
