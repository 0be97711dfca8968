"""SQL of fact search: vector, text, and the benchmark's naive baseline.

Both searches take the user in their signature; the cross-user search takes
`all_users=True` explicitly (the permission is checked above), and finds live rows only
(`repositories.py` defines the column set and the live/scope filters). `naive_scan` is
the benchmark's baseline over every user, never called for a request.

Vector search has two shapes. For one user it is an *exact* scan of that user's rows
(the `(user_id, category, key)` btree finds them, the ordering expression is kept off the
HNSW index on purpose): an approximate index walk over every user's vectors followed by
a user filter would miss the user's rows. For all users it is an HNSW walk, with
pgvector's iterative scan (≥ 0.8) so the live-row filter does not starve it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    Float,
    Integer,
    String,
    Text,
    bindparam,
    case,
    cast,
    func,
    literal,
    or_,
    select,
    text,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from app.db.models import MemoryFact
from app.domain.facts.repositories import (
    FACT_COLUMNS,
    HAYSTACKS,
    FactRow,
    like_pattern,
    live,
    require_scope,
)
from app.lib.sql import Compiled, DriverRows, compile_for_driver, vector_literal

_TRGM_CACHE: dict[str, tuple[float, bool]] = {}
_TRGM_CACHE_SECONDS = 60.0
HNSW_EF_SEARCH = 100


def _version_at_least(version: str | None, wanted: tuple[int, ...]) -> bool:
    if not version:
        return False
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[: len(wanted)])
    return parts >= wanted


@lru_cache(maxsize=64)
def _text_search_statement(n_words: int, *, trigram: bool, scoped: bool) -> Compiled:
    """The word search for `n_words` words, built once per shape: the words and their
    LIKE patterns are the parameters `w0…`, `p0…` (plus `user_id` when `scoped`,
    `query`, `limit`). Building the expression (five conditions a word, twice) cost
    more Python per search than the database spends running it."""
    matched: list[ColumnElement[bool]] = []
    # a similar word in the key or the value: one `%>` over both joined (one call per
    # word and fact instead of two; why: docs/performance.md, "fact word search"); `%>`
    # scores the best-matching stretch of words, for a word in one of them
    keyed_value = MemoryFact.key + literal(" ") + MemoryFact.value
    for i in range(n_words):
        pattern = bindparam(f"p{i}", type_=String)
        conds = [h.ilike(pattern, escape="\\") for h in HAYSTACKS]
        if trigram:
            conds.append(keyed_value.self_group().op("%>")(bindparam(f"w{i}", type_=String)))
        matched.append(or_(*conds))
    score: ColumnElement[Any] = case((matched[0], 1.0), else_=0.0)
    for m in matched[1:]:
        score = score + case((m, 1.0), else_=0.0)
    if trigram:
        query = bindparam("query", type_=String)
        score = score + func.greatest(
            func.word_similarity(query, MemoryFact.key),
            func.word_similarity(query, MemoryFact.value),
        ) * literal(0.5)
    scope = MemoryFact.user_id == bindparam("user_id", type_=String) if scoped else literal(True)
    return compile_for_driver(
        select(*FACT_COLUMNS, score.label("score"))
        .where(scope, live(), or_(*matched))
        .order_by(
            score.desc(),
            MemoryFact.confidence.desc(),
            MemoryFact.updated_at.desc(),
            MemoryFact.id,
        )
        .limit(bindparam("limit", type_=Integer))
    )


@lru_cache(maxsize=1)
def _user_vector_statement() -> Compiled:
    """One user's exact vector search, built once (parameters `user_id`, `vec`,
    `max_distance`, `limit`). The MATERIALIZED CTE is an optimisation fence, so the
    ordering is never planned as a walk of the all-users HNSW index (which the user
    filter would then starve); the distance is computed once per row of the user."""
    # the vector as its text, cast in SQL (`vector_literal`: written once per search)
    dist = MemoryFact.embedding.cosine_distance(cast(bindparam("vec", type_=Text), Vector()))
    scored = (
        select(*FACT_COLUMNS, dist.label("distance"))
        .where(
            MemoryFact.user_id == bindparam("user_id", type_=String),
            live(),
            MemoryFact.embedding.is_not(None),
        )
        .cte("scored")
        .prefix_with("MATERIALIZED")
    )
    return compile_for_driver(
        select(scored)
        .where(scored.c.distance < bindparam("max_distance", type_=Float))
        .order_by(scored.c.distance, scored.c.id)
        .limit(bindparam("limit", type_=Integer))
    )


class FactSearchRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def vector_search(
        self,
        user_id: str | None,
        vector: Sequence[float],
        *,
        limit: int,
        max_distance: float,
        all_users: bool = False,
    ) -> list[FactRow]:
        """Live facts closer than `max_distance` (cosine) to `vector`, nearest first;
        each row carries its `distance`."""
        vec = list(vector)
        if all_users and user_id is None:
            # Every user: the HNSW walk (ORDER BY distance LIMIT k), the cutoff after it.
            await self._tune_hnsw_scan()
            dist = MemoryFact.embedding.cosine_distance(vec)
            stmt = (
                select(*FACT_COLUMNS, dist.label("distance"))
                .where(live(), MemoryFact.embedding.is_not(None))
                .order_by(dist)
                .limit(limit)
            )
            rows = [
                r for r in (await self.session.execute(stmt)).all() if r.distance < max_distance
            ]
            rows.sort(key=lambda r: (r.distance, r.id))  # relaxed_order may be slightly off
            return rows
        # One user: exact (`_user_vector_statement`).
        require_scope(user_id, all_users)  # refuses an unscoped search not asked for
        params = {
            "user_id": user_id,
            "vec": vector_literal(vec),
            "max_distance": max_distance,
            "limit": limit,
        }
        user_stmt = _user_vector_statement()
        return await DriverRows(self.session)(user_stmt.sql, user_stmt.params(params))

    async def _tune_hnsw_scan(self) -> None:
        """For this transaction: a wider HNSW search (ef_search 100, not 40: better
        recall, docs/performance.md "fact HNSW scan"), and pgvector's iterative scan
        (≥ 0.8) so filtered-out rows do not starve it."""
        version = (
            await self.session.execute(
                text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            )
        ).scalar_one_or_none()
        await self.session.execute(text(f"SET LOCAL hnsw.ef_search = {HNSW_EF_SEARCH}"))
        if _version_at_least(version, (0, 8)):
            await self.session.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))

    async def has_pg_trgm(self) -> bool:
        """Is pg_trgm installed? Cached per database for a minute: it changes only when a
        DBA installs it (and its indexes appear at the next start-up anyway)."""
        url = str(getattr(self.session.bind, "url", ""))
        cached = _TRGM_CACHE.get(url)
        if url and cached and time.monotonic() - cached[0] < _TRGM_CACHE_SECONDS:
            return cached[1]
        found = await self.session.execute(
            text("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        )
        present = found.scalar_one_or_none() is not None
        if url:
            _TRGM_CACHE[url] = (time.monotonic(), present)
        return present

    async def text_search(
        self,
        user_id: str | None,
        words: Sequence[str],
        *,
        limit: int,
        all_users: bool = False,
        trigram: bool = False,
    ) -> list[FactRow]:
        """Facts matching any of `words` in category, key or value, best first; each row
        carries its `score`.

        Score = number of words matched (ILIKE substring; with pg_trgm also a similar
        word in the key or value, `%>`, so a typo still matches), plus the best trigram
        word similarity as a tie-breaker. The ILIKE conditions are served by the trigram
        GIN indexes when present (the all-users search); a user's search reads that
        user's rows by the `(user_id, …)` index and tests them one by one.
        """
        if not words:
            return []
        require_scope(user_id, all_users)  # refuses an unscoped search not asked for
        scoped = user_id is not None
        stmt = _text_search_statement(len(words), trigram=trigram, scoped=scoped)
        params: dict[str, Any] = {"limit": limit, "query": " ".join(words)}
        if scoped:
            params["user_id"] = user_id
        for i, word in enumerate(words):
            params[f"w{i}"] = word
            params[f"p{i}"] = like_pattern(word)
        return await DriverRows(self.session)(stmt.sql, stmt.params(params))

    async def naive_scan(
        self, words: Sequence[str], limit: int, *, indexes: bool = False
    ) -> list[tuple[int, str]]:
        """The baseline the benchmark compares against: ILIKE over every fact of every
        user, newest matches first. `indexes=False` is the naive way (a full scan, the
        planner kept off the trigram indexes); `indexes=True` lets it use them."""
        if not indexes:
            await self.session.execute(text("SET LOCAL enable_bitmapscan = off"))
            await self.session.execute(text("SET LOCAL enable_indexscan = off"))
        conds = [h.ilike(like_pattern(w), escape="\\") for w in words for h in HAYSTACKS]
        stmt = (
            select(MemoryFact.id, MemoryFact.value)
            .where(or_(*conds))
            .order_by(MemoryFact.updated_at.desc())
            .limit(limit)
        )
        return [(r[0], r[1]) for r in await self.session.execute(stmt)]
