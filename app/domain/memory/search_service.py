"""Unified memory search: facts → raw → sketches, one read path with provenance.

The stores are queried here; the merge, freshness labels and rendering are the pure
functions of `unified.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.memory.chunk_repository import ChunkRepository
from app.domain.memory.sketch_repository import SCRATCHPAD, SketchRepository
from app.domain.memory.unified import (
    MemoryHit,
    clamp_k,
    format_hits,
    mark_freshness,
    merge_tiered,
    normalize_scope,
    query_terms,
)
from app.llm.gateway import LLMError, LLMGateway

log = structlog.get_logger()

RAW_MAX_DISTANCE = 0.45

# (db, llm, user_id, query, limit) -> fact hits. Provided by the facts domain.
FactSearch = Callable[[AsyncSession, LLMGateway, str, str, int], Awaitable[list[MemoryHit]]]
ErrorSearch = FactSearch


@dataclass
class SearchResult:
    query: str
    scope: str
    k: int
    hits: list[MemoryHit]
    text: str


def raw_hit(row: Row[Any], *, score: float | None = None, terms_hit: int = 0) -> MemoryHit:
    return MemoryHit(
        source_type="raw",
        text=row.content,
        session_id=str(row.session_id),
        timestamp=row.ended_at,
        start_seq=row.start_seq,
        end_seq=row.end_seq,
        chunk_id=str(row.id),
        score=score,
        terms_hit=terms_hit,
        breadcrumbs=tuple(row.breadcrumbs or ()),
    )


async def search_raw(
    db: AsyncSession,
    llm: LLMGateway | None,
    user_id: str,
    query: str,
    k: int,
    *,
    session_id: uuid.UUID | None = None,
) -> list[MemoryHit]:
    """Vector search first (cosine distance < 0.45); else full text scored by matched
    terms; an empty normalised query returns the most recent chunks."""
    repo = ChunkRepository(db)
    terms = query_terms(query)
    if not terms:
        return [raw_hit(r) for r in await repo.recent(user_id, session_id=session_id, limit=k)]
    if llm is not None:
        try:
            vec = await llm.embed_one(query)
        except LLMError as exc:
            log.info("memory.raw_vector_unavailable", error=str(exc))
        else:
            found = await repo.search_vector(
                user_id, vec, session_id=session_id, limit=k, max_distance=RAW_MAX_DISTANCE
            )
            if found:
                return [raw_hit(r, score=1.0 - d) for r, d in found]
    rows = await repo.search_text(user_id, query, terms, session_id=session_id, limit=k)
    return [raw_hit(r, terms_hit=n) for r, n in rows]


async def search_sketches(
    db: AsyncSession, user_id: str, query: str, k: int, current_session_id: uuid.UUID | None
) -> list[MemoryHit]:
    rows = await SketchRepository(db).search_values(
        user_id, SCRATCHPAD, query_terms(query), limit=k, prefer_session_id=current_session_id
    )
    return [
        MemoryHit(
            source_type="sketch",
            text=r.value,
            session_id=str(r.session_id) if r.session_id else None,
            timestamp=r.updated_at,
            key=r.key,
            terms_hit=int(r.terms_hit),
        )
        for r in rows
    ]


class UnifiedSearch:
    def __init__(
        self,
        db: AsyncSession,
        llm: LLMGateway | None,
        settings: Settings,
        *,
        facts: FactSearch | None = None,
        errors: ErrorSearch | None = None,
    ) -> None:
        self.db = db
        self.llm = llm
        self.settings = settings
        self.facts = facts
        self.errors = errors

    async def search(
        self,
        query: str,
        *,
        user_id: str,
        scope: object = "all",
        k: object = 5,
        session_id: uuid.UUID | None = None,
        current_session_id: uuid.UUID | None = None,
        best_window: bool = True,
    ) -> SearchResult:
        scope_ = normalize_scope(scope)
        k_ = clamp_k(k)
        want = lambda s: scope_ in ("all", s)  # noqa: E731
        facts: list[MemoryHit] = []
        raws: list[MemoryHit] = []
        sketches: list[MemoryHit] = []
        errors: list[MemoryHit] = []
        if want("facts") and self.facts is not None:
            facts = await self.facts(self.db, self.llm, user_id, query, k_)  # type: ignore[arg-type]
        if want("raw"):
            raws = await search_raw(self.db, self.llm, user_id, query, k_, session_id=session_id)
        if want("sketches"):
            sketches = await search_sketches(self.db, user_id, query, k_, current_session_id)
        if scope_ == "errors" and self.errors is not None:  # only when asked for
            errors = await self.errors(self.db, self.llm, user_id, query, k_)  # type: ignore[arg-type]
        summary_at = None
        if current_session_id is not None and raws:
            summary_at = await ChunkRepository(self.db).latest_summary_at(current_session_id)
        raws = mark_freshness(
            facts, raws, summary_at, str(current_session_id) if current_session_id else None
        )
        hits = merge_tiered(facts, raws, sketches, errors)
        text = format_hits(query, scope_, hits, best_window_enabled=best_window)
        return SearchResult(query=query, scope=scope_, k=k_, hits=hits, text=text)
