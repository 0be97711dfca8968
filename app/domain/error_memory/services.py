"""Error memory rules: write (deduplicated per tool + error text), search (text and
vector, merged), renewal on every hit, purge of expired entries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.engine import transaction
from app.domain.error_memory.repositories import ErrorMemoryRepository
from app.domain.kernel.hits import MemoryHit
from app.domain.kernel.runtime import Runtime
from app.domain.kernel.terms import query_terms
from app.llm.gateway import LLMError, LLMGateway

log = structlog.get_logger()

MAX_DISTANCE = 0.5  # cosine distance under which a stored error counts as similar
RRF_K = 60
EMBED_CHARS = 4000
PURGE_BATCH = 1000


@dataclass(frozen=True)
class ErrorEntry:
    id: int
    tool: str
    error: str
    fix: str
    context: str | None
    created_at: datetime
    last_hit_at: datetime | None
    expires_at: datetime
    hit_count: int
    embedded: bool
    score: float | None = None  # vector similarity, when the vector search found it

    @classmethod
    def of(cls, row: Any, score: float | None = None) -> ErrorEntry:
        return cls(
            id=int(row.id),
            tool=row.tool,
            error=row.error_text,
            fix=row.fix,
            context=row.context,
            created_at=row.created_at,
            last_hit_at=row.last_hit_at,
            expires_at=row.expires_at,
            hit_count=int(row.hit_count),
            embedded=bool(row.embedded),
            score=score,
        )


def fuse(text_ids: Sequence[int], vector_ids: Sequence[int], limit: int) -> list[int]:
    """Reciprocal-rank fusion of the two rankings: found by both beats found by one."""
    score: dict[int, float] = {}
    for ranking in (text_ids, vector_ids):
        for rank, i in enumerate(ranking):
            score[i] = score.get(i, 0.0) + 1.0 / (RRF_K + rank + 1)
    order = {i: n for n, i in enumerate([*text_ids, *vector_ids])}
    return sorted(score, key=lambda i: (-score[i], order[i]))[:limit]


def embed_text(tool: str, error: str) -> str:
    """The vector is of the error, not the fix: a lookup starts from an error message."""
    return f"{tool}: {error}"[:EMBED_CHARS]


class ErrorMemoryService:
    def __init__(self, db: AsyncSession, llm: LLMGateway | None, settings: Settings) -> None:
        self.repo = ErrorMemoryRepository(db)
        self.llm = llm
        self.settings = settings

    @classmethod
    def of(
        cls, db: AsyncSession, runtime: Runtime, *, llm: LLMGateway | None = None
    ) -> ErrorMemoryService:
        """The service on `db`, embedding through `llm` (default the runtime's gateway)."""
        return cls(db, llm or runtime.llm, runtime.settings)

    def embed_through(self, llm: LLMGateway | None) -> None:
        """Embed through `llm` from now on (the sealed gateway of embeddings made ahead,
        with no connection held); None keeps the gateway as it is."""
        if llm is not None:
            self.llm = llm

    @property
    def ttl_days(self) -> int:
        return self.settings.error_memory_ttl_days

    async def _embed(self, content: str) -> list[float] | None:
        if self.llm is None:
            return None
        try:
            return await self.llm.embed_one(content)
        except LLMError as exc:
            log.info("error_memory.embedding_unavailable", error=str(exc)[:200])
            return None

    async def write(
        self, user_id: str, tool: str, error: str, fix: str, context: str | None
    ) -> tuple[ErrorEntry, bool]:
        """Store a resolved error. The same tool + error text again updates the live
        entry (newest fix wins) and renews it. Returns (entry, created)."""
        vector = await self._embed(embed_text(tool, error))
        same = await self.repo.find_same(user_id, tool, error)
        if same is not None:
            row = await self.repo.update(user_id, same, fix, context, vector, self.ttl_days)
            created = False
        else:
            row = await self.repo.insert(user_id, tool, error, fix, context, vector, self.ttl_days)
            created = True
        log.info("error_memory.written", entry_id=int(row.id), created=created)
        return ErrorEntry.of(row), created

    async def search(
        self, user_id: str, query: str, tool: str | None, limit: int
    ) -> list[ErrorEntry]:
        """Text and vector hits merged; every entry returned is renewed (a hit)."""
        if not query.strip():
            ids = await self.repo.recent(user_id, tool, limit)
            similarity: dict[int, float] = {}
        else:
            text_ids = await self.repo.search_text(user_id, query, query_terms(query), tool, limit)
            vector_hits: list[tuple[int, float]] = []
            vector = await self._embed(query)
            if vector is not None:
                vector_hits = await self.repo.search_vector(
                    user_id, vector, tool, limit, MAX_DISTANCE
                )
            similarity = {i: round(1.0 - d, 4) for i, d in vector_hits}
            ids = fuse(text_ids, [i for i, _ in vector_hits], limit)
        rows = {int(r.id): r for r in await self.repo.renew(user_id, ids, self.ttl_days)}
        return [ErrorEntry.of(rows[i], similarity.get(i)) for i in ids if i in rows]

    async def browse(self, user_id: str, limit: int, offset: int) -> tuple[list[ErrorEntry], int]:
        """A page of the user's live entries (most recently used first) and their count,
        without renewing them: looking is not a hit."""
        rows, total = await self.repo.list_live(user_id, limit, offset)
        return [ErrorEntry.of(r) for r in rows], total

    async def purge_expired(self) -> int:
        return await self.repo.purge_expired(PURGE_BATCH)


async def purge_expired_errors(runtime: Runtime) -> int:
    """The periodic job: delete expired entries in batches, one transaction each. Safe
    with several replicas (SKIP LOCKED: they share the work)."""
    total = 0
    while True:
        async with transaction(runtime.session_factory) as db:
            n = await ErrorMemoryService.of(db, runtime).purge_expired()
        total += n
        if n < PURGE_BATCH:
            if total:
                log.info("error_memory.purged", entries=total)
            return total


def memory_hit(entry: ErrorEntry) -> MemoryHit:
    return MemoryHit(
        source_type="error",
        text=f"{entry.error}\nfix: {entry.fix}",
        timestamp=entry.last_hit_at or entry.created_at,
        key=entry.tool,
        score=entry.score,
        terms_hit=1 if entry.score is None else 0,
    )


def unified_error_search(settings: Settings):  # type: ignore[no-untyped-def]
    """The `errors` store of the unified memory search:
    `(db, llm, user_id, query, limit) -> list[MemoryHit]` (a hit renews the entry)."""

    async def search(
        db: AsyncSession, llm: LLMGateway | None, user_id: str, query: str, limit: int
    ) -> list[MemoryHit]:
        entries = await ErrorMemoryService(db, llm, settings).search(user_id, query, None, limit)
        return [memory_hit(e) for e in entries]

    return search


def render(query: str, tool: str | None, entries: Sequence[ErrorEntry]) -> str:
    head = f'error_history "{" ".join(query.split())}"'
    if tool:
        head += f" (tool={tool})"
    head += f": {len(entries)} hit(s)"
    if not entries:
        return head + "\nNo recorded error matches. Record the fix with write_error once solved."
    lines = [head]
    for n, e in enumerate(entries, 1):
        meta = f"{n}. [{e.tool}] recorded {e.created_at:%Y-%m-%d}, hits {e.hit_count}"
        if e.score is not None:
            meta += f", similarity {e.score:.2f}"
        lines.append(meta)
        lines.append(f"   error: {_clip(e.error)}")
        lines.append(f"   fix: {_clip(e.fix)}")
        if e.context:
            lines.append(f"   context: {_clip(e.context)}")
    return "\n".join(lines)


def _clip(text: str, chars: int = 800) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 1] + "…"
