"""Memory the context carries that is not stored in it, built fresh for every pre-turn
prepare: the user summary (`## What I remember about the user`) and the facts most
relevant to the incoming message ahead of the stored context; recalled raw excerpts right
before the incoming message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Session
from app.domain.compression import Msg, added_tokens, calibration_for
from app.domain.facts.memory_hits import search_fact_hits
from app.domain.facts.prompt_notes import memory_notes
from app.domain.facts.services import FactService
from app.domain.kernel.messages import MessageOut
from app.domain.search.recall import (
    INJECTED_KEY,
    recall_for_turn,
    remembered_ids,
    turn_recall_query,
)
from app.llm.errors import LLMError
from app.llm.gateway import LLMGateway
from app.llm.query_embeddings import QueryEmbeddings

#: session_metadata: chars of the memory notes the last pre-turn prepare injected.
INJECTED_CHARS_KEY = "injected_chars"


@dataclass
class Injection:
    before: list[MessageOut] = field(default_factory=list)  # ahead of the stored context
    after: list[MessageOut] = field(default_factory=list)  # right before the incoming message
    tokens: int = 0
    metadata_patch: dict[str, Any] = field(default_factory=dict)

    def fit(
        self,
        view: list[MessageOut],
        tokens: int,
        *,
        room: int,
        metadata: Mapping[str, Any] | None,
    ) -> tuple[list[MessageOut], int]:
        """The view and its tokens with the notes around it when they fit in ``room``;
        ``metadata_patch`` then holds what the session must record."""
        # Injected memory is a bonus: it rides only when it fits under the size limit.
        injected = 0
        if self.tokens and self.tokens <= room:
            view = [*self.before, *view, *self.after]
            tokens += self.tokens
            injected = sum(len(m.content) for m in [*self.before, *self.after])
        else:
            self.metadata_patch.clear()
        # The runtime's next `usage` covers these notes too: after_append counts them.
        if injected or (metadata or {}).get(INJECTED_CHARS_KEY):
            self.metadata_patch[INJECTED_CHARS_KEY] = injected
        return view, tokens


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


async def query_embeddings(
    llm: LLMGateway | None, settings: Settings, context: Sequence[Msg], incoming: Msg | None
) -> QueryEmbeddings | None:
    """The gateway with the turn's query embeddings already made — the facts' query (the
    incoming message) and the recall's — so that `build_injection`, run after, makes no
    model call while it holds a connection. Called with no connection held. A failure
    is remembered: the stores then degrade to word search as before."""
    if llm is None:
        return None
    cached = QueryEmbeddings(llm)
    query = incoming.content if incoming else ""
    recall = turn_recall_query(settings, context, query)
    texts = [t.strip() for t in (query, recall or "") if t.strip()]
    if texts:
        try:
            await cached.embed(texts)
        except LLMError:
            pass
    return cached


async def build_injection(
    db: AsyncSession,
    llm: LLMGateway | None,
    settings: Settings,
    facts: FactService,
    *,
    session: Session,
    context: Sequence[Msg],
    incoming: Msg | None,
    model: str,
    window: int,
) -> Injection:
    """The turn's memory notes. `llm` (and the one of `facts`) should hold the query
    embeddings already (`query_embeddings`): this reads the database between them."""
    out = Injection()
    user_id = session.user_id or "anonymous"
    query = incoming.content if incoming else ""
    summary, listed = await memory_notes(facts, user_id, query)
    if summary:
        out.before.append(system_note(summary, "memory_summary"))
    if listed:
        out.before.append(system_note(f"## Facts about the user\n{listed}", "memory_facts"))
    recall = await recall_for_turn(
        db,
        llm,
        settings,
        user_id=user_id,
        session_id=session.id,
        metadata=session.session_metadata,
        context=context,
        incoming=query,
        facts=search_fact_hits,
    )
    if recall is not None:
        out.after.append(system_note(recall.text, "memory_recall", chunk_ids=recall.chunk_ids))
        out.metadata_patch[INJECTED_KEY] = remembered_ids(
            session.session_metadata, recall.chunk_ids
        )
    notes = [*out.before, *out.after]
    if notes:
        # what the notes add to the prompt priced without them (its overhead is there)
        calib = calibration_for(model, session.user_id)
        out.tokens = added_tokens(
            [Msg(role="system", content=n.content) for n in notes], calib, window=window
        )
    return out
