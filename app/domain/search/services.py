"""Unified memory search: facts → raw → sketches, one read path with provenance.

The stores are queried here (the raw index through `raw_history.search.search_raw`);
the merge, freshness labels and rendering are the pure functions of `merge.py` and
`render.py`. One store failing empties its tier (`memory_search.store_failed` is
logged); the others answer. Each search logs `memory_search.done` with the query's
length (never its text), the hits per store and the time.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import behind_pooler, in_own_session
from app.domain.error_memory.services import unified_error_search
from app.domain.facts.history import search_fact_hits_as_of
from app.domain.facts.memory_hits import search_fact_hits
from app.domain.facts.services import FactService
from app.domain.kernel.hits import MemoryHit
from app.domain.kernel.runtime import Runtime
from app.domain.kernel.terms import clamp_k, normalize_scope, query_terms
from app.domain.kernel.when import read_time
from app.domain.raw_history.repositories import ChunkRepository, SummaryMark
from app.domain.raw_history.search import search_raw
from app.domain.search.merge import mark_freshness, merge_tiered
from app.domain.search.render import format_hits
from app.domain.sketches.repositories import SCRATCHPAD, SketchRepository
from app.lib.aio import both
from app.lib.inputs import scrub_text
from app.llm.gateway import LLMError, LLMGateway
from app.llm.query_embeddings import QueryEmbeddings

log = structlog.get_logger()
T = TypeVar("T")

#: The stores whose hits each scope returns (scope `raw` reads the facts for labels only).
_SHOWN = {
    "all": ("facts", "raw", "sketches"),
    "facts": ("facts",),
    "raw": ("raw",),
    "sketches": ("sketches",),
    "errors": ("errors",),
}

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


class UnifiedSearch:
    """The stores searched for one query. With a `side_sessions` factory (the service's),
    the facts and the sketches are read on a second connection while the raw index is
    searched on the request's (scopes `all` and `raw`), so their database time overlaps
    the raw side's Python (the search only reads: nothing is written on either
    connection)."""

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
        self._embedded: QueryEmbeddings | None = None  # `embed_first`'s

    @classmethod
    def of(
        cls,
        db: AsyncSession,
        runtime: Runtime,
        primary: AsyncSession | None = None,
        *,
        llm: LLMGateway | None = None,
    ) -> UnifiedSearch:
        """Every store the service has: the facts and sketches read on a second
        connection (the replica's when `db` is), the errors scope's renewals written
        through `primary` (default `db`) when `db` is a read replica's. `llm` (default
        the runtime's): the gateway the query is embedded through."""
        return cls(
            db,
            llm or runtime.llm,
            runtime.settings,
            facts=search_fact_hits,
            errors=unified_error_search(runtime.settings),
            side_sessions=runtime.side_sessions(db),
            errors_db=primary,
        )

    async def embed_first(self, query: str) -> None:
        """Embed `query` now, before the caller's first statement (its ownership checks):
        the search then finds the vector made, and no connection is held while the
        embedder runs (a request's session keeps its connection from its first statement
        to its end). A failure is remembered: the search degrades as without."""
        if self.llm is None:
            return
        self._embedded = QueryEmbeddings(self.llm)
        query = scrub_text(query)
        texts = [t for t in dict.fromkeys((query.strip(), query)) if t.strip()]
        if texts:
            try:
                await self._embedded.embed(texts)
            except LLMError:
                pass

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
        as_of: datetime | None = None,
    ) -> SearchResult:
        """`as_of`: the facts leg answers with the values true then (versions, by words),
        and the raw leg reads the question's relative times from it ("last week": the
        week before `as_of`; default now): `kernel.when`."""
        started = time.perf_counter()
        query = scrub_text(query)  # free text: a NUL is searched (and echoed) as U+FFFD
        scope_ = normalize_scope(scope)
        k_ = clamp_k(k)
        embedded = self._embedded or (QueryEmbeddings(self.llm) if self.llm is not None else None)
        llm = cast(LLMGateway | None, embedded)
        if llm is not None and query.strip():
            # the query's vector first, with no connection of this search checked out yet:
            # every store's embed call then finds it (a failure too: they degrade)
            try:
                await llm.embed([query.strip()])
            except LLMError:
                pass
        want_raw = scope_ in ("all", "raw")
        # scope `raw` reads the facts too, for the freshness labels only (not returned):
        # an outdated excerpt shown as current is worse than a slower answer. The same
        # `k` as scope `all`, so both label an excerpt alike.
        want_facts = scope_ in ("all", "facts", "raw") and self.facts is not None
        want_sketches = scope_ in ("all", "sketches")
        failed: dict[str, Exception] = {}  # store -> its error, in the order they failed

        async def facts_leg(db: AsyncSession) -> list[MemoryHit]:
            if as_of is not None:
                return await search_fact_hits_as_of(FactService(db), user_id, query, k_, as_of)
            return await self.facts(db, llm, user_id, query, k_)  # type: ignore[arg-type,misc]

        async def sketches_leg(db: AsyncSession) -> list[MemoryHit]:
            return await search_sketches(db, user_id, query, k_, current_session_id)

        async def side(db: AsyncSession, own: bool) -> tuple[list[MemoryHit], list[MemoryHit]]:
            """`own`: `db` is the request's session (a failure is kept to a savepoint)."""
            facts = await _leg("facts", db, facts_leg, failed, own) if want_facts else []
            sketches = (
                await _leg("sketches", db, sketches_leg, failed, own) if want_sketches else []
            )
            return facts, sketches

        async def side_apart(
            factory: async_sessionmaker[AsyncSession],
        ) -> tuple[list[MemoryHit], list[MemoryHit]]:
            try:
                return await in_own_session(factory, lambda db: side(db, False))
            except Exception as exc:  # no side connection: neither store answers
                for store, wanted in (("facts", want_facts), ("sketches", want_sketches)):
                    if wanted:
                        _store_failed(store, exc, failed)
                return [], []

        async def raw_leg(db: AsyncSession) -> tuple[list[MemoryHit], SummaryMark | None]:
            raws = await search_raw(
                db,
                llm,
                user_id,
                query,
                k_,
                session_id=session_id,
                side_sessions=self.side_sessions,
                when=read_time(query, as_of or datetime.now(UTC)),
                line_days=True,
            )
            summary = None
            if current_session_id is not None and raws:
                # the user's chunks of that session are the only raw hits it can mark
                summary = await ChunkRepository(db).latest_summary(user_id, current_session_id)
            return raws, summary

        async def raw() -> tuple[list[MemoryHit], SummaryMark | None]:
            if not want_raw:
                return [], None
            return await _leg("raw", self.db, raw_leg, failed, True, default=([], None))

        if self.side_sessions is not None and want_raw and (want_facts or want_sketches):
            (facts, sketches), (raws, summary) = await both(side_apart(self.side_sessions), raw())
        else:
            facts, sketches = await side(self.db, True)
            raws, summary = await raw()
        errors: list[MemoryHit] = []
        if scope_ == "errors" and self.errors is not None:  # only when asked for

            async def errors_leg(db: AsyncSession) -> list[MemoryHit]:
                return await self.errors(db, llm, user_id, query, k_)  # type: ignore[arg-type,misc]

            errors = await _leg("errors", self.errors_db, errors_leg, failed, True)
        raws = mark_freshness(
            facts,
            raws,
            summary.at if summary else None,
            str(current_session_id) if current_session_id else None,
            summary_through=summary.through_seq if summary else None,
        )
        shown_facts = facts if scope_ != "raw" else []  # raw: the facts only labelled
        hits = merge_tiered(shown_facts, raws, sketches, errors)
        text = format_hits(query, scope_, hits, best_window_enabled=best_window)
        # the query is conversation text, often the user's own words: its length is
        # enough to diagnose with, the text would put it in the journal
        log.info(
            "memory_search.done",
            query_len=len(query),
            scope=scope_,
            k=k_,
            facts=len(shown_facts),
            raw=len(raws),
            sketches=len(sketches),
            errors=len(errors),
            failed=list(failed),
            ms=round((time.perf_counter() - started) * 1000, 1),
        )
        # every store whose hits were asked for failed (the database down, say): the
        # error, not an answer reading "no matches in any store"
        shown = [s for s in _SHOWN[scope_] if s != "facts" or self.facts is not None]
        if shown and all(s in failed for s in shown):
            raise failed[shown[0]]
        return SearchResult(query=query, scope=scope_, k=k_, hits=hits, text=text)


