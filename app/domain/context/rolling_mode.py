"""`POST /sessions/{id}/prepare` for a profile in `rolling` context mode.

The context is the session's last `max_history_messages` context messages plus, when
an entry of the rolling summary is relevant to this request (`rolling/relevance.py`), a
user-role `Prior summary` JSON block of those entries placed last — the turn context,
right before the incoming input. The caller adds the memory notes (services.py), then
moves the block after the recalled excerpts (:func:`summary_block_last`). No LLM call happens here (the
summary is kept by the periodic job), so a rolling turn costs its own prompt only.

Rows older than the window are flagged out of the LLM context (`is_context = false`):
they are no longer what the model sees, the rolling summary covers them (it reads hot
and archived rows alike), and the size-based compaction may then archive them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Session
from app.domain.compression import (
    Msg,
    calibration_for,
    truncate_for_view,
    view_budget_tokens,
)
from app.domain.context.loading import estimator_for, load_context
from app.domain.kernel.messages import MessageOut
from app.domain.kernel.profiles import Profile
from app.domain.rolling.relevance import relevant_summary, request_texts
from app.domain.rolling.repositories import RollingRepository
from app.domain.rolling.summary import recent_window, summary_block
from app.domain.sessions.message_repository import MessageRepository
from app.domain.sessions.services import message_out

SUMMARY_SOURCE = "rolling_summary"


def summary_message(block: str, at: datetime) -> MessageOut:
    """The synthetic turn-context message (not stored: sequence_number −1)."""
    return MessageOut(
        sequence_number=-1,
        display_index=None,
        role="user",
        content=block,
        created_at=at,
        is_display=False,
        is_summary=True,
        metadata={"source": SUMMARY_SOURCE},
    )


def summary_block_last(view: list[MessageOut]) -> list[MessageOut]:
    """The view with the `Prior summary` block moved last (after the recalled excerpts
    the memory notes add at the end): seed 001 puts it right before the user's input."""
    return [m for m in view if not _is_block(m)] + [m for m in view if _is_block(m)]


def _is_block(m: MessageOut) -> bool:
    return m.is_summary and m.metadata.get("source") == SUMMARY_SOURCE


async def prepare_rolling(
    db: AsyncSession,
    settings: Settings,
    session: Session,
    profile: Profile,
    model: str,
    incoming: Msg | None,
) -> RollingContext:
    """The rolling context and its price (the incoming message included); the caller
    adds the memory notes, as in compress mode, then checks the size."""
    loaded = await load_context(db, session.user_id, session.id)
    pairs = list(zip(loaded.rows, loaded.msgs, strict=True))
    window_pairs = recent_window(
        [_Pair(row, msg) for row, msg in pairs], profile.max_history_messages
    )
    kept = {p.row.sequence_number for p in window_pairs}
    older = [row.sequence_number for row, _ in pairs if row.sequence_number not in kept]
    if older:
        first_kept = min(kept) if kept else None
        await MessageRepository(db).set_context_flag(
            session.user_id,
            session.id,
            [s for s in older if first_kept is None or s < first_kept],
            False,
        )
    state = await RollingRepository(db).get(session.user_id, session.id)
    # only the entries relevant to this request ride (seed 001); none → no block
    about = request_texts(incoming.content if incoming else None, [p.msg for p in window_pairs])
    block = summary_block(relevant_summary(state.summary if state else None, about))

    window = profile.context_window
    calib = calibration_for(model, session.user_id)
    budget = view_budget_tokens(window, settings.context_message_token_budget)
    context: list[MessageOut] = []
    msgs: list[Msg] = []
    for p in window_pairs:
        item = message_out(p.row)
        view = truncate_for_view(p.msg, budget, calib)
        if view is not p.msg:
            item = msgspec.structs.replace(item, content=view.content, metadata=view.metadata)
        context.append(item)
        msgs.append(p.msg)
    if block is not None:
        context.append(summary_message(block, datetime.now(UTC)))
        msgs.append(Msg(role="user", content=block, is_display=False, is_summary=True))
    estimate = estimator_for(
        model, window, settings, profile.system_prompt, user_id=session.user_id
    )
    tokens = estimate(msgs + ([incoming] if incoming is not None else []))
    # History left the window (the first message kept is not the session's first):
    # recall may bring back excerpts of it, as after a compression in compress mode.
    dropped = bool(window_pairs) and window_pairs[0].row.sequence_number > 0
    return RollingContext(context=context, msgs=msgs, tokens=tokens, history_dropped=dropped)


@dataclass
class RollingContext:
    context: list[MessageOut]  # as the model gets it (window views + summary block)
    msgs: list[Msg]  # the window's stored messages (+ the block), for recall's overlap
    tokens: int
    history_dropped: bool = False

    def recall_context(self) -> list[Msg]:
        """What automatic recall reads: it runs only after history left the context,
        which it recognises by a summary in it — here the block, or a marker when
        history was dropped but no summary entry was relevant."""
        if self.history_dropped and not any(m.is_summary for m in self.msgs):
            return [*self.msgs, Msg(role="user", is_summary=True, is_display=False)]
        return self.msgs


class _Pair:
    """A stored row and its Msg, with the `.role` recent_window looks at."""

    __slots__ = ("msg", "row")

    def __init__(self, row, msg: Msg) -> None:  # type: ignore[no-untyped-def]
        self.row = row
        self.msg = msg

    @property
    def role(self) -> str:
        return self.row.role
