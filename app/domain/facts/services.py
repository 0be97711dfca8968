"""Fact rules: normalisation, limits, embedding, dedupe on write, search with fallback.

Services flush, never commit: an HTTP request commits once in `provide_db`, a background
job in `app.db.engine.transaction`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import msgspec
import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import MemorySummary
from app.domain.facts.dedupe import merge_targets
from app.domain.facts.repositories import (
    FactKeyFilter,
    FactRepository,
    FactRow,
    SummaryRepository,
)
from app.domain.facts.schemas import (
    DEFAULT_SEARCH_LIMIT,
    MAX_CATEGORY,
    MAX_EXPIRES_DAYS,
    MAX_KEY,
    MAX_SEARCH_LIMIT,
    MAX_SOURCE_CONTEXT,
    MAX_SUMMARY,
    MAX_VALUE,
    SOURCES,
    FactHit,
    FactOut,
)
from app.domain.facts.search_repository import FactSearchRepository
from app.domain.facts.version_repository import FactVersionRepository
from app.domain.facts.versions import record_write
from app.domain.kernel.runtime import Runtime
from app.domain.kernel.stopwords import STOPWORDS
from app.lib.errors import Forbidden, NotFound, Unprocessable
from app.lib.inputs import reject_nul, scrub_text
from app.llm.gateway import LLMError, LLMGateway

log = structlog.get_logger()

VECTOR_MAX_DISTANCE = 0.3  # cosine distance; above it a "hit" is noise
MAX_QUERY_WORDS = 8
DEFAULT_CONFIDENCE = 70
CONFIDENCE_BY_SOURCE = {"tool_call": 95, "auto_discovery": 95, "user_explicit": 90}

_WS = re.compile(r"\s+")
_WORD = re.compile(r"\w+", re.UNICODE)


def default_confidence(source: str | None) -> int:
    return CONFIDENCE_BY_SOURCE.get(source or "", DEFAULT_CONFIDENCE)


def normalise_name(raw: str) -> str:
    """Category and key as stored: trimmed, lower-cased, inner whitespace → `_`."""
    return _WS.sub("_", raw.strip()).lower()


def embedding_text(category: str, key: str, value: str) -> str:
    return f"{category} {key}: {value}"


def query_words(query: str) -> list[str]:
    """Distinct words of a search query, stopwords and single letters dropped (unless
    that leaves none)."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
    topical = [w for w in words if w not in STOPWORDS and len(w) > 1]
    chosen = topical or words or ([query.strip().lower()] if query.strip() else [])
    return chosen[:MAX_QUERY_WORDS]


