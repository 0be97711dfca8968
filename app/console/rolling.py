"""The rolling summary on the console's session page: shown to whoever may read the
session, its form to whoever may change it (`POST …/rolling-summary`, the same edit as
`PUT /sessions/{id}/rolling-summary`: app/domain/rolling/editing.py)."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
from litestar import Controller, Request, post
from litestar.response import Redirect
from sqlalchemy.ext.asyncio import AsyncSession

from app.console.web import form_text
from app.domain.kernel.access import Viewer
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.rolling.editing import edit_rolling_summary
from app.domain.rolling.schemas import RollingSummaryEdit
from app.domain.rolling.summary import MAX_CURRENT_CHARS, MAX_DECISIONS, MAX_ITEM_CHARS, MAX_PAST
from app.domain.sessions.services import SessionService
from app.lib.errors import Unprocessable

#: The form's list fields: one entry a line.
LIST_CHARS = {
    "key_decisions": MAX_DECISIONS * (MAX_ITEM_CHARS + 1),
    "past_discussions": MAX_PAST * (MAX_ITEM_CHARS + 1),
}


def edit_from_form(form: Any) -> RollingSummaryEdit:
    """The form's fields as an edit (one entry a line; 422 naming what is wrong)."""
    doc: dict[str, Any] = {
        name: [ln.strip() for ln in form_text(form, name, limit=chars, required=False).splitlines()]
        for name, chars in LIST_CHARS.items()
    }
    doc = {k: [x for x in v if x] for k, v in doc.items()}
    doc["current_discussion"] = form_text(
        form, "current_discussion", limit=MAX_CURRENT_CHARS, required=False
    )
    cursor = form_text(form, "cursor_seq", limit=20, required=False)
    try:
        return msgspec.convert(
            {"summary": doc, "cursor_seq": int(cursor) if cursor else None}, RollingSummaryEdit
        )
    except (msgspec.ValidationError, ValueError) as exc:
        raise Unprocessable(str(exc)) from None


class RollingSummaryForm(Controller):
    path = "/sessions"

    @post("/{session_id:uuid}/rolling-summary")
    async def edit(
        self,
        request: Request[Any, Any, Any],
        session_id: uuid.UUID,
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Redirect:
        edit = edit_from_form(await request.form())
        session = await SessionService.of(db, runtime).get(session_id, Viewer.editor(principal))
        await edit_rolling_summary(db, runtime.profiles, session, edit)
        return Redirect(
            f"/console/sessions/{session_id}?done=Rolling+summary+saved#rolling", status_code=303
        )
