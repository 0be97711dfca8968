"""The raw history search: `search_raw` over a user's chunks (text index + segment
vectors, ranked by their best lines; the ranking's pure functions are `ranking.py`). The
unified search over every store is `search/services.py` (`UnifiedSearch`); its merge,
freshness labels and rendering are the pure functions of `search/merge.py` and
`search/render.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.engine import in_own_session
from app.domain.kernel.hits import MemoryHit
from app.domain.kernel.terms import query_terms
from app.domain.kernel.when import TimeAsk, time_factors
from app.domain.raw_history import ranking
from app.domain.raw_history.line_days import multi_day, with_days
from app.domain.raw_history.ranking import (
    Candidate,
    first_person,
    idf,
    rank_chunks,
    spread,
    stem_term,
)
from app.domain.raw_history.repositories import ChunkRepository, ChunkScope, Segment
from app.domain.raw_history.search_cache import CommonTerms, Walkers
from app.domain.raw_history.speakers import query_names
from app.lib.aio import both
from app.llm.gateway import LLMError, LLMGateway

log = structlog.get_logger()

RAW_MAX_DISTANCE = 0.45  # a chunk matching no query term needs a segment this close
TEXT_CANDIDATES = 15  # chunks taken from the text side (by summed IDF of matched terms)
# ... unless at most this many hold a query term: then all of them. In a small history
# many chunks hold every common term of the query, and the summed IDF (presence only)
# cuts among ties. why: docs/performance.md, "raw search candidates"
TEXT_CANDIDATES_ALL = 30
VECTOR_CANDIDATES = 15  # nearest segments taken from the vector side
# chunk ids read per term: a term in more chunks than this is common for the user (its
# IDF, from this lower bound of its frequency, ≤ 3.0 at 10k chunks, against ~7 for a
# rare one). Each id read is a heap fetch; users with fewer chunks than the cap are not
# affected. why: docs/performance.md, "raw search term cap"
TERM_CAP = 500
MAX_TERMS = 24  # query terms looked up (recall queries are several messages long)
EXACT_SCAN_CHUNKS = 1000  # up to this many chunks in scope, segments are compared one by one
# each hit already taken from a session scales the next of that session by this
# (`ranking.spread`). why: docs/performance.md, "Retrieval A/B"
SESSION_DECAY = 0.7


_WALKERS = Walkers()
_COMMON = CommonTerms()


def raw_hit(
    row: Any,
    *,
    score: float | None = None,
    terms_hit: int = 0,
    matched: tuple[str, ...] = (),
    rank: float | None = None,
    focus: tuple[tuple[int, int], ...] = (),
    focus_scores: tuple[float, ...] = (),
) -> MemoryHit:
    return MemoryHit(
        source_type="raw",
        text=row.content,
        session_id=str(row.session_id),
        timestamp=row.ended_at,
        started_at=row.started_at,
        start_seq=row.start_seq,
        end_seq=row.end_seq,
        chunk_id=str(row.id),
        score=score,
        terms_hit=terms_hit,
        breadcrumbs=tuple(row.breadcrumbs or ()),
        matched_terms=matched,
        rank=rank,
        focus=focus,
        focus_scores=focus_scores,
    )


async def search_raw(
    db: AsyncSession,
    llm: LLMGateway | None,
    user_id: str,
    query: str,
    k: int,
    *,
    session_id: uuid.UUID | None = None,
    before_seq: int | None = None,
    side_sessions: async_sessionmaker[AsyncSession] | None = None,
    when: TimeAsk | None = None,
    line_days: bool = False,
) -> list[MemoryHit]:
    """Hybrid search of raw chunks, ranked by their best line (`ranking.rank_chunks`).

    Candidates come from both sides: the chunks holding the query's rarest terms (one
    GIN lookup per term gives each term's document frequency over the user's chunks and
    the chunks that contain it) and the chunks of the segments nearest to the query
    vector. A chunk is returned when it contains a query term or one of its segments is
    within cosine distance `RAW_MAX_DISTANCE`. `score` is that similarity when it passes
    the cutoff (None otherwise: automatic recall then judges the hit by its matched
    terms), `rank` the fused relevance, `focus` the lines to show. Without a query
    vector (no embedder) the text side decides alone. An empty normalised query returns
    the most recent chunks.

    With `side_sessions` (the service's session factory), a user with more than
    `EXACT_SCAN_CHUNKS` chunks has the segment lookup (an HNSW walk) run on a second
    connection while the term lookups run on `db`: the two are independent, and at the
    heaviest users each takes a few milliseconds.

    `before_seq` (with `session_id`): only that session's chunks ending before that turn
    — automatic recall leaves out what the live context still holds. `when`: what the
    question says about time (`kernel.when.read_time`): chunks outside its window, or
    far from the end it asks for (first / last), rank lower (`when.time_factors`).
    `line_days`: the hits whose messages span several days carry where each day begins
    (`line_days.with_days`; one read of their messages, only when a hit spans days)."""
    repo = ChunkRepository(db)
    terms = search_terms(query)
    if not terms:
        return [
            raw_hit(r)
            for r in await repo.recent(
                user_id, session_id=session_id, limit=k, before_seq=before_seq
            )
        ]
    vec = await _query_vector(llm, query)
    legs = _Legs(repo, user_id, terms, vec, session_id, before_seq, side_sessions)
    total, matches, near = await legs.run()
    weights = {t: idf(len(ids), total) for t, ids in zip(terms, matches, strict=True) if ids}
    top, matched = text_candidates(terms, matches, weights, TEXT_CANDIDATES)
    ids = [uuid.UUID(c) for c in top]
    ids += [c for c in dict.fromkeys(cid for cid, _ in near) if str(c) not in matched]
    order = {chunk_id: n for n, chunk_id in enumerate(ids)}
    loaded = sorted(await repo.load_candidates(user_id, ids, vec), key=lambda x: order[x[0].id])
    hits = rank_candidates(
        loaded, weights, k, mine=first_person(query), names=query_names(query), when=when
    )
    return await dated_lines(repo, user_id, hits) if line_days else hits


async def dated_lines(
    repo: ChunkRepository, user_id: str, hits: Sequence[MemoryHit]
) -> list[MemoryHit]:
    """`hits` with `day_starts` on those whose messages span several days."""
    ranges = [
        (h.session_id, h.start_seq, h.end_seq)
        for h in hits
        if h.session_id and multi_day(h.started_at, h.timestamp)
    ]
    if not ranges:
        return list(hits)
    return with_days(hits, await repo.range_messages(user_id, ranges))


async def _query_vector(llm: LLMGateway | None, query: str) -> list[float] | None:
    """The query's vector; None without an embedder or when it fails (the text side
    then decides alone)."""
    if llm is None:
        return None
    try:
        return await llm.embed_one(query.strip())
    except LLMError as exc:
        log.info("memory.raw_vector_unavailable", error=str(exc))
        return None


Nearest = list[tuple[uuid.UUID, float]]


@dataclass(frozen=True, slots=True)
class _Legs:
    """The two candidate lookups of one `search_raw`: the terms' chunks (after the
    scope's count) on `repo`, the nearest segments on `repo` or, for a user past
    `EXACT_SCAN_CHUNKS`, on a connection of `side_sessions` at the same time."""

    repo: ChunkRepository
    user_id: str
    terms: list[str]
    vec: list[float] | None
    session_id: uuid.UUID | None
    before_seq: int | None
    side_sessions: async_sessionmaker[AsyncSession] | None

    async def run(self) -> tuple[int, list[Sequence[str]], Nearest]:
        """(chunks in scope, each term's chunk ids, the nearest segments' chunks)."""
        aside = self.side_sessions is not None and self.vec is not None
        if aside and self.session_id is None and _WALKERS.walks(self.user_id):
            # a user seen past EXACT_SCAN_CHUNKS: the walk starts now, beside the count
            (total, matches), near = await both(self.text_side(), self.walk_aside())
            return total, matches, near
        scope = await self.count()
        exact = scope.chunks <= EXACT_SCAN_CHUNKS
        lookup = self.lookup(scope)
        if aside and not exact:
            matches, near = await both(lookup, self.walk_aside())
        else:
            matches = await lookup
            near = await self.nearest(self.repo, exact)
        return scope.chunks, matches, near

    async def nearest(self, on: ChunkRepository, exact: bool) -> Nearest:
        if self.vec is None:
            return []
        return await on.nearest_segments(
            self.user_id,
            self.vec,
            session_id=self.session_id,
            limit=VECTOR_CANDIDATES,
            exact=exact,
            before_seq=self.before_seq,
        )

    def walk_aside(self) -> Awaitable[Nearest]:
        assert self.side_sessions is not None
        return in_own_session(
            self.side_sessions, lambda db: self.nearest(ChunkRepository(db), False)
        )

    async def count(self) -> ChunkScope:
        scope = await self.repo.begin_search(
            self.user_id, session_id=self.session_id, before_seq=self.before_seq
        )
        if self.session_id is None:
            _WALKERS.note(self.user_id, scope.chunks > EXACT_SCAN_CHUNKS)
        return scope

    def lookup(self, scope: ChunkScope) -> Awaitable[list[Sequence[str]]]:
        return lookup_terms(
            self.repo, self.user_id, self.terms, scope, self.session_id, self.before_seq
        )

    async def text_side(self) -> tuple[int, list[Sequence[str]]]:
        scope = await self.count()
        return scope.chunks, await self.lookup(scope)


async def lookup_terms(
    repo: ChunkRepository,
    user_id: str,
    terms: Sequence[str],
    scope: ChunkScope,
    session_id: uuid.UUID | None,
    before_seq: int | None = None,
) -> list[Sequence[str]]:
    """`ChunkRepository.term_matches` (at most `TERM_CAP` ids a term), the user's most
    common terms (found in `TERM_CAP` chunks or more) taken from `_COMMON` while the
    user's chunks are as they were (`scope.version`: None for one session's chunks)."""
    version = scope.version
    found: list[Sequence[str] | None] = [None] * len(terms)
    if version is not None:
        found = [_COMMON.get(user_id, t, version) for t in terms]
    missing = [t for t, ids in zip(terms, found, strict=True) if ids is None]
    looked = iter(
        await repo.term_matches(
            user_id, missing, session_id=session_id, cap=TERM_CAP, before_seq=before_seq
        )
        if missing
        else ()
    )
    out: list[Sequence[str]] = []
    for term, ids in zip(terms, found, strict=True):
        if ids is None:
            ids = next(looked)
            if version is not None and len(ids) >= TERM_CAP:
                _COMMON.put(user_id, term, version, ids)
        out.append(ids)
    return out


def search_terms(query: str) -> list[str]:
    """The terms a raw search looks up: the query's content words, English inflections
    reduced to a light stem matched as a word prefix (`activit` finds activity and
    activities; other scripts are matched as written), at most `MAX_TERMS`."""
    return list(dict.fromkeys(stem_term(t) for t in query_terms(query)))[:MAX_TERMS]


def text_candidates(
    terms: Sequence[str],
    matches: Sequence[Sequence[str]],
    weights: Mapping[str, float],
    limit: int,
    *,
    take_all: int = TEXT_CANDIDATES_ALL,
) -> tuple[list[str], set[str]]:
    """The text side's candidates: the `limit` chunk ids with the highest summed IDF of
    the terms they hold (all of them when at most `take_all` hold a term), and every id
    that holds one. `matches[i]` holds the ids (as
    text: thousands per query at a heavy user, and str hashing is cheap) of the chunks
    containing `terms[i]`."""
    summed: dict[str, float] = {}
    for term, term_ids in zip(terms, matches, strict=True):
        weight = weights.get(term, 0.0)
        for chunk_id in term_ids:
            summed[chunk_id] = summed.get(chunk_id, 0.0) + weight
    cut = len(summed) if len(summed) <= take_all else limit
    return sorted(summed, key=lambda c: -summed[c])[:cut], set(summed)


def rank_candidates(
    loaded: Sequence[tuple[Any, Sequence[Segment]]],
    weights: Mapping[str, float],
    k: int,
    *,
    mine: bool = False,
    names: frozenset[str] = frozenset(),
    when: TimeAsk | None = None,
) -> list[MemoryHit]:
    """The `k` best of the loaded candidate chunks (rows with the `_CHUNK_COLUMNS`
    attributes, and their segments' similarities), ranked by `ranking.rank_chunks`, as
    raw hits. `mine`: a first-person query, the user's own lines count more
    (`ranking.OTHER_SPEAKER_WEIGHT`); `names`: the names it holds (`ranking.rank_chunks`'s
    `named`). `when`: the question's time, against each chunk's
    `started_at` / `ended_at` (`when.time_factors`)."""
    rows = {str(r.id): r for r, _ in loaded}
    times = {k: (r.started_at, r.ended_at) for k, r in rows.items()} if when else {}
    candidates = [
        Candidate(
            key=str(r.id),
            text=r.content,
            keys=tuple(r.breadcrumbs or ()),
            segments=tuple((s.start, s.end, s.similarity) for s in segs),
        )
        for r, segs in loaded
    ]
    ranked = rank_chunks(
        candidates,
        weights,
        k=len(candidates),
        min_similarity=1.0 - RAW_MAX_DISTANCE,
        other_speaker_weight=ranking.OTHER_SPEAKER_WEIGHT if mine else 1.0,
        named=names,
        chunk_factors=time_factors(when, times),
    )
    ranked = spread(ranked, {str(r.id): str(r.session_id) for r, _ in loaded}, SESSION_DECAY, k)
    return [
        raw_hit(
            rows[r.key],
            score=r.similarity
            if r.similarity is not None and r.similarity >= 1.0 - RAW_MAX_DISTANCE
            else None,
            terms_hit=len(r.terms),
            matched=r.terms,
            rank=r.score,
            focus=r.focus,
            focus_scores=r.focus_scores,
        )
        for r in ranked
    ]
