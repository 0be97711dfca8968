"""`Navi`, the synchronous client. Each method sends what the function of the same name
in `_api.py` builds; `AsyncNavi` (`_async.py`) is the same surface, awaited."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from navi_client import _api as api
from navi_client._api import UNSET, ImportData, MessageLike, UploadFile
from navi_client._core import (
    DEFAULT_TIMEOUT,
    Call,
    Core,
    LsnTracker,
    RetryPolicy,
    settings_from_env,
)
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
    ModelUsage,
    Page,
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
from navi_client._streams import ExportStream, TurnStream

__all__ = ["Navi"]

T = TypeVar("T")

_sleep = time.sleep  # the tests replace it


class Navi:
    """A client of one Navi service.

    `Navi("http://127.0.0.1:8000", "navi_…")`, or `Navi()` with `NAVI_URL` and
    `NAVI_TOKEN` in the environment. Use it as a context manager, or `close()` it.

    * Errors: a non-2xx answer raises a `NaviError` subclass (`NotFound`, `Conflict`,
      `Unprocessable`, …) with `status`, `error` and `detail`.
    * A 503 with `Retry-After` (the database, for a moment) is sent again after that
      long: at most `retry_max_attempts` requests in all, at most `retry_max_wait`
      seconds of waiting in all.
    * Read-your-writes: the newest `Navi-Write-LSN` this client was answered with goes
      out as `Navi-Min-LSN` on its later requests (`write_lsn`; pass one in to carry a
      position over from another client).
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        retry_max_attempts: int = 3,
        retry_max_wait: float = 30.0,
        write_lsn: str | None = None,
        transport: httpx.BaseTransport | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        url, token = settings_from_env(base_url, token)
        self._core = Core(
            url,
            token,
            headers=headers,
            retry=RetryPolicy(retry_max_attempts, retry_max_wait),
            lsn=LsnTracker(write_lsn),
        )
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout, transport=transport)

    @property
    def base_url(self) -> str:
        return self._core.base_url

    @property
    def write_lsn(self) -> str | None:
        """The newest `Navi-Write-LSN` this client has seen (sent as `Navi-Min-LSN`)."""
        return self._core.lsn.current

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Navi:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- sending

    def _send(self, call: Call[Any]) -> httpx.Response:
        attempt, waited = 1, 0.0
        while True:
            request = self._http.build_request(**self._core.request_args(call))
            response = self._http.send(request, stream=call.stream)
            self._core.observe(response)
            if response.is_success:
                return response
            try:
                response.read()
            finally:
                response.close()
            delay = self._core.retry_delay(call, response, attempt, waited)
            if delay is None:
                raise self._core.error(response)
            _sleep(delay)
            attempt, waited = attempt + 1, waited + delay

    def _call(self, call: Call[T]) -> T:
        return call.decode(self._send(call))

    # --- system

    def health(self) -> Health:
        """`GET /health` (a 503 raises `Unavailable`; its `body` is the report)."""
        return self._call(api.health())

    # --- the caller, tokens, users

    def me(self) -> Me:
        return self._call(api.me())

    def list_tokens(
        self, *, limit: int | None = None, offset: int | None = None
    ) -> Page[TokenInfo]:
        return self._call(api.list_tokens(limit=limit, offset=offset))

    def create_token(self, name: str = "") -> IssuedToken:
        """A token for yourself; `token` is shown this once."""
        return self._call(api.create_token(name))

    def revoke_token(self, token_id: str) -> None:
        return self._call(api.revoke_token(token_id))

    def admin_create_user(
        self, name: str, *, is_admin: bool = False, permissions: Sequence[str] = ()
    ) -> User:
        return self._call(api.admin_create_user(name, is_admin=is_admin, permissions=permissions))

    def admin_list_users(
        self, *, limit: int | None = None, offset: int | None = None
    ) -> Page[User]:
        return self._call(api.admin_list_users(limit=limit, offset=offset))

    def admin_issue_token(self, user_id: str, name: str = "") -> IssuedToken:
        return self._call(api.admin_issue_token(user_id, name))

    def admin_delete_user(self, user_id: str) -> None:
        return self._call(api.admin_delete_user(user_id))

    def admin_forget(self, user_id: str, text: str, *, dry_run: bool = False) -> ForgetResult:
        return self._call(api.admin_forget(user_id, text, dry_run=dry_run))

    def admin_export(self, user_id: str) -> ExportStream:
        return ExportStream(self._send(api.admin_export(user_id)))

    # --- export and import

    def export_account(self) -> ExportStream:
        """Your whole memory as NDJSON records, streamed (`save(path)` keeps the file)."""
        return ExportStream(self._send(api.export_account()))

    def import_account(self, data: ImportData) -> ImportReport:
        """Restore an export into your (empty) account, in one transaction."""
        return self._call(api.import_account(data))

    # --- sessions

    def create_session(self, profile_id: str = "default", name: str | None = None) -> Session:
        return self._call(api.create_session(profile_id, name))

    def list_sessions(
        self,
        *,
        limit: int | None = None,
        offset: int | None = None,
        profile_id: str | None = None,
        search: str | None = None,
        sort_by: str | None = None,
        sort_order: str | None = None,
    ) -> Page[SessionSummary]:
        """A page of your sessions, pinned first (`sort_by` last_active, created_at,
        name); the next page is at `page.next_offset`."""
        return self._call(
            api.list_sessions(
                limit=limit,
                offset=offset,
                profile_id=profile_id,
                search=search,
                sort_by=sort_by,
                sort_order=sort_order,
            )
        )

    def get_session(self, session_id: str) -> Session:
        return self._call(api.get_session(session_id))

    def update_session(
        self,
        session_id: str,
        *,
        name: str | None = UNSET,
        pinned: bool = UNSET,
        profile_id: str = UNSET,
    ) -> Session:
        """Change only what is given (`name=None` clears the name)."""
        return self._call(
            api.update_session(session_id, name=name, pinned=pinned, profile_id=profile_id)
        )

    def delete_session(self, session_id: str) -> None:
        return self._call(api.delete_session(session_id))

    def session_matches(
        self, q: str, session_ids: Sequence[str], *, max_positions: int | None = None
    ) -> SessionMatches:
        return self._call(api.session_matches(q, session_ids, max_positions=max_positions))

    # --- messages and context

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[MessageLike],
        *,
        usage: ModelUsage | Mapping[str, Any] | None = None,
    ) -> AppendResult:
        """Append 1–500 messages atomically; with `usage` (what your model reported for
        the prompt) the post-turn check runs (`events`)."""
        return self._call(api.append_messages(session_id, messages, usage=usage))

    def list_messages(
        self, session_id: str, *, before_seq: int | None = None, limit: int | None = None
    ) -> HistoryPage:
        """The display history, newest page first; older: `before_seq=page.next_before_seq`."""
        return self._call(api.list_messages(session_id, before_seq=before_seq, limit=limit))

    def get_context(self, session_id: str) -> ContextView:
        return self._call(api.get_context(session_id))

    def list_planning(
        self, session_id: str, *, limit: int | None = None, offset: int | None = None
    ) -> Planning:
        return self._call(api.list_planning(session_id, limit=limit, offset=offset))

    def add_planning(self, session_id: str, entry: Mapping[str, Any]) -> None:
        return self._call(api.add_planning(session_id, entry))

    def prepare(
        self,
        session_id: str,
        message: str | MessageLike | None = None,
        *,
        mid_turn: bool = False,
        model: str | None = None,
    ) -> Prepared:
        """The context to send your model for the next call (compressed first when
        needed); `mid_turn=True` between tool rounds."""
        return self._call(api.prepare(session_id, message, mid_turn=mid_turn, model=model))

    def compact(self, session_id: str, *, model: str | None = None) -> Compacted:
        return self._call(api.compact(session_id, model=model))

    def reset_session(self, session_id: str) -> ResetResult:
        return self._call(api.reset_session(session_id))

    # --- the turn endpoint

    def turn(
        self,
        session_id: str,
        message: str | None = None,
        *,
        images: Sequence[str] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_results: Sequence[ToolOutput | Mapping[str, Any]] | None = None,
    ) -> TurnResult:
        """One turn of the agent loop run by Navi, answered in one piece. On
        `requires_action` run `result.pending` and call again with `tool_results`
        (and the same `tools`)."""
        return self._call(
            api.turn(session_id, message, images=images, tools=tools, tool_results=tool_results)
        )

    def stream_turn(
        self,
        session_id: str,
        message: str | None = None,
        *,
        images: Sequence[str] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_results: Sequence[ToolOutput | Mapping[str, Any]] | None = None,
    ) -> TurnStream:
        """The same turn as its events, as they happen (`with … as events: for event in
        events`); errors before the turn starts raise here."""
        call = api.stream_turn(
            session_id, message, images=images, tools=tools, tool_results=tool_results
        )
        return TurnStream(self._send(call))

    # --- memory

    def search_memory(
        self,
        query: str,
        *,
        scope: str | None = None,
        k: int | None = None,
        session_id: str | None = None,
        current_session_id: str | None = None,
        best_window: bool | None = None,
        as_of: str | None = None,
    ) -> MemorySearchResult:
        """Facts, scratchpads, error memory and every session's raw history (`scope`
        all / facts / raw / sketches / errors); `as_of`: the facts as they were then."""
        return self._call(
            api.search_memory(
                query,
                scope=scope,
                k=k,
                session_id=session_id,
                current_session_id=current_session_id,
                best_window=best_window,
                as_of=as_of,
            )
        )

    def list_facts(
        self,
        *,
        limit: int | None = None,
        offset: int | None = None,
        search: str | None = None,
        sort_by: str | None = None,
        sort_order: str | None = None,
        category: str | None = None,
        key: str | None = None,
        as_of: str | None = None,
    ) -> Page[Fact]:
        """The user's facts, paged; `category` / `key`: exact (as a save normalises them);
        `as_of` (ISO 8601 with a zone): the values true at that time instead."""
        return self._call(
            api.list_facts(
                limit=limit,
                offset=offset,
                search=search,
                sort_by=sort_by,
                sort_order=sort_order,
                category=category,
                key=key,
                as_of=as_of,
            )
        )

    def save_fact(
        self,
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
    ) -> SavedFact:
        """Create or replace the fact under (`category`, `key`)."""
        return self._call(
            api.save_fact(
                category,
                key,
                value,
                source=source,
                confidence=confidence,
                expires_days=expires_days,
                source_context=source_context,
                source_session_id=source_session_id,
                dedupe=dedupe,
            )
        )

    def search_facts(self, q: str, *, limit: int | None = None) -> FactSearchResult:
        return self._call(api.search_facts(q, limit=limit))

    def fact_history(
        self, fact_id: int, *, limit: int | None = None, cursor: str | None = None
    ) -> FactHistory:
        """A fact's versions, newest first (a deleted fact's too)."""
        return self._call(api.fact_history(fact_id, limit=limit, cursor=cursor))

    def restore_fact(self, fact_id: int, version_id: int) -> SavedFact:
        """Make an earlier version's value current again (a new version)."""
        return self._call(api.restore_fact(fact_id, version_id))

    def delete_fact(self, key: str, *, category: str | None = None) -> None:
        return self._call(api.delete_fact(key, category=category))

    def list_categories(self, *, limit: int | None = None, offset: int | None = None) -> Categories:
        return self._call(api.list_categories(limit=limit, offset=offset))

    def get_memory_summary(self) -> MemorySummary:
        return self._call(api.get_memory_summary())

    def set_memory_summary(self, content: str) -> MemorySummary:
        return self._call(api.set_memory_summary(content))

    def forget(self, text: str, *, dry_run: bool = False) -> ForgetResult:
        """Redact `text` from everything you own (facts holding it are deleted)."""
        return self._call(api.forget(text, dry_run=dry_run))

    def admin_list_facts(
        self,
        *,
        user_id: str | None = None,
        include_merged: bool | None = None,
        limit: int | None = None,
        offset: int | None = None,
        search: str | None = None,
        sort_by: str | None = None,
        sort_order: str | None = None,
    ) -> Page[Fact]:
        return self._call(
            api.admin_list_facts(
                user_id=user_id,
                include_merged=include_merged,
                limit=limit,
                offset=offset,
                search=search,
                sort_by=sort_by,
                sort_order=sort_order,
            )
        )

    def admin_search_facts(
        self, q: str, *, user_id: str | None = None, limit: int | None = None
    ) -> FactSearchResult:
        return self._call(api.admin_search_facts(q, user_id=user_id, limit=limit))

    def admin_merge_fact(self, fact_id: int, merged_into: int | None) -> Fact:
        return self._call(api.admin_merge_fact(fact_id, merged_into))

    # --- the tools

    def memory_tool(
        self,
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
    ) -> MemoryToolResult:
        """The `memory` tool: `action` save / search / forget / list."""
        return self._call(
            api.memory_tool(
                action,
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
        )

    def memory_search_tool(
        self,
        query: str,
        *,
        scope: str | None = None,
        k: int | None = None,
        session_id: str | None = None,
    ) -> MemorySearchResult:
        return self._call(api.memory_search_tool(query, scope=scope, k=k, session_id=session_id))

    def chat_history(
        self,
        session_id: str,
        query: str | None = None,
        *,
        mode: str | None = None,
        match: str | None = None,
        limit: int | None = None,
    ) -> ChatHistoryResult:
        return self._call(api.chat_history(session_id, query, mode=mode, match=match, limit=limit))

    def write_error(
        self, tool: str, error: str, fix: str, *, context: str | None = None
    ) -> WriteErrorResult:
        return self._call(api.write_error(tool, error, fix, context=context))

    def error_history(
        self, query: str | None = None, *, tool: str | None = None, limit: int | None = None
    ) -> ErrorHistoryResult:
        return self._call(api.error_history(query, tool=tool, limit=limit))

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Pass a model's tool call on verbatim (`POST /tools/<name>`); hand the
        answer's `text` back to the model."""
        return self._call(api.call_tool(name, arguments, session_id=session_id))

    # --- scratchpad

    def list_scratchpad(
        self, session_id: str, *, limit: int | None = None, offset: int | None = None
    ) -> Page[ScratchpadSection]:
        return self._call(api.list_scratchpad(session_id, limit=limit, offset=offset))

    def read_scratchpad(self, session_id: str, section: str) -> ScratchpadSection:
        return self._call(api.read_scratchpad(session_id, section))

    def write_scratchpad(self, session_id: str, section: str, value: str) -> ScratchpadSection:
        return self._call(api.write_scratchpad(session_id, section, value))

    def delete_scratchpad(self, session_id: str, section: str) -> None:
        return self._call(api.delete_scratchpad(session_id, section))

    # --- files

    def upload_files(self, session_id: str, files: Sequence[UploadFile]) -> UploadResult:
        """Upload files (paths, or `(name, bytes or binary file[, content type])`);
        append `message_block` to the user's message."""
        return self._call(api.upload_files(session_id, files))

    def list_files(
        self, session_id: str, *, limit: int | None = None, offset: int | None = None
    ) -> Page[FileInfo]:
        return self._call(api.list_files(session_id, limit=limit, offset=offset))

    def download_file(self, session_id: str, filename: str) -> bytes:
        return self._call(api.download_file(session_id, filename))

    def share_file(self, session_id: str, local_path: str) -> FileInfo:
        return self._call(api.share_file(session_id, local_path))

    def publish_file(self, session_id: str, filename: str) -> FileCard:
        return self._call(api.publish_file(session_id, filename))

    # --- shares

    def share_session(self, session_id: str) -> ShareLink:
        return self._call(api.share_session(session_id))

    def get_shared(self, token: str, *, limit: int | None = None) -> SharedSession:
        return self._call(api.get_shared(token, limit=limit))

    def shared_messages(
        self, token: str, *, before_seq: int | None = None, limit: int | None = None
    ) -> SharedMessages:
        return self._call(api.shared_messages(token, before_seq=before_seq, limit=limit))
