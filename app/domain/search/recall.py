"""Automatic recall: relevant raw excerpts injected into the context after a summary.

Once per turn (the pre-turn prepare), and only when the context already holds a summary —
the moment dropped history matters — up to `memory_recall_k` excerpts for a query built
from the last four user/assistant messages plus the incoming one. Excerpts below the
similarity floor (0.55 vector, or 2 matched terms on the text path) and excerpts a newer
fact supersedes are dropped; delivered chunk ids are remembered in
`session_metadata["injected_chunk_ids"]` so an excerpt does not ride in every prompt.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.kernel.hits import MemoryHit
from app.domain.kernel.terms import query_terms
from app.domain.raw_history.repositories import ChunkRepository
from app.domain.raw_history.search import search_raw
from app.domain.search.merge import mark_freshness, recall_filter, recall_query
from app.domain.search.render import hit_excerpt
from app.domain.search.services import FactSearch
from app.llm.gateway import LLMGateway

log = structlog.get_logger()

INJECTED_KEY = "injected_chunk_ids"
MAX_REMEMBERED = 500  # ids kept in session metadata (oldest forgotten first)
EXCERPT_CHARS = 1200
HEADING = "## Recalled from earlier in this conversation"


class RecentMessage(Protocol):
    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def is_summary(self) -> bool: ...
    @property
    def sequence_number(self) -> int: ...


def live_from(context: Sequence[RecentMessage]) -> int | None:
    """The first turn of the conversation the live context still holds (None when it
    holds none): recall leaves out the chunks that reach it — the model reads them in
    full already (the idle-session index chunks turns that are still in context)."""
    seqs = [
        m.sequence_number
        for m in context
        if m.role in ("user", "assistant", "tool") and not m.is_summary and m.sequence_number >= 0
    ]
    return min(seqs) if seqs else None


@dataclass(frozen=True)
class Recall:
    text: str  # the system message content
    chunk_ids: list[str]  # newly delivered


def render_recall(hits: Sequence[MemoryHit], query: str) -> str:
    terms = query_terms(query)
    parts = [
        HEADING,
        "Verbatim excerpts of older turns that were compressed out of this context; "
        "the summary is the curated version.",
    ]
    for hit in hits:
        when = (
            hit.timestamp.strftime("%Y-%m-%d %H:%M") if isinstance(hit.timestamp, datetime) else "?"
        )
        parts.append(f"\n[turns {hit.start_seq}–{hit.end_seq} · {when}]")
        parts.append(hit_excerpt(hit, terms, EXCERPT_CHARS))
    return "\n".join(parts)


def turn_recall_query(
    settings: Settings, context: Sequence[RecentMessage], incoming: str
) -> str | None:
    """What `recall_for_turn` searches for (and embeds); None when it will not search
    (disabled, no summary in the context, no term to search)."""
    if not settings.memory_recall_enabled or settings.memory_recall_k <= 0:
        return None
    if not any(m.is_summary for m in context):
        return None
    recent = [
        (m.role, m.content) for m in context if m.role in ("user", "assistant") and not m.is_summary
    ]
    query = recall_query(recent, incoming)
    return query if query_terms(query) else None


async def recall_for_turn(
    db: AsyncSession,
    llm: LLMGateway | None,
    settings: Settings,
    *,
    user_id: str,
    session_id: uuid.UUID,
    metadata: Mapping[str, Any] | None,
    context: Sequence[RecentMessage],
    incoming: str,
    facts: FactSearch | None = None,
) -> Recall | None:
    """The recall message for this turn, or None (disabled, no summary, nothing good)."""
    k = settings.memory_recall_k
    query = turn_recall_query(settings, context, incoming)
    if query is None:
        return None
    try:
        hits = await search_raw(
            db, llm, user_id, query, k * 4, session_id=session_id, before_seq=live_from(context)
        )
        fact_hits = await facts(db, llm, user_id, query, k * 2) if facts else []  # type: ignore[arg-type]
        summary = await ChunkRepository(db).latest_summary(user_id, session_id)
    except Exception as exc:  # recall is a bonus: never fail the turn
        log.warning("memory.recall_failed", session_id=str(session_id), error=str(exc))
        return None
    hits = mark_freshness(
        fact_hits,
        hits,
        summary.at if summary else None,
        str(session_id),
        summary_through=summary.through_seq if summary else None,
    )
    already = set((metadata or {}).get(INJECTED_KEY) or [])
    chosen = recall_filter(
        hits,
        min_similarity=settings.memory_recall_min_similarity,
        min_terms=2,
        already_injected=already,
    )[:k]
    if not chosen:
        return None
    ids = [h.chunk_id for h in chosen if h.chunk_id]
    log.info("memory.recalled", session_id=str(session_id), chunks=len(ids))
    return Recall(text=render_recall(chosen, query), chunk_ids=ids)


def remembered_ids(metadata: Mapping[str, Any] | None, new: Sequence[str]) -> list[str]:
    """The injected-id list after delivering `new` (bounded, oldest dropped first)."""
    ids = [*((metadata or {}).get(INJECTED_KEY) or []), *new]
    return ids[-MAX_REMEMBERED:]
