from __future__ import annotations

import uuid

from litestar import Controller, Request, post

from app.domain.history.deps import DEPENDENCIES
from app.domain.history.schemas import (
    ChatHistoryIn,
    ChatHistoryOut,
    HistoryHitOut,
    HistoryMessageOut,
)
from app.domain.history.search import (
    HistoryResult,
    HistoryRow,
    clip_json,
    normalize_call,
    render,
    utc,
)
from app.domain.history.services import HistorySearch
from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.lib.errors import Unprocessable

SESSION_HEADER = "x-navi-session-id"
MAX_QUERY = 2000


def session_from(field: str | None, request: Request) -> uuid.UUID:
    """The session of a tool call: the `session_id` field, else the X-Navi-Session-Id header."""
    raw = field or request.headers.get(SESSION_HEADER)
    if not raw:
        raise Unprocessable("session_id: required (the field or the X-Navi-Session-Id header)")
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise Unprocessable("session_id: not a session id") from None


def _message(row: HistoryRow) -> HistoryMessageOut:
    content, truncated = clip_json(row.content)
    return HistoryMessageOut(
        sequence_number=row.sequence_number,
        role=row.role,
        content=content,
        created_at=utc(row.created_at),
        archived=row.archived,
        name=row.name,
        truncated=truncated,
    )


def result_out(session_id: uuid.UUID, result: HistoryResult) -> ChatHistoryOut:
    hits = []
    for h in result.hits:
        content, truncated = clip_json(h.row.content)
        hits.append(
            HistoryHitOut(
                sequence_number=h.row.sequence_number,
                role=h.row.role,
                content=content,
                created_at=utc(h.row.created_at),
                archived=h.row.archived,
                kind=h.kind,
                score=h.score,
                before=[_message(r) for r in h.before],
                after=[_message(r) for r in h.after],
                name=h.row.name,
                truncated=truncated,
            )
        )
    return ChatHistoryOut(
        session_id=str(session_id),
        mode=result.mode,
        match=result.match,
        query=result.query,
        limit=result.limit,
        fallback=result.fallback,
        hits=hits,
        text=render(result),
    )


class ChatHistoryController(Controller):
    tags = ["tools"]
    dependencies = DEPENDENCIES

    @post("/tools/chat_history", status_code=200)
    async def chat_history(
        self,
        data: ChatHistoryIn,
        request: Request,
        principal: Principal,
        access: SessionAccess,
        history: HistorySearch,
    ) -> ChatHistoryOut:
        """Search or list one session's own history (hot and archived)."""
        call = normalize_call(data.mode, data.match, data.query, data.limit)
        if len(call.query) > MAX_QUERY:
            raise Unprocessable(f"query: at most {MAX_QUERY} characters")
        sid = session_from(data.session_id, request)
        await access.get(sid, Viewer.of(principal))
        result = await history.run(sid, call)
        return result_out(sid, result)
