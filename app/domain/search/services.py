"""Unified memory search: facts → raw → sketches, one read path with provenance.

The stores are queried here (the raw index through `search_service.search_raw`); the
merge, freshness labels and rendering are the pure functions of `unified.py` and
`render.py`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import in_own_session
from app.domain.kernel.hits import MemoryHit
from app.domain.kernel.terms import clamp_k, normalize_scope, query_terms
from app.domain.raw_history.repositories import ChunkRepository
from app.domain.raw_history.search import search_raw
from app.domain.search.merge import mark_freshness, merge_tiered
from app.domain.search.render import format_hits
from app.domain.sketches.repositories import SCRATCHPAD, SketchRepository
from app.lib.aio import both
from app.lib.inputs import scrub_text
from app.llm.gateway import LLMError, LLMGateway

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


class QueryEmbeddings:
    """The gateway with the embeddings of one search remembered: the facts store and the
    raw index embed the same query, the model runs once (a failure is remembered too,
    so a down embedder costs one timeout, not one per store). The stores may ask at the
    same time (they run concurrently): the second waits for the first's answer."""

    def __init__(self, llm: LLMGateway) -> None:
        self._llm = llm
        self._done: dict[str, list[float] | LLMError] = {}
        self._lock = asyncio.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        async with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._done]
            if missing:
                try:
                    self._done.update(zip(missing, await self._llm.embed(missing), strict=True))
                except LLMError as exc:
                    self._done.update(dict.fromkeys(missing, exc))
        out = []
        for t in texts:
            got = self._done[t]
            if isinstance(got, LLMError):
                raise got
            out.append(got)
        return out

    async def embed_one(self, text: str) -> list[float]:
        return (await self.embed([text]))[0]


class UnifiedSearch:
    """The stores searched for one query. With a `side_sessions` factory (the service's),
    the facts and the sketches are read on a second connection while the raw index is
    searched on the request's, so their database time overlaps the raw side's Python
    (the search only reads: nothing is written on either connection)."""

    def __init__(
        self,
        db: AsyncSession,
        llm: LLMGateway | None,
        settings: Settings,
        *,
        facts: FactSearch | None = None,
        errors: ErrorSearch | None = None,
        side_sessions: async_sessionmaker[AsyncSession] | None = None,
        errors_db: AsyncSession | None = None,
    ) -> None:
        """`errors_db` (default `db`): the errors scope renews the entries it finds (a
        write), so it runs on the primary when `db` is a read replica's."""
        self.db = db
        self.errors_db = errors_db or db
        self.llm = llm
        self.settings = settings
        self.facts = facts
        self.errors = errors
        self.side_sessions = side_sessions

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
        query = scrub_text(query)  # free text: a NUL is searched (and echoed) as U+FFFD
        scope_ = normalize_scope(scope)
        k_ = clamp_k(k)
        llm = cast(LLMGateway, QueryEmbeddings(self.llm)) if self.llm is not None else None
        want_raw = scope_ in ("all", "raw")

        async def side(db: AsyncSession) -> tuple[list[MemoryHit], list[MemoryHit]]:
            facts: list[MemoryHit] = []
            sketches: list[MemoryHit] = []
            if scope_ in ("all", "facts") and self.facts is not None:
                facts = await self.facts(db, llm, user_id, query, k_)  # type: ignore[arg-type]
            if scope_ in ("all", "sketches"):
                sketches = await search_sketches(db, user_id, query, k_, current_session_id)
            return facts, sketches

        async def raw() -> list[MemoryHit]:
            if not want_raw:
                return []
            return await search_raw(
                self.db,
                llm,
                user_id,
                query,
                k_,
                session_id=session_id,
                side_sessions=self.side_sessions,
            )

        if self.side_sessions is not None and scope_ == "all":
            (facts, sketches), raws = await both(in_own_session(self.side_sessions, side), raw())
        else:
            facts, sketches = await side(self.db)
            raws = await raw()
        errors: list[MemoryHit] = []
        if scope_ == "errors" and self.errors is not None:  # only when asked for
            errors = await self.errors(self.errors_db, llm, user_id, query, k_)  # type: ignore[arg-type]
        summary = None
        if current_session_id is not None and raws:
            # the user's chunks of that session are the only raw hits it can mark
            summary = await ChunkRepository(self.db).latest_summary(user_id, current_session_id)
        raws = mark_freshness(
            facts,
            raws,
            summary.at if summary else None,
            str(current_session_id) if current_session_id else None,
            summary_through=summary.through_seq if summary else None,
        )
        hits = merge_tiered(facts, raws, sketches, errors)
        text = format_hits(query, scope_, hits, best_window_enabled=best_window)
        return SearchResult(query=query, scope=scope_, k=k_, hits=hits, text=text)
