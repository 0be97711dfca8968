"""Facts as hits of the unified memory search (`app.domain.raw_history.search`).

`search_fact_hits` has the `FactSearch` shape the unified search plugs stores in by:
`(db, llm, user_id, query, limit) -> list[MemoryHit]`.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.facts.services import FactService
from app.domain.kernel.hits import MemoryHit
from app.llm.gateway import LLMGateway


async def search_fact_hits(
    db: AsyncSession, llm: LLMGateway | None, user_id: str, query: str, limit: int
) -> list[MemoryHit]:
    if not query or not query.strip():
        return []
    # the model writes these queries (memory_search): words are matched as
    # written — the typo-tolerant match (~3 ms of the database's CPU per search over a
    # user's 100 facts, whenever no fact is close in meaning) is for people typing in
    # GET /memory/facts/search
    found = await FactService(db, llm).search_facts(query, user_id, limit, typo_tolerant=False)
    return [
        MemoryHit(
            source_type="fact",
            text=f"{h.key}: {h.value}",
            session_id=str(h.source_session_id) if h.source_session_id else None,
            timestamp=h.updated_at,
            key=h.key,
            category=h.category,
            score=h.score if h.match == "vector" else None,
            terms_hit=int(h.score) if h.match == "text" else 0,
        )
        for h in found.hits
    ]
