from __future__ import annotations

import uuid
from typing import Annotated, Any

import msgspec
from litestar import Controller, delete, get, patch, post
from litestar.params import Parameter
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Session
from app.domain.kernel.access import Viewer
from app.domain.kernel.commits import after_commit, commit_now
from app.domain.kernel.deps import READ_ONLY, READ_ONLY_STANDALONE
from app.domain.kernel.events import ContextEvent
from app.domain.kernel.jobs import LIVE_INDEX_JOB, wake
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.kernel.session_files import remove_session_dirs
from app.domain.sessions.cursor import decode_cursor, encode_cursor
from app.domain.sessions.deps import DEPENDENCIES
from app.domain.sessions.naming import name_after_commit
from app.domain.sessions.schemas import (
    AppendRequest,
    AppendResult,
    ContextOut,
    HistoryPage,
    MatchesOut,
    PlanningLogIn,
    PlanningOut,
    SessionCreate,
    SessionMatches,
    SessionOut,
    SessionPage,
    SessionPatch,
    SessionSummary,
    SortBy,
    SortOrder,
)
from app.domain.sessions.services import SessionService, check_profile_id
from app.lib.errors import BadRequest, Unprocessable
from app.lib.pagination import MAX_LIMIT, BeforeSeq, Limit, Offset

MAX_MATCH_SESSIONS = 100
MAX_POSITIONS = 1000
# Positions reported per session unless `max_positions` asks otherwise: the first matches
# in display order, with `truncated` when there are more (docs/api.md, "Match positions").
DEFAULT_POSITIONS = 20


def session_out(s: Session) -> SessionOut:
    return SessionOut(
        id=s.id,
        profile_id=s.profile_id,
        user_id=s.user_id,
        name=s.name,
        pinned=s.pinned,
        created_at=s.created_at,
        last_active=s.last_active,
        context_token_count=s.context_token_count,
        display_message_count=s.next_display_index,
        session_metadata=s.session_metadata or {},
    )


def summary_out(r: Row[Any]) -> SessionSummary:
    return SessionSummary(
        id=r.id,
        profile_id=r.profile_id,
        user_id=r.user_id,
        name=r.name,
        pinned=r.pinned,
        created_at=r.created_at,
        last_active=r.last_active,
        display_message_count=r.display_message_count,
        preview=r.preview,
    )


def _search_term(value: str | None, field: str) -> str | None:
    if value is None:
        return None
    if len(value) > 200:
        raise Unprocessable(f"{field}: at most 200 characters")
    return value if value.strip() else None