def fact_out(row: FactRow) -> FactOut:
    return FactOut(
        id=row.id,
        user_id=row.user_id,
        category=row.category,
        key=row.key,
        value=row.value,
        source=row.source,
        confidence=row.confidence,
        expires_at=row.expires_at,
        source_context=row.source_context,
        source_session_id=row.source_session_id,
        merged_into=row.merged_into,
        has_embedding=bool(row.has_embedding),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def fact_hit(row: FactRow, match: str, score: float) -> FactHit:
    return FactHit(**msgspec.structs.asdict(fact_out(row)), match=match, score=round(score, 4))  # type: ignore[arg-type]


@dataclass
class UpsertResult:
    fact: FactRow
    merged: list[int] = field(default_factory=list)  # ids hidden behind `fact`
    version_id: int | None = None  # the version added (None: the value was confirmed)


@dataclass
class SearchResult:
    mode: str  # vector | text | none
    hits: list[FactHit]


def _require(field_name: str, raw: str | None, limit: int) -> str:
    if raw is None or not raw.strip():
        raise Unprocessable(f"{field_name}: required, must not be blank")
    if len(raw) > limit:
        raise Unprocessable(f"{field_name}: at most {limit} characters")
    return raw


def _identifier(field_name: str, raw: str | None, limit: int) -> str:
    """A category or key as stored; 422 when blank, too long or holding a NUL. The limit
    applies again once lower-cased: "İ".lower() is two characters."""
    name = normalise_name(_require(field_name, reject_nul(raw, field_name), limit))
    if len(name) > limit:
        raise Unprocessable(f"{field_name}: at most {limit} characters once lower-cased")
    return name


class FactService:
    def __init__(self, db: AsyncSession, llm: LLMGateway | None = None) -> None:
        self.db = db
        self.llm = llm
        self.facts = FactRepository(db)
        self.search = FactSearchRepository(db)
        self.summaries = SummaryRepository(db)
        self.versions = FactVersionRepository(db)

    @classmethod
    def of(cls, db: AsyncSession, runtime: Runtime) -> FactService:
        """The service on `db`, embedding through the runtime's gateway."""
        return cls(db, runtime.llm)

    # ------------------------------------------------------------------ embeddings
    async def embed(self, texts: Sequence[str]) -> list[list[float]] | None:
        """Vectors for `texts`, or None when the embedding backend fails (degrade)."""
        if self.llm is None or not texts:
            return None
        try:
            return await self.llm.embed(list(texts))
        except LLMError as exc:
            log.warning("facts.embedding_failed", error=str(exc)[:300], texts=len(texts))
            return None

    # ------------------------------------------------------------------ writes
    async def upsert_fact(
        self,
        user_id: str,
        category: str,
        key: str,
        value: str,
        source: str = "conversation",
        confidence: int | None = None,
        expires_days: int | None = None,
        source_context: str | None = None,
        source_session_id: uuid.UUID | None = None,
        dedupe: bool = False,
        *,
        embedding: Sequence[float] | None | msgspec.UnsetType = msgspec.UNSET,
        message_seq: int | None = None,
        said_at: datetime | None = None,
    ) -> UpsertResult:
        """Insert or rewrite (user, category, key). The fact is stored even when the
        embedding fails (NULL vector; `backfill` fills it later). With `dedupe`, live rows
        of the same category holding the same fact under another spelling of the key
        are hidden behind this one (`merged_into`). A new value adds a version (from
        `source_session_id`, `message_seq`; valid from `said_at`, that message's time,
        when known), the same value confirms the current one."""
        category = _identifier("category", category, MAX_CATEGORY)
        key = _identifier("key", key, MAX_KEY)
        value = scrub_text(_require("value", value, MAX_VALUE)).strip()  # NUL → U+FFFD
        if source not in SOURCES:
            raise Unprocessable(f"source: expected one of {', '.join(SOURCES)}")
        if confidence is None:
            confidence = default_confidence(source)
        if not 0 <= confidence <= 100:
            raise Unprocessable("confidence: expected 0-100")
        if expires_days is not None and not 1 <= expires_days <= MAX_EXPIRES_DAYS:
            raise Unprocessable(f"expires_days: expected 1-{MAX_EXPIRES_DAYS}")
        if source_context is not None and len(source_context) > MAX_SOURCE_CONTEXT:
            raise Unprocessable(f"source_context: at most {MAX_SOURCE_CONTEXT} characters")
        source_context = None if source_context is None else scrub_text(source_context)
        expires_at = (
            datetime.now(UTC) + timedelta(days=expires_days) if expires_days is not None else None
        )
        if isinstance(embedding, msgspec.UnsetType):
            vectors = await self.embed([embedding_text(category, key, value)])
            vector: Sequence[float] | None = vectors[0] if vectors else None
        else:
            vector = embedding
        row = await self.facts.upsert(
            user_id,
            category=category,
            key=key,
            value=value,
            source=source,
            confidence=confidence,
            expires_at=expires_at,
            source_context=source_context or None,
            source_session_id=source_session_id,
            embedding=vector,
        )
        version = await record_write(
            self.versions,
            user_id,
            row,
            session_id=source_session_id,
            message_seq=message_seq,
            said_at=said_at,
        )
        merged: list[int] = []
        if dedupe:
            others = await self.facts.live_in_category(user_id, category, row.id)
            merged = merge_targets(key, value, others)
            if merged:
                await self.facts.hide(user_id, merged, row.id)
                log.info("facts.merged", user_id=user_id, into=row.id, hidden=merged)
        return UpsertResult(fact=row, merged=merged, version_id=version)

    async def delete_fact(self, user_id: str, key: str, category: str | None = None) -> int:
        reject_nul(key, "key")
        reject_nul(category, "category")
        ids, hidden = await self.facts.delete_by_key(
            user_id, normalise_name(key), normalise_name(category) if category else None
        )
        if ids:  # their versions end now (or at their expiry, when that came first)
            await self.versions.close_current(user_id, [*ids, *hidden], await self.versions.now())
        return len(ids)

    async def set_merged_into(
        self,
        fact_id: int,
        merged_into: int | None,
        *,
        user_id: str,
        is_admin: bool,
        can_read_all: bool,
    ) -> FactRow:
        """Undo a merge (`None`) or hide a fact behind another live fact of the same
        user and category. The owner or an admin may; a reader of all memory who is
        neither gets 403, anyone else 404."""
        row = await self.facts.get(fact_id, None, all_users=True)
        if row is None or (row.user_id != user_id and not (is_admin or can_read_all)):
            raise NotFound(f"fact {fact_id} not found")
        if row.user_id != user_id and not is_admin:
            raise Forbidden("only the fact's owner or an admin may change it")
        if merged_into is not None:
            target = await self.facts.get(merged_into, row.user_id, all_users=False)
            if (
                target is None
                or target.id == row.id
                or target.merged_into is not None
                or target.category != row.category
            ):
                raise Unprocessable(
                    "merged_into: must be another live fact of the same user and category"
                )
        await self.facts.set_merged_into(row.id, row.user_id, merged_into)
        fresh = await self.facts.get(row.id, row.user_id, all_users=False)
        assert fresh is not None
        log.info("facts.merge_changed", fact_id=row.id, merged_into=merged_into)
        return fresh

    # ------------------------------------------------------------------ reads
    async def search_facts(
        self,
        query: str,
        user_id: str | None,
        limit: int = DEFAULT_SEARCH_LIMIT,
        *,
        all_users: bool = False,
        query_vector: Sequence[float] | None | msgspec.UnsetType = msgspec.UNSET,
        typo_tolerant: bool = True,
    ) -> SearchResult:
        """Vector search first (cosine distance < 0.3, live rows); when it finds nothing
        or no query vector can be had, word search over category, key and value.
        `user_id=None` searches every user and needs `all_users=True` (the caller has
        checked `navi.memory.read_all`). `typo_tolerant`: a user's word search also
        matches similar words (pg_trgm, when installed); off, words match as typed."""
        if user_id is None and not all_users:
            raise Forbidden("searching every user's memory needs navi.memory.read_all")
        if not query or not query.strip():
            raise Unprocessable("query: required, must not be blank")
        limit = max(1, min(limit, MAX_SEARCH_LIMIT))
        if isinstance(query_vector, msgspec.UnsetType):
            vectors = await self.embed([query.strip()])
            vector: Sequence[float] | None = vectors[0] if vectors else None
        else:
            vector = query_vector
        if vector is not None:
            found = await self.search.vector_search(
                user_id, vector, limit=limit, max_distance=VECTOR_MAX_DISTANCE, all_users=all_users
            )
            if found:
                return SearchResult(
                    "vector", [fact_hit(row, "vector", 1.0 - row.distance) for row in found]
                )
        words = query_words(query)
        # Typo-tolerant matching (pg_trgm `%>`) only within one user's facts: across every
        # user a short word is "similar" to a great many values (plain ILIKE there, which
        # the trigram indexes still serve).
        trigram = typo_tolerant and user_id is not None and await self.search.has_pg_trgm()
        rows = await self.search.text_search(
            user_id, words, limit=limit, all_users=all_users, trigram=trigram
        )
        hits = [fact_hit(row, "text", row.score) for row in rows]
        return SearchResult("text" if hits else "none", hits)

    async def get_all_facts(
        self,
        user_id: str | None,
        *,
        all_users: bool = False,
        limit: int | None = None,
        offset: int = 0,
        search: str | None = None,
        sort_by: str = "category",
        sort_order: str = "asc",
        include_merged: bool = False,
        category: str | None = None,
        key: str | None = None,
    ) -> list[FactRow]:
        """`category` / `key`: exact matches, normalised as a save normalises them."""
        return await self.facts.list_facts(
            user_id,
            all_users=all_users,
            limit=limit,
            offset=offset,
            search=search,
            sort_by=sort_by,
            sort_order=sort_order,
            include_merged=include_merged,
            exact=exact_filter(category, key),
        )

    async def fact_count(
        self,
        user_id: str | None,
        *,
        all_users: bool = False,
        search: str | None = None,
        include_merged: bool = False,
        category: str | None = None,
        key: str | None = None,
    ) -> int:
        return await self.facts.count_facts(
            user_id,
            all_users=all_users,
            search=search,
            include_merged=include_merged,
            exact=exact_filter(category, key),
        )

    async def categories(self, user_id: str) -> list[tuple[str, int]]:
        return await self.facts.categories(user_id)

    async def merged_under(self, user_id: str, fact_ids: Sequence[int]) -> list[FactRow]:
        """The user's facts hidden behind any of `fact_ids` (a merge's undo list)."""
        return await self.facts.hidden_behind(user_id, fact_ids)

    async def learned_per_day(self, user_id: str, days: int = 30) -> list[tuple[date, int]]:
        """Facts the user gained per day (UTC), the last `days` days to today, oldest
        first, every day present (0 when none)."""
        today = datetime.now(UTC).date()
        start = today - timedelta(days=days - 1)
        since = datetime.combine(start, time.min, tzinfo=UTC)
        counts = dict(await self.facts.created_per_day(user_id, since))
        return [
            (day, counts.get(day, 0)) for day in (start + timedelta(days=i) for i in range(days))
        ]

    # ------------------------------------------------------------------ summary
    async def get_summary(self, user_id: str) -> MemorySummary | None:
        return await self.summaries.get(user_id)

    async def set_summary(self, user_id: str, content: str) -> MemorySummary:
        if len(content) > MAX_SUMMARY:
            raise Unprocessable(f"content: at most {MAX_SUMMARY} characters")
        return await self.summaries.put(user_id, scrub_text(content).strip())


def exact_filter(category: str | None, key: str | None) -> FactKeyFilter:
    return FactKeyFilter(
        normalise_name(category) if category is not None else None,
        normalise_name(key) if key is not None else None,
    )


def summary_fields(row: MemorySummary | None) -> dict[str, Any]:
    return {"content": row.content if row else "", "updated_at": row.updated_at if row else None}
