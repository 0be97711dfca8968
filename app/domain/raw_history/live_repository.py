"""SQL of the live words pass over many sessions at once (`live_index.index_live_group`).

The pass used to take one session per transaction: BEGIN, claim, read, extend the open
chunk, count, cover, COMMIT — about eight round trips per session and pass, which under
an append load spread over many sessions cost the web workers more CPU than the appends
themselves. Here a group of sessions (`GROUP_SESSIONS`) is claimed, read, extended,
inserted, counted and covered in one statement each, in one transaction.

On a Citus cluster a group holds one user's sessions (`one_user`): each statement then
also names that user, so it routes to one shard (`FOR UPDATE` cannot span shards). On one
server a group mixes users and the statements take the (user, session) pairs as arrays.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import MemoryChunk, RawIndexState
from app.domain.raw_history.chunks import RawChunk
from app.domain.raw_history.state_repository import CONVERSATION

Key = tuple[str, uuid.UUID]  # (user_id, session_id)


@dataclass(frozen=True)
class Extension:
    """An open chunk grown by a batch: `old` as it was read, `new` with the messages."""

    user_id: str
    session_id: uuid.UUID
    chunk_id: uuid.UUID
    old: RawChunk
    new: RawChunk


@dataclass(frozen=True)
class Cover:
    """A session covered through `last_seq`, its open chunk now `open_chunk` (or none)."""

    user_id: str
    session_id: uuid.UUID
    last_seq: int
    open_chunk: uuid.UUID | None


def stale_chunk_row(
    chunk_id: uuid.UUID, session_id: uuid.UUID, chunk: RawChunk, now: datetime
) -> dict[str, Any]:
    """A new chunk's columns as the words pass writes it: found by its words at once,
    its vectors the embed queue's (`vectors_stale` since `now`)."""
    return {
        "id": chunk_id,
        "session_id": session_id,
        "content": chunk.content,
        "content_hash": chunk.content_hash,
        "start_seq": chunk.start_seq,
        "end_seq": chunk.end_seq,
        "started_at": chunk.started_at,
        "ended_at": chunk.ended_at,
        "breadcrumbs": list(chunk.breadcrumbs),
        "vectors_stale": True,
        "stale_since": now,
    }


def _pairs(keys: Sequence[Key]) -> dict[str, Any]:
    return {"uids": [k[0] for k in keys], "sids": [k[1] for k in keys]}