class SessionController(Controller):
    path = "/sessions"
    tags = ["sessions"]
    dependencies = DEPENDENCIES

    @post("/")
    async def create_session(
        self,
        data: SessionCreate,
        principal: Principal,
        sessions: SessionService,
        runtime: Runtime,
    ) -> SessionOut:
        row = await sessions.create(
            data.profile_id, principal.id, data.name, known=runtime.profiles.ids()
        )
        runtime.session_hooks.created(runtime)
        return session_out(row)

    @get("/", dependencies=READ_ONLY_STANDALONE)
    async def list_sessions(
        self,
        principal: Principal,
        sessions: SessionService,
        limit: Limit = 50,
        offset: Offset = 0,
        profile_id: str | None = None,
        search: str | None = None,
        sort_by: SortBy = "last_active",
        sort_order: SortOrder = "desc",
        cursor: Annotated[str | None, Parameter(max_length=512)] = None,
    ) -> SessionPage:
        viewer = Viewer.of(principal)
        term = _search_term(search, "search")
        after = None
        if cursor is not None:
            if offset:
                raise BadRequest("offset: give a cursor or an offset, not both")
            after = decode_cursor(cursor, sort_by, sort_order)
        rows, total = await sessions.list_page(
            viewer,
            limit=limit if after is None else limit + 1,  # one more: is there a next page
            offset=offset,
            profile_id=profile_id,
            search=term,
            sort_by=sort_by,
            sort_order=sort_order,
            after=after,
        )
        has_more = len(rows) > limit if after is not None else offset + len(rows) < total
        rows = rows[:limit]
        return SessionPage(
            items=[summary_out(r) for r in rows],
            total=total,
            limit=limit,
            offset=offset,
            has_more=has_more,
            next_cursor=encode_cursor(sort_by, sort_order, rows[-1]) if has_more else None,
        )

    @get("/matches", dependencies=READ_ONLY)
    async def search_matches(
        self,
        principal: Principal,
        sessions: SessionService,
        q: str,
        session_id: Annotated[list[uuid.UUID], Parameter(query="session_id")],
        max_positions: Annotated[int, Parameter(ge=1, le=MAX_POSITIONS)] = DEFAULT_POSITIONS,
    ) -> MatchesOut:
        term = _search_term(q, "q")
        if term is None:
            raise Unprocessable("q: must not be empty")
        if len(session_id) > MAX_MATCH_SESSIONS:
            raise Unprocessable(f"session_id: at most {MAX_MATCH_SESSIONS} sessions per request")
        rows = await sessions.search_matches(session_id, Viewer.of(principal), term, max_positions)
        found = {r.session_id: r for r in rows}
        return MatchesOut(
            query=term,
            sessions=[
                SessionMatches(
                    session_id=sid,
                    positions=list(found[sid].positions),
                    match_count=min(int(found[sid].match_count), max_positions),
                    truncated=int(found[sid].match_count) > max_positions,
                    snippet=found[sid].snippet,
                )
                for sid in dict.fromkeys(session_id)
                if sid in found
            ],
        )

    @get("/{session_id:uuid}")
    async def get_session(
        self, session_id: uuid.UUID, principal: Principal, sessions: SessionService
    ) -> SessionOut:
        return session_out(await sessions.get(session_id, Viewer.of(principal)))

    @patch("/{session_id:uuid}")
    async def patch_session(
        self,
        session_id: uuid.UUID,
        data: SessionPatch,
        principal: Principal,
        sessions: SessionService,
        db: AsyncSession,
        runtime: Runtime,
    ) -> SessionOut:
        fields = ("name", "pinned", "profile_id")
        values = {k: getattr(data, k) for k in fields if getattr(data, k) is not msgspec.UNSET}
        viewer = Viewer.editor(principal)
        switched = False
        if "profile_id" in values:
            values["profile_id"] = check_profile_id(values["profile_id"], runtime.profiles.ids())
            before = await sessions.get(session_id, viewer)
            switched = before.profile_id != values["profile_id"]
        row = await sessions.patch(session_id, viewer, values)
        if switched:  # the new window applies now: compressed at once when it must
            await runtime.session_hooks.profile_changed(db, runtime, session_id, viewer)
            row = await sessions.reload(session_id, viewer)
        return session_out(row)

    @delete("/{session_id:uuid}", status_code=204)
    async def delete_session(
        self,
        session_id: uuid.UUID,
        principal: Principal,
        sessions: SessionService,
        settings: Settings,
        db: AsyncSession,
    ) -> None:
        await sessions.delete(session_id, Viewer.editor(principal))
        # the files go once the rows are gone for good: a delete that rolls back keeps both
        after_commit(db, lambda: remove_session_dirs(settings, [session_id]))

    @post("/{session_id:uuid}/messages", opt={"errors": ["507"]})
    async def append_messages(
        self,
        session_id: uuid.UUID,
        data: AppendRequest,
        principal: Principal,
        sessions: SessionService,
        db: AsyncSession,
        settings: Settings,
        runtime: Runtime,
    ) -> AppendResult:
        viewer = Viewer.editor(principal)
        refs = await sessions.append(session_id, viewer, data.messages, check_quota=True)
        after_commit(db, lambda: wake(runtime.jobs, LIVE_INDEX_JOB))  # findable by memory_search
        if settings.session_auto_name_enabled and any(m.role == "assistant" for m in data.messages):
            name_after_commit(db, runtime, await sessions.get(session_id, viewer))  # 1st exchange
        events: list[ContextEvent] = []
        if data.usage is not None:  # the post-turn check (app/domain/context)
            then = await runtime.session_hooks.appended(db, runtime, session_id, viewer, data.usage)
            if then is not None:  # a compression: once the append is stored, no lock held
                await commit_now(db)
                events = await then()
        return AppendResult(session_id=session_id, messages=refs, events=events)

    @get("/{session_id:uuid}/messages", dependencies=READ_ONLY_STANDALONE)
    async def history(
        self,
        session_id: uuid.UUID,
        principal: Principal,
        sessions: SessionService,
        before_seq: BeforeSeq = None,
        limit: Limit = 50,
    ) -> HistoryPage:
        return await sessions.history(session_id, Viewer.of(principal), before_seq, limit)

    @get("/{session_id:uuid}/context")
    async def context(
        self, session_id: uuid.UUID, principal: Principal, sessions: SessionService
    ) -> ContextOut:
        session, msgs = await sessions.context(session_id, Viewer.of(principal))
        return ContextOut(
            session_id=session_id, messages=msgs, context_token_count=session.context_token_count
        )

    @get("/{session_id:uuid}/planning")
    async def planning(
        self,
        session_id: uuid.UUID,
        principal: Principal,
        sessions: SessionService,
        limit: Limit = MAX_LIMIT,  # the default is every kept entry (PLANNING_LOGS_KEPT)
        offset: Offset = 0,
    ) -> PlanningOut:
        logs, total = await sessions.planning_page(session_id, Viewer.of(principal), limit, offset)
        return PlanningOut(
            session_id=session_id,
            planning_logs=logs,
            total=total,
            limit=limit,
            offset=offset,
            has_more=offset + len(logs) < total,
        )

    @post("/{session_id:uuid}/planning", status_code=204)
    async def add_planning(
        self,
        session_id: uuid.UUID,
        data: PlanningLogIn,
        principal: Principal,
        sessions: SessionService,
    ) -> None:
        await sessions.add_planning_log(session_id, Viewer.editor(principal), data.entry)
