from __future__ import annotations

from litestar import Controller, Request, post

from app.domain.kernel.access import SESSION_HEADER, session_id_of
from app.domain.kernel.deps import READ_ONLY
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.domain.search.deps import DEPENDENCIES
from app.domain.search.schemas import MemorySearchIn, MemorySearchOut, ToolMemorySearchIn
from app.domain.search.services import UnifiedSearch
from app.domain.search.tool import (
    MAX_QUERY,
    check_as_of,
    check_session,
    result_out,
    run_memory_search_tool,
)
from app.lib.errors import Unprocessable


class MemorySearchController(Controller):
    tags = ["memory"]
    dependencies = DEPENDENCIES

    @post("/memory/search", status_code=200, dependencies=READ_ONLY)
    async def memory_search(
        self,
        data: MemorySearchIn,
        principal: Principal,
        search: UnifiedSearch,
        access: SessionAccess,
    ) -> MemorySearchOut:
        if len(data.query) > MAX_QUERY:
            raise Unprocessable(f"query: at most {MAX_QUERY} characters")
        sid = session_id_of(data.session_id, "session_id")
        current = session_id_of(data.current_session_id, "current_session_id")
        await search.embed_first(data.query)  # before the session checks' statement
        for s in (sid, current):
            await check_session(access, principal, s)
        result = await search.search(
            data.query,
            user_id=principal.id,
            scope=data.scope,
            k=data.k,
            session_id=sid,
            current_session_id=current,
            best_window=data.best_window,
            as_of=check_as_of(data.as_of),
        )
        return result_out(result)

    @post("/tools/memory_search", status_code=200, dependencies=READ_ONLY)
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
        current = session_id_of(
            data.session_id or request.headers.get(SESSION_HEADER), "session_id"
        )
        return await run_memory_search_tool(search, access, principal, data, current)
