from __future__ import annotations

import uuid
from typing import Annotated

from litestar import Controller, Request, delete, get, post, put
from litestar.datastructures import State
from litestar.params import Parameter
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.auth.principal import Principal
from app.domain.memory.schemas import (
    HitOut,
    MemorySearchIn,
    MemorySearchOut,
    SketchIn,
    SketchOut,
    ToolMemorySearchIn,
)
from app.domain.memory.sketch_repository import SCRATCHPAD, SketchRepository
from app.domain.memory.unified_search import SearchResult
from app.domain.memory.wiring import unified_search
from app.domain.sessions.access import Viewer
from app.domain.sessions.services import SessionService
from app.lib.errors import NotFound, PayloadTooLarge, Unprocessable
from app.lib.inputs import scrub_text
from app.lib.pagination import Limit, Offset, Page, page

MAX_QUERY = 2000
MAX_SECTION = 200
MAX_SKETCH = 64 * 1024
SESSION_HEADER = "x-navi-session-id"


def _result_out(r: SearchResult) -> MemorySearchOut:
    return MemorySearchOut(
        query=r.query,
        scope=r.scope,
        k=r.k,
        hits=[
            HitOut(
                **{f: getattr(h, f) for f in HitOut.__struct_fields__ if f != "breadcrumbs"},
                breadcrumbs=list(h.breadcrumbs),
            )
            for h in r.hits
        ],
        text=r.text,
    )


def _uuid(value: str | None, field: str) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise Unprocessable(f"{field}: not a session id") from None


async def _check_session(
    db: AsyncSession, settings: Settings, principal: Principal, sid: uuid.UUID | None
) -> None:
    if sid is not None:
        await SessionService(db, settings).get(sid, Viewer.of(principal))


class MemorySearchController(Controller):
    tags = ["memory"]

    @post("/memory/search", status_code=200)
    async def memory_search(
        self,
        data: MemorySearchIn,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
        state: State,
    ) -> MemorySearchOut:
        if len(data.query) > MAX_QUERY:
            raise Unprocessable(f"query: at most {MAX_QUERY} characters")
        sid = _uuid(data.session_id, "session_id")
        current = _uuid(data.current_session_id, "current_session_id")
        for s in (sid, current):
            await _check_session(db, settings, principal, s)
        result = await unified_search(db, state.llm, settings, state.session_factory).search(
            data.query,
            user_id=principal.id,
            scope=data.scope,
            k=data.k,
            session_id=sid,
            current_session_id=current,
            best_window=data.best_window,
        )
        return _result_out(result)

    @post("/tools/memory_search", status_code=200)
    async def memory_search_tool(
        self,
        data: ToolMemorySearchIn,
        request: Request,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
        state: State,
    ) -> MemorySearchOut:
        """The tool call as the model wrote it; the current session comes from the
        `X-Navi-Session-Id` header (or a `session_id` field)."""
        if not isinstance(data.query, str) or not data.query.strip():
            raise Unprocessable("query: required — what to look for")
        if len(data.query) > MAX_QUERY:
            raise Unprocessable(f"query: at most {MAX_QUERY} characters")
        current = _uuid(data.session_id or request.headers.get(SESSION_HEADER), "session_id")
        await _check_session(db, settings, principal, current)
        result = await unified_search(db, state.llm, settings, state.session_factory).search(
            data.query, user_id=principal.id, scope=data.scope, k=data.k, current_session_id=current
        )
        return _result_out(result)


Section = Annotated[str, Parameter(min_length=1, max_length=MAX_SECTION)]


class ScratchpadController(Controller):
    path = "/sessions/{session_id:uuid}/scratchpad"
    tags = ["memory"]

    @get("/")
    async def list_sections(
        self,
        session_id: uuid.UUID,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[SketchOut]:
        session = await SessionService(db, settings).get(session_id, Viewer.of(principal))
        rows, total = await SketchRepository(db).list_page(
            session.user_id or principal.id, SCRATCHPAD, session_id, limit, offset
        )
        return page(
            [SketchOut(section=r.key, value=r.value, updated_at=r.updated_at) for r in rows],
            total,
            limit,
            offset,
        )

    @put("/{section:str}")
    async def put_section(
        self,
        session_id: uuid.UUID,
        section: str,
        data: SketchIn,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
    ) -> SketchOut:
        if not section.strip() or len(section) > MAX_SECTION:
            raise Unprocessable(f"section: 1-{MAX_SECTION} characters")
        if len(data.value) > MAX_SKETCH:
            raise PayloadTooLarge(f"value: at most {MAX_SKETCH} characters")
        session = await SessionService(db, settings).get(session_id, Viewer.editor(principal))
        repo = SketchRepository(db)
        owner = session.user_id or principal.id
        # The value is kept whatever a tool printed: a NUL becomes U+FFFD.
        await repo.put(owner, SCRATCHPAD, session_id, section, scrub_text(data.value))
        row = await repo.get(owner, SCRATCHPAD, session_id, section)
        assert row is not None
        return SketchOut(section=row.key, value=row.value, updated_at=row.updated_at)

    @get("/{section:str}")
    async def get_section(
        self,
        session_id: uuid.UUID,
        section: str,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
    ) -> SketchOut:
        session = await SessionService(db, settings).get(session_id, Viewer.of(principal))
        row = await SketchRepository(db).get(
            session.user_id or principal.id, SCRATCHPAD, session_id, section
        )
        if row is None:
            raise NotFound(f"no scratchpad section {section!r}")
        return SketchOut(section=row.key, value=row.value, updated_at=row.updated_at)

    @delete("/{section:str}", status_code=204)
    async def delete_section(
        self,
        session_id: uuid.UUID,
        section: str,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
    ) -> None:
        session = await SessionService(db, settings).get(session_id, Viewer.editor(principal))
        if not await SketchRepository(db).delete(
            session.user_id or principal.id, SCRATCHPAD, session_id, section
        ):
            raise NotFound(f"no scratchpad section {section!r}")
