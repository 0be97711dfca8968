"""SQL that reads raw chunks (`memory_chunks`) and their segment vectors
(`memory_chunk_vectors`) for the raw search and recall: the search's planner settings and
chunk count, term lookups, nearest segments, candidate chunks, the messages of some
chunks' turn ranges (the days of their lines), the most recent chunks, a session's latest
summary mark (`messages`). Every statement names the user. The rows are written
(append-only, idempotent per (session, content)) by `ChunkWriter`
(chunk_writer_repository.py).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Row, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.citus import segment_buckets
from app.db.models import MemoryChunk, Message
from app.db.models.memory import SEGMENT_BUCKETS
from app.domain.raw_history.chunks import ChunkMessage
from app.domain.raw_history.ranking import PREFIX_MIN
from app.lib.sql import DriverRows, vector_literal

_CHUNK_COLUMNS = (
    MemoryChunk.id,
    MemoryChunk.session_id,
    MemoryChunk.content,
    MemoryChunk.start_seq,
    MemoryChunk.end_seq,
    MemoryChunk.started_at,
    MemoryChunk.ended_at,
    MemoryChunk.breadcrumbs,
)


def term_tsquery(term: str) -> str:
    """The `to_tsquery('simple', …)` text of one query term (`query_terms` output: letters
    and digits only): a word prefix from `PREFIX_MIN` chars, else the whole word."""
    return f"{term}:*" if len(term) >= PREFIX_MIN else term


def user_bucket(user_id: str) -> int:
    """The user's segment-vector bucket: `navi_user_bucket(user_id)` in SQL (6 bits of
    md5(user_id)), the predicate of the HNSW graph holding the user's segments."""
    return int(hashlib.md5(user_id.encode()).hexdigest()[:8], 16) & (SEGMENT_BUCKETS - 1)


class ChunkScope(NamedTuple):
    """What `begin_search` reads: the user's chunks in the search's scope, and the
    version of the user's chunks — the database's oid and `memory_chunk_counts.version`,
    which every statement adding or removing them changes (None for one session's, and
    for a user with no chunks counted)."""

    chunks: int
    version: tuple[int, int] | None


class SummaryMark(NamedTuple):
    at: datetime
    through_seq: int | None  # the last turn the summary covers, when it says so


@dataclass(frozen=True)
class Segment:
    start: int
    end: int
    similarity: float


# `load_candidates`' read: the chunks by primary key — `(id, user_id)`, both named: the
# key's own index, and on Citus one shard — fenced (`OFFSET 0`) from the filter applied
# after (otherwise the planner may intersect the few keys with the user's whole
# `(user_id, …)` btree range), and with a query vector each chunk's segments by their
# key (`chunk_id`, the user named again: Citus does not carry it through the fence). The
# aggregates of one group read its rows in the same order: the arrays line up. Plain SQL
# with the ids as one array and the vector as its text: the ORM statement's expanding IN
# and bind processing cost more than the read.
# why: docs/performance.md, "raw search candidates"
_CANDIDATES = (
    "SELECT {chunk}{columns} FROM (SELECT user_id, {inner} FROM memory_chunks"
    " WHERE id = ANY(CAST(%(ids)s AS uuid[])) AND user_id = %(uid)s OFFSET 0) AS c{lateral}"
    " WHERE c.user_id = %(uid)s"
)
_KEYS = [c.key for c in _CHUNK_COLUMNS]  # the columns `raw_hit` reads, as `recent` has them
_CHUNK = {"chunk": ", ".join(f"c.{k}" for k in _KEYS), "inner": ", ".join(_KEYS)}
_CANDIDATES_ONLY = _CANDIDATES.format(**_CHUNK, columns="", lateral="")
_CANDIDATES_WITH_SEGMENTS = _CANDIDATES.format(
    **_CHUNK,
    columns=", s.seg_starts, s.seg_ends, s.seg_distances",
    lateral=(
        " JOIN LATERAL (SELECT array_agg(v.start_char) AS seg_starts,"
        " array_agg(v.end_char) AS seg_ends,"
        " array_agg(v.embedding <=> CAST(%(query)s AS vector)) AS seg_distances"
        " FROM memory_chunk_vectors AS v WHERE v.chunk_id = c.id AND v.user_id = %(uid)s)"
        " AS s ON true"
    ),
)
# `nearest_segments`' read. The graph walk sets pgvector's iterative scan for its
# transaction in the same statement: the walk is the inner side of a LATERAL join whose
# outer row is the `set_config` call (the walk's `cfg IS NOT NULL` makes it depend on
# that row, so the setting is made before the index is read) — one round trip, where the
# walk often runs first on a connection of its own.
_NEAREST = (
    "SELECT chunk_id, embedding <=> CAST(%(q)s AS vector) AS distance"
    " FROM memory_chunk_vectors WHERE {where} ORDER BY distance LIMIT %(limit)s"
)
_WALK = (
    "SELECT w.chunk_id, w.distance FROM"
    " (SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true) AS cfg) AS s,"
    " LATERAL ("
    + _NEAREST.replace("WHERE {where}", "WHERE {where} AND s.cfg IS NOT NULL")
    + ") AS w"
)