async def _leg(
    store: str,
    db: AsyncSession,
    run: Callable[[AsyncSession], Awaitable[T]],
    failed: dict[str, Exception],
    own: bool,
    *,
    default: Any = None,
) -> T:
    """One store's part of a search. A failure empties that store's tier (`default`,
    else `[]`), is logged and noted in `failed`; the other stores still answer. On the
    caller's own session (`own`) the store runs inside a savepoint, so a failed
    statement does not abort the caller's transaction (the turn loop goes on using it);
    a side connection is in autocommit, where a failed statement ends alone (behind a
    transaction pooler it is in a transaction too, and gets the savepoint)."""
    try:
        if (own or _side_in_transaction(db)) and not _autocommit(db):
            async with db.begin_nested():
                return await run(db)
        return await run(db)
    except Exception as exc:
        _store_failed(store, exc, failed)
        return cast(T, [] if default is None else default)


def _side_in_transaction(db: AsyncSession) -> bool:
    """A side connection (`in_own_session`) runs its statements in one transaction."""
    bind = db.bind
    return isinstance(bind, AsyncEngine) and behind_pooler(bind)


def _autocommit(db: AsyncSession) -> bool:
    """`db` runs each statement in a transaction of its own (no savepoint possible)."""
    bind = db.bind
    if isinstance(bind, AsyncEngine):
        return bind.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
    return False


def _store_failed(store: str, exc: Exception, failed: dict[str, Exception]) -> None:
    """The error's class only (a driver's message can quote the query); a database
    error by the driver's class (`UndefinedTable`), not SQLAlchemy's wrapper."""
    cause = getattr(exc, "orig", None) or exc
    log.warning("memory_search.store_failed", store=store, error=type(cause).__name__)
    failed.setdefault(store, exc)