class LiveIndexRepository:
    def __init__(self, session: AsyncSession, one_user: str | None = None) -> None:
        self.session = session
        self.one_user = one_user  # a Citus group: every statement names this user too

    def _pin(self, column: str) -> str:
        return f" AND {column} = :one" if self.one_user is not None else ""

    def _params(self, **values: Any) -> dict[str, Any]:
        return {**values, "one": self.one_user} if self.one_user is not None else values

    async def ensure_rows(self, keys: Sequence[Key]) -> None:
        """A state row for each session that has none (one multi-row insert)."""
        if keys:
            await self.session.execute(
                insert(RawIndexState)
                .values([{"user_id": u, "session_id": s} for u, s in keys])
                .on_conflict_do_nothing()
            )

    async def claim(self, keys: Sequence[Key]) -> list[Row[Any]]:
        """Lock the state rows of every session of `keys` at once: the rows
        locked (`SKIP LOCKED`) of sessions with messages the index does not cover, each
        with its user, session, `next_seq`, `from_seq`, open chunk id and columns; the
        transaction's commit then does not wait for its WAL flush (derived writes)."""
        rows = await self.session.execute(
            text(
                "SELECT set_config('synchronous_commit', 'off', true) AS sync,"
                " r.user_id, r.session_id, s.next_seq, r.open_chunk_id,"
                " coalesce((SELECT upper(c) FROM unnest(r.covered) AS c"
                " WHERE c @> CAST(0 AS bigint)), 0) AS from_seq,"
                " o.content, o.content_hash, o.start_seq, o.end_seq, o.started_at,"
                " o.ended_at, o.breadcrumbs"
                " FROM raw_index_state r JOIN sessions s"
                " ON s.id = r.session_id AND s.user_id = r.user_id"
                " LEFT JOIN memory_chunks o ON o.user_id = r.user_id AND o.id = r.open_chunk_id"
                " WHERE (r.user_id, r.session_id) IN (SELECT * FROM"
                " unnest(CAST(:uids AS text[]), CAST(:sids AS uuid[])))"
                f"{self._pin('r.user_id')}"
                " AND NOT r.covered @> int8range(0, s.next_seq)"
                " FOR UPDATE OF r SKIP LOCKED"
            ),
            self._params(**_pairs(keys)),
        )
        return list(rows.all())

    async def unindexed(self, claims: Sequence[Row[Any]], limit: int) -> list[Row[Any]]:
        """Per claimed session, its first `limit` conversation messages (hot and archive)
        from its `from_seq` and below its `next_seq` that the index does not cover, in
        order (`RawIndexRepository.unindexed_messages` for every session at once)."""
        if not claims:
            return []
        one = f"""
            SELECT sequence_number, role, content, name, created_at,
                   is_summary, is_compression FROM {{table}} m
            WHERE m.user_id = k.uid AND m.session_id = k.sid{self._pin("m.user_id")}
              AND m.sequence_number < k.below AND m.sequence_number >= k.from_seq
              AND {CONVERSATION} AND NOT k.covered @> m.sequence_number
        """
        rows = await self.session.execute(
            text(
                "SELECT k.uid AS user_id, k.sid AS session_id, u.* FROM ("
                " SELECT v.uid, v.sid, v.from_seq, v.below, r.covered FROM"
                " unnest(CAST(:uids AS text[]), CAST(:sids AS uuid[]),"
                " CAST(:froms AS bigint[]), CAST(:belows AS bigint[]))"
                " AS v(uid, sid, from_seq, below)"
                " JOIN raw_index_state r ON r.user_id = v.uid AND r.session_id = v.sid"
                f"{self._pin('r.user_id')}) AS k"
                " CROSS JOIN LATERAL (SELECT * FROM ("
                f"{one.format(table='session_messages')} UNION ALL"
                f" {one.format(table='session_messages_archive')}) AS x"
                " ORDER BY sequence_number LIMIT :limit) AS u"
                " ORDER BY k.uid, k.sid, u.sequence_number"
            ),
            self._params(
                uids=[c.user_id for c in claims],
                sids=[c.session_id for c in claims],
                froms=[c.from_seq for c in claims],
                belows=[c.next_seq for c in claims],
                limit=limit,
            ),
        )
        return list(rows.all())

    async def extend(self, grown: Sequence[Extension]) -> set[uuid.UUID]:
        """Grow many open chunks in one statement: each gets
        only its new text, and only onto the text whose hash was read, unless its
        session holds the grown content in another chunk. Returns the ids grown."""
        if not grown:
            return set()
        rows = await self.session.execute(
            text(
                "UPDATE memory_chunks c SET content = c.content || v.suffix,"
                " content_hash = v.hash, end_seq = v.end_seq, started_at = v.started,"
                " ended_at = v.ended, breadcrumbs = ARRAY(SELECT"
                " jsonb_array_elements_text(v.crumbs)), vectors_stale = true,"
                " stale_since = COALESCE(c.stale_since, CAST(:now AS timestamptz))"
                " FROM unnest(CAST(:uids AS text[]), CAST(:sids AS uuid[]),"
                " CAST(:ids AS uuid[]), CAST(:suffixes AS text[]), CAST(:olds AS text[]),"
                " CAST(:hashes AS text[]), CAST(:ends AS bigint[]),"
                " CAST(:starteds AS timestamptz[]), CAST(:endeds AS timestamptz[]),"
                " CAST(:crumbs AS jsonb[]))"
                " AS v(uid, sid, id, suffix, old, hash, end_seq, started, ended, crumbs)"
                " WHERE c.user_id = v.uid AND c.id = v.id AND c.content_hash = v.old"
                f"{self._pin('c.user_id')}"
                " AND NOT EXISTS (SELECT 1 FROM memory_chunks o WHERE o.user_id = v.uid"
                f"{self._pin('o.user_id')}"
                " AND o.session_id = v.sid AND o.content_hash = v.hash)"
                " RETURNING c.id"
            ),
            self._params(
                now=datetime.now(UTC),  # bound: Citus takes no volatile function in COALESCE
                uids=[g.user_id for g in grown],
                sids=[g.session_id for g in grown],
                ids=[g.chunk_id for g in grown],
                suffixes=[g.new.content[len(g.old.content) :] for g in grown],
                olds=[g.old.content_hash for g in grown],
                hashes=[g.new.content_hash for g in grown],
                ends=[g.new.end_seq for g in grown],
                starteds=[g.new.started_at for g in grown],
                endeds=[g.new.ended_at for g in grown],
                crumbs=[_json_list(g.new.breadcrumbs) for g in grown],
            ),
        )
        return {r.id for r in rows}

    async def insert(
        self, chunks: Sequence[tuple[str, uuid.UUID, RawChunk]]
    ) -> dict[tuple[uuid.UUID, str], uuid.UUID]:
        """New chunks of many sessions, without vectors (`vectors_stale`), in one
        multi-row insert; a (session, content hash) already stored is skipped. Returns
        the id of each one written by (session, content hash)."""
        if not chunks:
            return {}
        now = datetime.now(UTC)
        rows = await self.session.execute(
            insert(MemoryChunk)
            .values(
                [
                    {**stale_chunk_row(uuid.uuid4(), session_id, c, now), "user_id": user_id}
                    for user_id, session_id, c in chunks
                ]
            )
            .on_conflict_do_nothing(index_elements=["session_id", "content_hash", "user_id"])
            .returning(MemoryChunk.id, MemoryChunk.session_id, MemoryChunk.content_hash)
        )
        return {(r.session_id, r.content_hash): r.id for r in rows}

    async def cover(self, covers: Sequence[Cover]) -> None:
        """`RawIndexRepository.cover_through(live=True)` for many sessions at once."""
        if not covers:
            return
        await self.session.execute(
            text(
                "UPDATE raw_index_state r SET covered = r.covered"
                " + int8multirange(int8range(NULL, v.last, '(]')),"
                " indexed_at = now(), attempts = 0, last_error = NULL, open_chunk_id = v.open"
                " FROM unnest(CAST(:uids AS text[]), CAST(:sids AS uuid[]),"
                " CAST(:lasts AS bigint[]), CAST(:opens AS uuid[])) AS v(uid, sid, last, open)"
                f" WHERE r.user_id = v.uid AND r.session_id = v.sid{self._pin('r.user_id')}"
            ),
            self._params(
                uids=[c.user_id for c in covers],
                sids=[c.session_id for c in covers],
                lasts=[c.last_seq for c in covers],
                opens=[c.open_chunk for c in covers],
            ),
        )


def _json_list(items: Sequence[str]) -> str:
    return json.dumps(list(items))
