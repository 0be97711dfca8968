"""The `memory_search` tool: argument checks, the search and the text the model reads —
one implementation for `POST /tools/memory_search` and the agents' tool registry."""

from __future__ import annotations

import uuid
from datetime import datetime

from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.domain.search.schemas import HitOut, MemorySearchOut, ToolMemorySearchIn
from app.domain.search.services import SearchResult, UnifiedSearch
from app.lib.errors import Unprocessable

MAX_QUERY = 2000


def result_out(r: SearchResult) -> MemorySearchOut:
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


def check_query(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise Unprocessable("query: required — what to look for")
    if len(query) > MAX_QUERY:
        raise Unprocessable(f"query: at most {MAX_QUERY} characters")
    return query


def check_as_of(raw: object) -> datetime | None:
    """`as_of`: an ISO 8601 time with its zone, or None (now)."""
    if raw is None:
        return None
    try:
        at = raw if isinstance(raw, datetime) else datetime.fromisoformat(str(raw))
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        raise Unprocessable(
            "as_of: expected an ISO 8601 time with its zone, e.g. 2026-05-01T12:00Z"
        )
    return at


async def check_session(access: SessionAccess, principal: Principal, sid: uuid.UUID | None) -> None:
    if sid is not None:
        await access.get(sid, Viewer.of(principal))


async def run_memory_search_tool(
    search: UnifiedSearch,
    access: SessionAccess,
    principal: Principal,
    call: ToolMemorySearchIn,
    current: uuid.UUID | None,
) -> MemorySearchOut:
    """`current`: the caller's session (ranked first; its sketches searched), or None."""
    query = check_query(call.query)
    await search.embed_first(query)  # before the session check's statement
    await check_session(access, principal, current)
    result = await search.search(
        query,
        user_id=principal.id,
        scope=call.scope,
        k=call.k,
        current_session_id=current,
        as_of=check_as_of(call.as_of),
    )
    return result_out(result)
