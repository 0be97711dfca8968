"""Reads of fact versions and the restore (docs/memory.md, "Versions"): a fact's
history, the facts true at a time (`as_of`), a word search among them (the `as_of` of
`memory_search`), and restoring an old value as a new version."""

from __future__ import annotations

import uuid
from datetime import datetime

from app.domain.facts.services import FactService, UpsertResult, exact_filter, query_words
from app.domain.facts.version_repository import VersionRow
from app.domain.kernel.hits import MemoryHit
from app.lib.errors import NotFound, Unprocessable


def parse_cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    if not cursor.isdigit() or len(cursor) > 18:
        raise Unprocessable("cursor: expected the next_cursor of the previous page")
    return int(cursor)


async def fact_history(
    service: FactService,
    user_id: str,
    fact_id: int,
    *,
    limit: int,
    cursor: str | None = None,
) -> tuple[list[VersionRow], int, bool]:
    """A page of the fact's versions, newest first, its total, and whether there is more.
    404 when the user has no version of that fact (another user's, or none)."""
    before = parse_cursor(cursor)
    rows = await service.versions.history(user_id, fact_id, limit=limit + 1, before_id=before)
    total = await service.versions.count(user_id, fact_id)
    if total == 0:
        raise NotFound(f"fact {fact_id} not found")
    return rows[:limit], total, len(rows) > limit


async def restore_version(
    service: FactService,
    user_id: str,
    fact_id: int,
    version_id: int,
    *,
    session_id: uuid.UUID | None = None,
) -> UpsertResult:
    """Make the value of one of the fact's versions current again: saved as a new
    version (the history is never rewritten). The version must be one of the fact's
    (422; 404 when the user has neither). A deleted fact is saved again from it under
    its category and key: a new fact (a new id, its history starting with this value;
    the old id keeps the old history), as a save after a delete is."""
    fact = await service.facts.get(fact_id, user_id, all_users=False)
    old = await service.versions.get(user_id, version_id)
    if old is None or old.fact_id != fact_id:
        if fact is None and not await service.versions.history(user_id, fact_id, limit=1):
            raise NotFound(f"fact {fact_id} not found")
        raise Unprocessable(f"version_id: {version_id} is not a version of fact {fact_id}")
    days = None
    if fact is not None and fact.expires_at is not None:
        left = (fact.expires_at - await service.versions.now()).total_seconds()
        days = max(1, round(left / 86_400))
    named = fact if fact is not None else old  # a deleted fact: its version's category, key
    return await service.upsert_fact(
        user_id,
        named.category,
        named.key,
        old.value,
        source=old.source,
        confidence=old.confidence,
        expires_days=days,
        source_session_id=session_id,
    )


async def facts_as_of(
    service: FactService,
    user_id: str,
    at: datetime,
    *,
    limit: int | None,
    offset: int = 0,
    search: str | None = None,
    category: str | None = None,
    key: str | None = None,
) -> tuple[list[VersionRow], int]:
    """The values true at `at` (deleted facts too, while they were valid), newest value
    first, and how many there are."""
    exact = exact_filter(category, key)
    rows = await service.versions.as_of(
        user_id, at, limit=limit, offset=offset, search=search, exact=exact
    )
    total = await service.versions.count_as_of(user_id, at, search=search, exact=exact)
    return rows, total


async def search_fact_hits_as_of(
    service: FactService, user_id: str, query: str, limit: int, at: datetime
) -> list[MemoryHit]:
    """`memory_search`'s facts leg with `as_of`: the values true then that hold the
    query's words (versions have no vectors: words only), most words first."""
    words = query_words(query)
    if not words:
        return []
    rows = await service.versions.search_as_of(user_id, at, words, limit)
    return [
        MemoryHit(
            source_type="fact",
            text=f"{r.key}: {r.value}",
            session_id=str(r.session_id) if r.session_id else None,
            timestamp=r.valid_from,
            key=r.key,
            category=r.category,
            score=None,
            terms_hit=int(r.terms_hit),
        )
        for r in rows
    ]