# `range_messages`' read: the messages of some chunks' turn ranges, from the hot table and
# the archive (a session's history is both), by the `(session_id, sequence_number,
# user_id)` key of each, the user named in each.
_RANGE = (
    "SELECT m.session_id, m.sequence_number, m.role, m.content, m.created_at, m.name,"
    " m.is_summary, m.is_compression FROM {table} AS m JOIN unnest("
    "CAST(%(sids)s AS uuid[]), CAST(%(los)s AS bigint[]), CAST(%(his)s AS bigint[]))"
    " AS r(sid, lo, hi) ON m.session_id = r.sid AND m.sequence_number BETWEEN r.lo AND r.hi"
    " WHERE m.user_id = %(uid)s AND m.role IN ('user', 'assistant', 'tool')"
)
_RANGE_MESSAGES = (
    _RANGE.format(table="session_messages")
    + " UNION ALL "
    + _RANGE.format(table="session_messages_archive")
)


def _session_filter(
    session_id: uuid.UUID | None, before_seq: int | None, params: dict[str, Any]
) -> str:
    """The SQL after `user_id = %(uid)s` that limits a raw search to one session's chunks,
    and of those (with `before_seq`) to the chunks ending before that turn — automatic
    recall's scope: the turns still in the live context are not recalled."""
    if session_id is None:
        return ""
    params["sid"] = session_id
    if before_seq is None:
        return " AND session_id = %(sid)s"
    params["before"] = before_seq
    return " AND session_id = %(sid)s AND end_seq < %(before)s"


class ChunkRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        # the raw search's statements: sent by psycopg, never prepared (`DriverRows`) —
        # a plan made once for any user is wrong for one with a hundred or ten thousand
        # chunks
        self._rows = DriverRows(session)

    async def begin_search(
        self, user_id: str, *, session_id: uuid.UUID | None, before_seq: int | None = None
    ) -> ChunkScope:
        """Settle the transaction's planner settings for a raw search and return the
        number of the user's chunks (in `session_id` when given: counted; else read from
        `memory_chunk_counts`, with its `version`): the N of the terms' IDF, and what
        decides between an exact and an HNSW segment lookup. One round trip.

        JIT and parallel workers are turned off for the transaction: the text index
        expression's high COST makes `term_matches`' lookups look expensive, and JIT
        compilation or a parallel gather would cost more than the lookup (why:
        docs/performance.md, "raw search planner settings"). Generic plans are off too
        (`plan_cache_mode`): psycopg prepares a statement run five times on a
        connection, and PostgreSQL may then plan it once for any user, while the right
        plan depends on how many chunks the user has (a hundred or ten thousand). One
        aggregate of the user's rows: on Citus it runs on the user's shard, like the search."""
        params: dict[str, Any] = {"uid": user_id}
        if session_id is None:  # kept per user (`MemoryChunkCount`); no row: none
            count = (
                "coalesce(max(c.chunks), 0) AS n, coalesce(max(c.version), 0) AS v,"
                " (SELECT oid FROM pg_database WHERE datname = current_database()) AS db"
                " FROM memory_chunk_counts AS c WHERE c.user_id = %(uid)s"
            )
        else:
            where = _session_filter(session_id, before_seq, params)
            count = (
                "count(*) AS n, NULL AS v, NULL AS db FROM memory_chunks"
                f" WHERE user_id = %(uid)s{where}"
            )
        sql = (
            "SELECT set_config('jit', 'off', true) AS jit,"
            " set_config('max_parallel_workers_per_gather', '0', true) AS workers,"
            f" set_config('plan_cache_mode', 'force_custom_plan', true) AS plans, {count}"
        )
        row = (await self._rows(sql, params))[0]
        if not row.v:  # one session's chunks, or none counted for the user
            return ChunkScope(int(row.n), None)
        return ChunkScope(int(row.n), (int(row.db), int(row.v)))

    async def term_matches(
        self,
        user_id: str,
        terms: Sequence[str],
        *,
        session_id: uuid.UUID | None,
        cap: int,
        before_seq: int | None = None,
    ) -> list[list[str]]:
        """For each term the ids (as text) of (at most `cap`) of the user's chunks whose
        text or breadcrumbs contain it — one GIN lookup per term, in one round trip; a
        term found in `cap` chunks is at least that common.

        The chunks' stored lexemes (`search_terms`, `CHUNK_USER_TSV`) carry a key of
        their user and `navi_user_tsquery` puts the same key in the query's: a prefix term expands
        over this user's lexemes only, and the postings read are this user's chunks.
        Each lookup names the user too (on Citus it then stays on the user's shard) and
        is fenced (`OFFSET 0`) from the session and turn filters applied after; the
        user filter drops a colliding key's rows. Run after `begin_search` (its planner
        settings)."""
        found: list[list[str]] = [[] for _ in terms]
        if not terms:
            return found
        params: dict[str, Any] = {"uid": user_id, "cap": cap}
        scope = "user_id = %(uid)s" + _session_filter(session_id, before_seq, params)
        parts = []
        for i, term in enumerate(terms):
            params[f"q{i}"] = term_tsquery(term)
            parts.append(
                f"(SELECT {i} AS term, array_agg(id::text) AS ids FROM (SELECT id FROM (SELECT "
                f"id, user_id, session_id, end_seq FROM memory_chunks WHERE user_id = %(uid)s "
                "AND search_terms @@ "
                f"navi_user_tsquery(%(uid)s, to_tsquery('simple', %(q{i})s)) OFFSET 0) AS m "
                f"WHERE {scope} LIMIT %(cap)s) AS l{i})"
            )
        for row in await self._rows(" UNION ALL ".join(parts), params):
            if row.ids:
                found[row.term] = list(row.ids)
        return found

    async def nearest_segments(
        self,
        user_id: str,
        query_embedding: list[float],
        *,
        session_id: uuid.UUID | None,
        limit: int,
        exact: bool = False,
        before_seq: int | None = None,
    ) -> list[tuple[uuid.UUID, float]]:
        """(chunk id, cosine similarity) of the user's segments nearest to the query.

        The HNSW graphs are per user bucket (`SEGMENT_BUCKETS` partial indexes, each
        `WHERE navi_user_bucket(user_id) = n`): the query names the user's bucket as a
        literal, so the planner walks the one graph holding the user's segments, with
        pgvector's iterative scan so the user filter does not starve it (on Citus: the
        shard's one graph, no bucket condition, `app.db.citus`).

        `exact`: compare the query with each of the user's segments (read through the
        `(user_id, session_id)` index) instead — cheaper and exact when the user has few
        segments, where even the bucket's graph walk visits many other users' vectors
        before it finds enough of theirs. Without the bucket condition no HNSW index
        applies, so the plan is the btree range and a top-N sort (no materialised copy
        of the vectors)."""
        where = "user_id = %(uid)s"
        params: dict[str, Any] = {
            "uid": user_id,
            "q": vector_literal(query_embedding),
            "limit": limit,
        }
        if session_id is not None:
            where += " AND session_id = %(sid)s"
            params["sid"] = session_id
            if before_seq is not None:  # the segments have no turn range: their chunk has
                where += (
                    " AND chunk_id IN (SELECT id FROM memory_chunks"
                    " WHERE user_id = %(uid)s AND session_id = %(sid)s AND end_seq < %(before)s)"
                )
                params["before"] = before_seq
        if exact:
            sql = _NEAREST.format(where=where)
        elif await segment_buckets(self.session):
            # the user's bucket as a literal: the planner then walks the one graph whose
            # predicate it implies, with the iterative scan on (`_WALK`)
            sql = _WALK.format(
                where=f"{where} AND navi_user_bucket(user_id) = {user_bucket(user_id)}"
            )
        else:  # a cluster: the user's shard has one graph (`app.db.citus`)
            sql = _WALK.format(where=where)
        rows = await self._rows(sql, params)
        return [(r.chunk_id, 1.0 - float(r.distance)) for r in rows]

    async def load_candidates(
        self,
        user_id: str,
        ids: Sequence[uuid.UUID],
        query_embedding: list[float] | None,
    ) -> list[tuple[Any, list[Segment]]]:
        """The user's chunks `ids` (rows with the `_CHUNK_COLUMNS` attributes) with every
        segment's similarity to the query (none without a query vector): one round trip
        (see `_CANDIDATES`)."""
        if not ids:
            return []
        params: dict[str, Any] = {"uid": user_id, "ids": list(ids)}
        if query_embedding is None:
            return [(r, []) for r in await self._rows(_CANDIDATES_ONLY, params)]
        params["query"] = vector_literal(query_embedding)
        rows = await self._rows(_CANDIDATES_WITH_SEGMENTS, params)
        return [
            (
                r,
                [
                    Segment(start, end, 1.0 - float(dist))
                    for start, end, dist in zip(
                        r.seg_starts or (), r.seg_ends or (), r.seg_distances or (), strict=True
                    )
                ],
            )
            for r in rows
        ]

    async def range_messages(
        self, user_id: str, ranges: Sequence[tuple[str, int, int]]
    ) -> dict[tuple[str, int], ChunkMessage]:
        """The user's messages of the turn ranges (session id, first, last turn), as the
        chunker took them, by (session id, sequence number): one round trip."""
        if not ranges:
            return {}
        params: dict[str, Any] = {
            "uid": user_id,
            "sids": [uuid.UUID(s) for s, _, _ in ranges],
            "los": [lo for _, lo, _ in ranges],
            "his": [hi for _, _, hi in ranges],
        }
        return {
            (str(r.session_id), int(r.sequence_number)): ChunkMessage(
                role=r.role,
                content=r.content or "",
                sequence_number=int(r.sequence_number),
                created_at=r.created_at,
                name=r.name,
                is_summary=bool(r.is_summary),
                is_compression=bool(r.is_compression),
            )
            for r in await self._rows(_RANGE_MESSAGES, params)
        }

    async def recent(
        self,
        user_id: str,
        *,
        session_id: uuid.UUID | None,
        limit: int,
        before_seq: int | None = None,
    ) -> list[Row[Any]]:
        stmt = select(*_CHUNK_COLUMNS).where(MemoryChunk.user_id == user_id)
        if session_id is not None:
            stmt = stmt.where(MemoryChunk.session_id == session_id)
            if before_seq is not None:
                stmt = stmt.where(MemoryChunk.end_seq < before_seq)
        stmt = stmt.order_by(MemoryChunk.ended_at.desc().nulls_last()).limit(limit)
        rows: list[Row[Any]] = list((await self.session.execute(stmt)).all())  # type: ignore[arg-type]
        return rows

    async def latest_summary(self, user_id: str, session_id: uuid.UUID) -> SummaryMark | None:
        """The session's latest summary: when it was written and the last turn it
        summarised — the freshness boundary of the session's raw excerpts."""
        row = (
            await self.session.execute(
                select(
                    Message.created_at,
                    Message.message_metadata["summarized"]["to_seq"].astext,
                )
                .where(
                    Message.user_id == user_id,
                    Message.session_id == session_id,
                    Message.is_summary.is_(True),
                )
                .order_by(Message.sequence_number.desc())
                .limit(1)
            )
        ).first()
        if row is None:
            return None
        through = row[1]
        return SummaryMark(row[0], int(through) if through and through.isdigit() else None)
