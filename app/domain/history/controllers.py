from __future__ import annotations

import uuid

from litestar import Controller, Request, post

from app.domain.history.deps import DEPENDENCIES
from app.domain.history.schemas import ChatHistoryIn, ChatHistoryOut
from app.domain.history.services import HistorySearch
from app.domain.history.tool import embed_ahead, run_chat_history_tool
from app.domain.kernel.access import SESSION_HEADER, session_id_of
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.lib.errors import Unprocessable


def session_from(field: str | None, request: Request) -> uuid.UUID:
    """The session of a tool call: the `session_id` field, else the X-Navi-Session-Id header."""
    sid = session_id_of(field or request.headers.get(SESSION_HEADER))
    if sid is None:
        raise Unprocessable("session_id: required (the field or the X-Navi-Session-Id header)")
    return sid


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
        runtime: Runtime,
    ) -> ChatHistoryOut:
        """Search or list one session's own history (hot and archived)."""
        sid = session_from(data.session_id, request)
        # the semantic mode's embeddings first, before this request's first statement
        # (its session then holds a pooled connection to its end): none held meanwhile
        embedded = await embed_ahead(runtime, principal, sid, data)
        if embedded is not None:
            history.embed_through(embedded)
        return await run_chat_history_tool(history, access, principal, data, sid)
