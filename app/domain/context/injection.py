"""Memory the context carries that is not stored in it: recalled raw excerpts (and, with
the facts store, the user summary and facts). Built fresh for every pre-turn prepare."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Session
from app.domain.compression import Msg, calibration_for, estimate_tokens
from app.domain.memory.recall import INJECTED_KEY, recall_for_turn, remembered_ids
from app.domain.memory.wiring import fact_search
from app.domain.sessions.schemas import MessageOut
from app.llm.gateway import LLMGateway


@dataclass
class Injection:
    before: list[MessageOut] = field(default_factory=list)  # ahead of the stored context
    after: list[MessageOut] = field(default_factory=list)  # right before the incoming message
    tokens: int = 0
    metadata_patch: dict[str, Any] = field(default_factory=dict)


def system_note(content: str, source: str, **meta: Any) -> MessageOut:
    """A system message that is part of the prompt but not of the stored session."""
    return MessageOut(
        sequence_number=-1,
        display_index=None,
        role="system",
        content=content,
        created_at=datetime.now(UTC),
        is_display=False,
        metadata={"source": source, **meta},
    )


async def build_injection(
    db: AsyncSession,
    llm: LLMGateway | None,
    settings: Settings,
    *,
    session: Session,
    context: Sequence[Msg],
    incoming: Msg | None,
    model: str,
    window: int,
) -> Injection:
    out = Injection()
    recall = await recall_for_turn(
        db,
        llm,
        settings,
        user_id=session.user_id or "anonymous",
        session_id=session.id,
        metadata=session.session_metadata,
        context=context,
        incoming=incoming.content if incoming else "",
        facts=fact_search(),
    )
    if recall is not None:
        out.after.append(system_note(recall.text, "memory_recall", chunk_ids=recall.chunk_ids))
        out.metadata_patch[INJECTED_KEY] = remembered_ids(
            session.session_metadata, recall.chunk_ids
        )
    notes = [*out.before, *out.after]
    if notes:
        calib = calibration_for(model)
        out.tokens = estimate_tokens(
            [Msg(role="system", content=n.content) for n in notes], calib, window=window
        )
    return out
