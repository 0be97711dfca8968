"""`/sessions/{id}/rolling-summary`: the rolling summary a user can see and correct
(the rules of an edit: app/domain/rolling/editing.py)."""

from __future__ import annotations

import uuid

from litestar import Controller, get, put
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.rolling.editing import edit_rolling_summary, read_rolling_summary
from app.domain.rolling.schemas import RollingSummaryEdit, RollingSummaryOut


class RollingSummaryController(Controller):
    path = "/sessions/{session_id:uuid}/rolling-summary"
    tags = ["context"]

    @get("/")
    async def read(
        self,
        session_id: uuid.UUID,
        principal: Principal,
        access: SessionAccess,
        db: AsyncSession,
        runtime: Runtime,
    ) -> RollingSummaryOut:
        session = await access.get(session_id, Viewer.of(principal))
        return await read_rolling_summary(db, runtime.profiles, session)

    @put("/")
    async def edit(
        self,
        session_id: uuid.UUID,
        data: RollingSummaryEdit,
        principal: Principal,
        access: SessionAccess,
        db: AsyncSession,
        runtime: Runtime,
    ) -> RollingSummaryOut:
        """Replace the summary; `cursor_seq` is the one it was read with (else 409)."""
        session = await access.get(session_id, Viewer.editor(principal))
        return await edit_rolling_summary(db, runtime.profiles, session, data)
