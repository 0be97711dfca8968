"""`AsyncNavi`, the asyncio client: `Navi` (`_sync.py`) method for method, awaited. Both
send what the functions of `_api.py` build."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
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
from navi_client._streams import AsyncExportStream, AsyncTurnStream

__all__ = ["AsyncNavi"]

T = TypeVar("T")

_sleep = asyncio.sleep  # the tests replace it


async def _chunks(source: Iterable[bytes]) -> AsyncIterator[bytes]:
    """A sync body (a file read in chunks) read in a worker thread."""
    iterator = iter(source)
    while (chunk := await asyncio.to_thread(next, iterator, None)) is not None:
        yield chunk


class AsyncNavi:
    """`Navi` for asyncio: the same constructor, the same methods, awaited. Streams:
    `async with await navi.stream_turn(…) as events: async for event in events`."""

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
        transport: httpx.AsyncBaseTransport | None = None,
        http_client: httpx.AsyncClient | None = None,
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
        self._http = http_client or httpx.AsyncClient(timeout=timeout, transport=transport)

    @property
    def base_url(self) -> str:
        return self._core.base_url

    @property
    def write_lsn(self) -> str | None:
        """The newest `Navi-Write-LSN` this client has seen (sent as `Navi-Min-LSN`)."""
        return self._core.lsn.current

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncNavi:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- sending

    async def _send(self, call: Call[Any]) -> httpx.Response:
        if isinstance(call.content, Iterable) and not isinstance(call.content, bytes):
            call = dataclasses.replace(call, content=_chunks(call.content))  # type: ignore[arg-type]
        attempt, waited = 1, 0.0
        while True:
            request = self._http.build_request(**self._core.request_args(call))
            response = await self._http.send(request, stream=call.stream)
            self._core.observe(response)
            if response.is_success:
                return response
            try:
                await response.aread()
            finally:
                await response.aclose()
            delay = self._core.retry_delay(call, response, attempt, waited)
            if delay is None:
                raise self._core.error(response)
            await _sleep(delay)
            attempt, waited = attempt + 1, waited + delay

    async def _call(self, call: Call[T]) -> T:
        return call.decode(await self._send(call))

    # --- system

    async def health(self) -> Health:
        """`GET /health` (a 503 raises `Unavailable`; its `body` is the report)."""
        return await self._call(api.health())

    # --- the caller, tokens, users

    async def me(self) -> Me:
        return await self._call(api.me())

    async def list_tokens(
        self, *, limit: int | None = None, offset: int | None = None
    ) -> Page[TokenInfo]:
        return await self._call(api.list_tokens(limit=limit, offset=offset))

    async def create_token(self, name: str = "") -> IssuedToken:
        """A token for yourself; `token` is shown this once."""
        return await self._call(api.create_token(name))

    async def revoke_token(self, token_id: str) -> None:
        return await self._call(api.revoke_token(token_id))

    async def admin_create_user(
        self, name: str, *, is_admin: bool = False, permissions: Sequence[str] = ()
    ) -> User:
        return await self._call(
            api.admin_create_user(name, is_admin=is_admin, permissions=permissions)
        )

    async def admin_list_users(
        self, *, limit: int | None = None, offset: int | None = None
    ) -> Page[User]:
        return await self._call(api.admin_list_users(limit=limit, offset=offset))

    async def admin_issue_token(self, user_id: str, name: str = "") -> IssuedToken:
        return await self._call(api.admin_issue_token(user_id, name))

    async def admin_delete_user(self, user_id: str) -> None:
        return await self._call(api.admin_delete_user(user_id))

    async def admin_forget(self, user_id: str, text: str, *, dry_run: bool = False) -> ForgetResult:
        return await self._call(api.admin_forget(user_id, text, dry_run=dry_run))

    async def admin_export(self, user_id: str) -> AsyncExportStream:
        return AsyncExportStream(await self._send(api.admin_export(user_id)))

    # --- export and import

    async def export_account(self) -> AsyncExportStream:
        """Your whole memory as NDJSON records, streamed (`save(path)` keeps the file)."""
        return AsyncExportStream(await self._send(api.export_account()))

    async def import_account(self, data: ImportData) -> ImportReport:
        """Restore an export into your (empty) account, in one transaction."""
        return await self._call(api.import_account(data))

    # --- sessions

    async def create_session(self, profile_id: str = "default", name: str | None = None) -> Session:
        return await self._call(api.create_session(profile_id, name))

    async def list_sessions(
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
        return await self._call(
            api.list_sessions(
                limit=limit,
                offset=offset,
                profile_id=profile_id,
                search=search,
                sort_by=sort_by,
                sort_order=sort_order,
            )
        )

    async def get_session(self, session_id: str) -> Session:
        return await self._call(api.get_session(session_id))

    async def update_session(
        self,
        session_id: str,
        *,
        name: str | None = UNSET,
        pinned: bool = UNSET,
        profile_id: str = UNSET,
    ) -> Session:
        """Change only what is given (`name=None` clears the name)."""
        return await self._call(
            api.update_session(session_id, name=name, pinned=pinned, profile_id=profile_id)
        )

    async def delete_session(self, session_id: str) -> None:
        return await self._call(api.delete_session(session_id))

    async def session_matches(
        self, q: str, session_ids: Sequence[str], *, max_positions: int | None = None
    ) -> SessionMatches:
        return await self._call(api.session_matches(q, session_ids, max_positions=max_positions))

    # --- messages and context

    async def append_messages(
        self,
        session_id: str,
        messages: Sequence[MessageLike],
        *,
        usage: ModelUsage | Mapping[str, Any] | None = None,
    ) -> AppendResult:
        """Append 1–500 messages atomically; with `usage` (what your model reported for
        the prompt) the post-turn check runs (`events`)."""
        return await self._call(api.append_messages(session_id, messages, usage=usage))

    async def list_messages(
        self, session_id: str, *, before_seq: int | None = None, limit: int | None = None
    ) -> HistoryPage:
        """The display history, newest page first; older: `before_seq=page.next_before_seq`."""
        return await self._call(api.list_messages(session_id, before_seq=before_seq, limit=limit))

    async def get_context(self, session_id: str) -> ContextView:
        return await self._call(api.get_context(session_id))

    async def list_planning(
        self, session_id: str, *, limit: int | None = None, offset: int | None = None
    ) -> Planning:
        return await self._call(api.list_planning(session_id, limit=limit, offset=offset))

    async def add_planning(self, session_id: str, entry: Mapping[str, Any]) -> None:
        return await self._call(api.add_planning(session_id, entry))

    async def prepare(
        self,
        session_id: str,
        message: str | MessageLike | None = None,
        *,
        mid_turn: bool = False,
        model: str | None = None,
    ) -> Prepared:
        """The context to send your model for the next call (compressed first when
        needed); `mid_turn=True` between tool rounds."""
        return await self._call(api.prepare(session_id, message, mid_turn=mid_turn, model=model))

    async def compact(self, session_id: str, *, model: str | None = None) -> Compacted:
        return await self._call(api.compact(session_id, model=model))

    async def reset_session(self, session_id: str) -> ResetResult:
        return await self._call(api.reset_session(session_id))

    # --- the turn endpoint

    async def turn(
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
        return await self._call(
            api.turn(session_id, message, images=images, tools=tools, tool_results=tool_results)
        )

    async def stream_turn(
        self,
        session_id: str,
        message: str | None = None,
        *,
        images: Sequence[str] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_results: Sequence[ToolOutput | Mapping[str, Any]] | None = None,
    ) -> AsyncTurnStream:
        """The same turn as its events, as they happen (`with … as events: for event in
        events`); errors before the turn starts raise here."""
        call = api.stream_turn(
            session_id, message, images=images, tools=tools, tool_results=tool_results
        )
        return AsyncTurnStream(await self._send(call))

    # --- memory

    async def search_memory(
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
        return await self._call(
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

    async def list_facts(
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
        return await self._call(
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

    async def save_fact(
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
        return await self._call(
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

    async def search_facts(self, q: str, *, limit: int | None = None) -> FactSearchResult:
        return await self._call(api.search_facts(q, limit=limit))

    async def fact_history(
        self, fact_id: int, *, limit: int | None = None, cursor: str | None = None
    ) -> FactHistory:
        """A fact's versions, newest first (a deleted fact's too)."""
        return await self._call(api.fact_history(fact_id, limit=limit, cursor=cursor))

    async def restore_fact(self, fact_id: int, version_id: int) -> SavedFact:
        """Make an earlier version's value current again (a new version)."""
        return await self._call(api.restore_fact(fact_id, version_id))

    async def delete_fact(self, key: str, *, category: str | None = None) -> None:
        return await self._call(api.delete_fact(key, category=category))

    async def list_categories(
        self, *, limit: int | None = None, offset: int | None = None
    ) -> Categories:
        return await self._call(api.list_categories(limit=limit, offset=offset))

    async def get_memory_summary(self) -> MemorySummary:
        return await self._call(api.get_memory_summary())

    async def set_memory_summary(self, content: str) -> MemorySummary:
        return await self._call(api.set_memory_summary(content))

    async def forget(self, text: str, *, dry_run: bool = False) -> ForgetResult:
        """Redact `text` from everything you own (facts holding it are deleted)."""
        return await self._call(api.forget(text, dry_run=dry_run))

    async def admin_list_facts(
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
        return await self._call(
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

    async def admin_search_facts(
        self, q: str, *, user_id: str | None = None, limit: int | None = None
    ) -> FactSearchResult:
        return await self._call(api.admin_search_facts(q, user_id=user_id, limit=limit))

    async def admin_merge_fact(self, fact_id: int, merged_into: int | None) -> Fact:
        return await self._call(api.admin_merge_fact(fact_id, merged_into))

    # --- the tools

    async def memory_tool(
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
        return await self._call(
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

    async def memory_search_tool(
        self,
        query: str,
        *,
        scope: str | None = None,
        k: int | None = None,
        session_id: str | None = None,
    ) -> MemorySearchResult:
        return await self._call(
            api.memory_search_tool(query, scope=scope, k=k, session_id=session_id)
        )

    async def chat_history(
        self,
        session_id: str,
        query: str | None = None,
        *,
        mode: str | None = None,
        match: str | None = None,
        limit: int | None = None,
    ) -> ChatHistoryResult:
        return await self._call(
            api.chat_history(session_id, query, mode=mode, match=match, limit=limit)
        )

    async def write_error(
        self, tool: str, error: str, fix: str, *, context: str | None = None
    ) -> WriteErrorResult:
        return await self._call(api.write_error(tool, error, fix, context=context))

    async def error_history(
        self, query: str | None = None, *, tool: str | None = None, limit: int | None = None
    ) -> ErrorHistoryResult:
        return await self._call(api.error_history(query, tool=tool, limit=limit))

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Pass a model's tool call on verbatim (`POST /tools/<name>`); hand the
        answer's `text` back to the model."""
        return await self._call(api.call_tool(name, arguments, session_id=session_id))

    # --- scratchpad

    async def list_scratchpad(
        self, session_id: str, *, limit: int | None = None, offset: int | None = None
    ) -> Page[ScratchpadSection]:
        return await self._call(api.list_scratchpad(session_id, limit=limit, offset=offset))

    async def read_scratchpad(self, session_id: str, section: str) -> ScratchpadSection:
        return await self._call(api.read_scratchpad(session_id, section))

    async def write_scratchpad(
        self, session_id: str, section: str, value: str
    ) -> ScratchpadSection:
        return await self._call(api.write_scratchpad(session_id, section, value))

    async def delete_scratchpad(self, session_id: str, section: str) -> None:
        return await self._call(api.delete_scratchpad(session_id, section))

    # --- files

    async def upload_files(self, session_id: str, files: Sequence[UploadFile]) -> UploadResult:
        """Upload files (paths, or `(name, bytes or binary file[, content type])`);
        append `message_block` to the user's message."""
        return await self._call(api.upload_files(session_id, files))

    async def list_files(
        self, session_id: str, *, limit: int | None = None, offset: int | None = None
    ) -> Page[FileInfo]:
        return await self._call(api.list_files(session_id, limit=limit, offset=offset))

    async def download_file(self, session_id: str, filename: str) -> bytes:
        return await self._call(api.download_file(session_id, filename))

    async def share_file(self, session_id: str, local_path: str) -> FileInfo:
        return await self._call(api.share_file(session_id, local_path))

    async def publish_file(self, session_id: str, filename: str) -> FileCard:
        return await self._call(api.publish_file(session_id, filename))

    # --- shares

    async def share_session(self, session_id: str) -> ShareLink:
        return await self._call(api.share_session(session_id))

    async def get_shared(self, token: str, *, limit: int | None = None) -> SharedSession:
        return await self._call(api.get_shared(token, limit=limit))

    async def shared_messages(
        self, token: str, *, before_seq: int | None = None, limit: int | None = None
    ) -> SharedMessages:
        return await self._call(api.shared_messages(token, before_seq=before_seq, limit=limit))
