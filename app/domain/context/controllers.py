"""HTTP triggers of context compression for an agent runtime that calls its own LLM.

The post-turn trigger is the ``usage`` object of ``POST /sessions/{id}/messages``
(see app/domain/sessions/controllers.py).
"""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Controller, Response, post
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compression import ContextTooLargeError
from app.domain.context.deps import DEPENDENCIES
from app.domain.context.reset import reset_session
from app.domain.context.schemas import (
    CompactOut,
    CompactRequest,
    PrepareOut,
    PrepareRequest,
    ResetOut,
)
from app.domain.context.services import ContextService
from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal


class ContextController(Controller):
    path = "/sessions"
    tags = ["context"]
    dependencies = DEPENDENCIES

    @post("/{session_id:uuid}/prepare", status_code=200)
    async def prepare(
        self,
        session_id: uuid.UUID,
        data: PrepareRequest,
        principal: Principal,
        context: ContextService,
        access: SessionAccess,
    ) -> Response[PrepareOut] | Response[dict[str, Any]]:
        viewer = Viewer.editor(principal)  # both may compress: a write
        session = await access.get(session_id, viewer)
        try:
            out = await context.prepare(
                session, viewer, data.message, mid_turn=data.mid_turn, model=data.model
            )
        except ContextTooLargeError as exc:
            # 422 that does not roll back: a compression that already ran stays committed
            return Response(exc.body(), status_code=422)
        return Response(out, status_code=200)

    @post("/{session_id:uuid}/compact", status_code=200)
    async def compact(
        self,
        session_id: uuid.UUID,
        principal: Principal,
        context: ContextService,
        access: SessionAccess,
        data: CompactRequest | None = None,
    ) -> CompactOut:
        viewer = Viewer.editor(principal)  # both may compress: a write
        session = await access.get(session_id, viewer)
        return await context.compact(session, viewer, data.model if data else None)

    @post("/{session_id:uuid}/reset", status_code=200)
    async def reset(
        self, session_id: uuid.UUID, principal: Principal, access: SessionAccess, db: AsyncSession
    ) -> ResetOut:
        """Start the conversation over: messages go, the rolling summary and memory stay."""
        session = await access.get(session_id, Viewer.editor(principal))
        return await reset_session(db, session)
