"""SQL of the embeddings backfill (`backfill.py`): live facts without a vector.

The backfill works for every user: its count and its candidates are read across users
without a lock (the job's scan); each candidate is then locked, and written, by its key
`(user_id, id)` — one user per locking statement, which on Citus routes to one shard.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import MemoryFact
from app.domain.facts.repositories import live


class Unembedded(NamedTuple):
    """A fact the backfill holds: its key and the text its vector embeds."""

    id: int
    user_id: str
    category: str
    key: str
    value: str


class PackedVector:
    """A vector in pgvector's binary wire format (`vector_recv`: int16 dimension, int16
    zero, then big-endian float4 values), sent as a binary parameter. The text format
    costs a `repr` per float in Python — ~0.3–0.8 ms a 768-d vector, the largest CPU cost
    of the backfill's own loop; packing is ~10 µs. Values are rounded to float4 either
    way (the column's precision)."""

    __slots__ = ("data",)

    def __init__(self, values: Sequence[float]) -> None:
        self.data = struct.pack(f">HH{len(values)}f", len(values), 0, *values)


class _PackedVectorDumper(Dumper):
    format = Format.BINARY  # oid 0: the server infers `vector` from the column it sets

    def dump(self, obj: Any) -> bytes:
        return bytes(obj.data)


# psycopg copies its global adapters into each connection it opens: registered once here,
# every connection of the process dumps `PackedVector` in binary.
psycopg.adapters.register_dumper(PackedVector, _PackedVectorDumper)


_SET_EMBEDDING = text(
    "UPDATE memory_facts SET embedding = :vec WHERE user_id = :uid AND id = :fact_id"
)


class BackfillRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def count_unembedded(self) -> int:
        stmt = (
            select(func.count())
            .select_from(MemoryFact)
            .where(MemoryFact.embedding.is_(None), live())
        )
        return int((await self.session.execute(stmt)).scalar_one())

    async def unembedded_candidates(self, after: int | None, limit: int) -> list[tuple[str, int]]:
        """(user, id) of up to `limit` live facts without a vector past the id `after`, in
        id order, read without a lock (across every user: the backfill's scan)."""
        stmt = select(MemoryFact.user_id, MemoryFact.id).where(
            MemoryFact.embedding.is_(None), live()
        )
        if after is not None:
            stmt = stmt.where(MemoryFact.id > after)
        rows = await self.session.execute(stmt.order_by(MemoryFact.id).limit(limit))
        return [(r.user_id, r.id) for r in rows]

    async def lock_unembedded(self, user_id: str, ids: Sequence[int]) -> list[Unembedded]:
        """Lock those of the user's facts `ids` that are still live and without a vector,
        for this transaction; rows another backfill holds are skipped, not waited for."""
        stmt = (
            select(
                MemoryFact.id,
                MemoryFact.user_id,
                MemoryFact.category,
                MemoryFact.key,
                MemoryFact.value,
            )
            .where(
                MemoryFact.user_id == user_id,
                MemoryFact.id.in_(list(ids)),
                MemoryFact.embedding.is_(None),
                live(),
            )
            .order_by(MemoryFact.id)
            .with_for_update(skip_locked=True)
        )
        rows = await self.session.execute(stmt)
        return [Unembedded(r.id, r.user_id, r.category, r.key, r.value) for r in rows]

    async def claim_unembedded(self, limit: int) -> list[Unembedded]:
        """Up to `limit` live facts without a vector, the first in id order that no other
        backfill holds, locked for this transaction (held rows are skipped, not waited
        for). Candidates are read in id order (`unembedded_candidates`) and locked per
        user (`lock_unembedded`) until `limit` are held or none is left."""
        claimed: list[Unembedded] = []
        after: int | None = None
        while len(claimed) < limit:
            want = limit - len(claimed)
            candidates = await self.unembedded_candidates(after, want)
            if not candidates:
                break
            per_user: dict[str, list[int]] = {}
            for user_id, fact_id in candidates:
                per_user.setdefault(user_id, []).append(fact_id)
            for user_id, ids in per_user.items():
                claimed.extend(await self.lock_unembedded(user_id, ids))
            if len(candidates) < want:
                break
            after = candidates[-1][1]
        return sorted(claimed, key=lambda r: r.id)

    async def set_embeddings(self, vectors: Sequence[tuple[str, int, Sequence[float]]]) -> None:
        """Write the vectors of claimed facts: (user, fact id, vector) — one UPDATE by the
        key `(user_id, id)` per fact, sent as one pipelined executemany, each vector in
        pgvector's binary format (`PackedVector`)."""
        if not vectors:
            return
        await self.session.execute(
            _SET_EMBEDDING,
            [{"uid": uid, "fact_id": fid, "vec": PackedVector(vec)} for uid, fid, vec in vectors],
        )
