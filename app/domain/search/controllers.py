from __future__ import annotations

import uuid

from litestar import Controller, Request, post

from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.domain.search.deps import DEPENDENCIES
from app.domain.search.schemas import HitOut, MemorySearchIn, MemorySearchOut, ToolMemorySearchIn
from app.domain.search.services import SearchResult, UnifiedSearch
from app.lib.errors import Unprocessable

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
    access: SessionAccess, principal: Principal, sid: uuid.UUID | None
) -> None:
    if sid is not None:
        await access.get(sid, Viewer.of(principal))


class MemorySearchController(Controller):
    tags = ["memory"]
    dependencies = DEPENDENCIES

    @post("/memory/search", status_code=200)
    async def memory_search(
        self,
        data: MemorySearchIn,
        principal: Principal,
        search: UnifiedSearch,
        access: SessionAccess,
    ) -> MemorySearchOut:
        if len(data.query) > MAX_QUERY:
            raise Unprocessable(f"query: at most {MAX_QUERY} characters")
        sid = _uuid(data.session_id, "session_id")
        current = _uuid(data.current_session_id, "current_session_id")
        for s in (sid, current):
            await _check_session(access, principal, s)
        result = await search.search(
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
        search: UnifiedSearch,
        access: SessionAccess,
    ) -> MemorySearchOut:
        """The tool call as the model wrote it; the current session comes from the
        `X-Navi-Session-Id` header (or a `session_id` field)."""
        if not isinstance(data.query, str) or not data.query.strip():
            raise Unprocessable("query: required — what to look for")
        if len(data.query) > MAX_QUERY:
            raise Unprocessable(f"query: at most {MAX_QUERY} characters")
        current = _uuid(data.session_id or request.headers.get(SESSION_HEADER), "session_id")
        await _check_session(access, principal, current)
        result = await search.search(
            data.query, user_id=principal.id, scope=data.scope, k=data.k, current_session_id=current
        )
        return _result_out(result)
