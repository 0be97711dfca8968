from __future__ import annotations

import uuid

from litestar import Controller, Request, post

from app.domain.history.deps import DEPENDENCIES
from app.domain.history.schemas import ChatHistoryIn, ChatHistoryOut
from app.domain.history.services import HistorySearch
from app.domain.history.tool import run_chat_history_tool
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.lib.errors import Unprocessable

SESSION_HEADER = "x-navi-session-id"


def session_from(field: str | None, request: Request) -> uuid.UUID:
    """The session of a tool call: the `session_id` field, else the X-Navi-Session-Id header."""
    raw = field or request.headers.get(SESSION_HEADER)
    if not raw:
        raise Unprocessable("session_id: required (the field or the X-Navi-Session-Id header)")
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise Unprocessable("session_id: not a session id") from None


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
        sid = session_from(data.session_id, request)
        return await run_chat_history_tool(history, access, principal, data, sid)
