"""A session's rolling summary, read and corrected by its user (`/sessions/{id}/rolling-summary`).

The summary is what the rolling job folds each new chunk of messages into: an edit
replaces the document, and the next chunk is summarised on top of it. The cursor
(`cursor_seq`, the last message the summary covers) is the edit's version:

- an edit names the cursor of the summary it was based on (what `GET` answered). When
  the job has moved the cursor since — it folded newer messages into the summary the
  user did not see — the edit is refused (409) rather than throwing that work away;
  the client reads again and re-applies its correction;
- an edit keeps the cursor: it corrects the summary of the messages up to it, and the
  messages after it are still summarised (on top of the edit);
- the first summary of a session that has none stands for its history up to now: the
  cursor is set to its newest message (before any: -1, every message still to come);
- while the job is summarising a chunk it holds the row (a model call): the edit does
  not wait for it and is refused (409, try again in a moment).

The document is checked (sizes: 400) and stored in the job's own shape: decisions carry
the `Do: ` / `Don't: ` marker (an unmarked rule becomes `Do: …`), blanks and duplicates
dropped.
"""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Session
from app.domain.kernel.profiles import Profiles
from app.domain.rolling.repositories import Cursor, RollingRepository, RowBusy
from app.domain.rolling.schemas import RollingSummaryDoc, RollingSummaryEdit, RollingSummaryOut
from app.domain.rolling.summary import normalize_summary
from app.lib.errors import Conflict

NO_MESSAGE = -1  # a cursor before every message


def summary_doc(raw: dict[str, Any] | None) -> RollingSummaryDoc | None:
    """The stored document in the API's shape (normalised: an older or imported row may
    not be)."""
    if raw is None:
        return None
    return msgspec.convert(normalize_summary(raw), RollingSummaryDoc)


async def read_rolling_summary(
    db: AsyncSession, profiles: Profiles, session: Session
) -> RollingSummaryOut:
    state = await RollingRepository(db).get(session.user_id, session.id)
    return RollingSummaryOut(
        session_id=session.id,
        context_mode=profiles.get(session.profile_id).context_mode,
        summary=summary_doc(state.summary if state else None),
        cursor_seq=state.cursor_seq if state else None,
        cursor_at=state.cursor_at if state else None,
    )


async def edit_rolling_summary(
    db: AsyncSession, profiles: Profiles, session: Session, edit: RollingSummaryEdit
) -> RollingSummaryOut:
    """Replace the summary (the caller checked the editor permission)."""
    repo = RollingRepository(db)
    user_id, session_id = session.user_id, session.id
    await repo.ensure_row(user_id, session_id)
    try:
        state = await repo.lock_for_edit(user_id, session_id)
    except RowBusy:
        raise Conflict(
            "the rolling summary is being updated right now; read it again in a moment"
        ) from None
    if state is None:  # deleted meanwhile: the session went with it
        raise Conflict("the session's rolling summary is gone")
    if state.cursor_seq != edit.cursor_seq:
        raise Conflict(
            f"cursor_seq: the summary moved on since it was read (now {state.cursor_seq}, "
            f"the edit is based on {edit.cursor_seq}); read it again and re-apply the edit"
        )
    cursor = None
    if state.summary is None and state.cursor_seq is None and state.cursor_at is None:
        cursor = await repo.latest_message(user_id, session_id) or Cursor(NO_MESSAGE, None)
    document = normalize_summary(msgspec.to_builtins(edit.summary))
    await repo.save_edit(user_id, session_id, document, cursor)
    return await read_rolling_summary(db, profiles, session)
