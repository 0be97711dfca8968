"""SQL of `reembed`: the dimension of the vector columns, changing it, and filling vectors.

A maintenance path over every user's rows (like migrations), so unlike the request-path
repositories its methods take no user scope.

* Every `vector` column of the schema follows the configured dimension (the migrations
  create them with it; the models name no dimension), so :meth:`EmbeddingRepository.align_dimensions` changes
  all of them, not only the two it can refill: a column's values become NULL (the rows of
  a NOT NULL column, derived data such as `message_embeddings` and
  `memory_chunk_vectors`, are deleted), and the indexes on it are dropped and re-created
  from their own definitions (`pg_get_indexdef`), so they stay what the migrations made.
* What is left to embed: a live fact whose `embedding` is NULL, a raw chunk without any
  segment vector (`memory_chunk_vectors` row) — a chunk has no vector of its own.
* Rows to embed are claimed in id order after a cursor (keyset: each read is an index
  range scan, never a rescan of the filled rows), in two steps: the candidates `(id,
  user_id)` across every user without a lock, then each user's share locked by its key
  with `FOR UPDATE SKIP LOCKED` (on Citus a locking read must stay on one shard), then
  the filter checked again by a statement of its own, whose snapshot sees what the run
  that held a lock before committed (a chunk's vectors live in another table, which the
  locking statement's re-check of the locked row cannot see). Concurrent runs take
  disjoint rows and never embed one twice; the locks last until the batch's commit.
  Vectors are written by the same key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.lib.sql import vector_literal

#: pg_advisory_xact_lock key of the dimension change ("navi" "reem").
ALIGN_LOCK_KEY = 0x6E617669_7265656D & 0x7FFFFFFFFFFFFFFF


@dataclass(frozen=True)
class VectorColumn:
    table: str
    column: str
    dim: int | None  # None: a `vector` column without a declared dimension
    not_null: bool


@dataclass
class ColumnChange:
    table: str
    column: str
    old_dim: int | None
    indexes: list[str] = field(default_factory=list)
    deleted_rows: int = 0
    cleared_rows: int = 0


def fact_text(category: str, key: str, value: str) -> str:
    """What a fact's vector embeds (the same text the facts service embeds)."""
    return f"{category} {key}: {value}"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_VECTOR_COLUMNS = text(
    """
    SELECT c.relname AS table_name, a.attname AS column_name, a.atttypmod AS typmod,
           a.attnotnull AS not_null
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_type t ON t.oid = a.atttypid
    WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
      AND a.attnum > 0 AND NOT a.attisdropped AND t.typname = 'vector'
    ORDER BY c.relname, a.attnum
    """
)

_COLUMN_INDEXES = text(
    """
    SELECT i.relname AS name, pg_get_indexdef(x.indexrelid) AS definition
    FROM pg_index x
    JOIN pg_class i ON i.oid = x.indexrelid
    JOIN pg_class c ON c.oid = x.indrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = ANY(x.indkey)
    WHERE n.nspname = current_schema() AND c.relname = :table AND a.attname = :column
    ORDER BY i.relname
    """
)

# What each re-embeddable table claims: its text columns, its filter (the rows still
# without vectors) and the SQL type of its id.
_CLAIMS = {
    "memory_facts": (
        "category, key, value",
        "embedding IS NULL AND merged_into IS NULL",
        "bigint",
    ),
    "memory_chunks": (
        "content",
        "NOT EXISTS (SELECT FROM memory_chunk_vectors v"
        " WHERE v.chunk_id = memory_chunks.id AND v.user_id = memory_chunks.user_id)",
        "uuid",
    ),
}


class Claimed(NamedTuple):
    """A row a re-embedding batch holds: its key and the text to embed."""

    id: Any
    user_id: str
    text: str


def _candidates_sql(table: str, after: bool) -> Any:
    """The scan for work across every user, without a lock."""
    _, where, _ = _CLAIMS[table]
    cursor = " AND id > :after" if after else ""  # two statements: each an index range scan
    return text(f"SELECT id, user_id FROM {table} WHERE {where}{cursor} ORDER BY id LIMIT :limit")


def _lock_sql(table: str) -> Any:
    """One user's candidates still without a vector, locked; their ids."""
    _, where, id_type = _CLAIMS[table]
    return text(
        f"SELECT id FROM {table}"
        f" WHERE user_id = :uid AND id = ANY(CAST(:ids AS {id_type}[])) AND {where}"
        f" ORDER BY id FOR UPDATE OF {table} SKIP LOCKED"
    )


def _locked_sql(table: str) -> Any:
    """The locked rows that still need a vector, read by a statement of their own."""
    columns, where, id_type = _CLAIMS[table]
    return text(
        f"SELECT id, user_id, {columns} FROM {table}"
        f" WHERE user_id = :uid AND id = ANY(CAST(:ids AS {id_type}[])) AND {where}"
        " ORDER BY id"
    )


class EmbeddingRepository:
    """All SQL of re-embedding; one instance per transaction."""

    TABLES = tuple(_CLAIMS)

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # ------------------------------------------------------------------ dimensions
    async def vector_columns(self) -> list[VectorColumn]:
        rows = (await self.session.execute(_VECTOR_COLUMNS)).all()
        return [
            VectorColumn(
                table=r.table_name,
                column=r.column_name,
                dim=r.typmod if r.typmod and r.typmod > 0 else None,
                not_null=bool(r.not_null),
            )
            for r in rows
        ]

    async def mismatched_columns(self, dim: int) -> list[VectorColumn]:
        """The vector columns whose dimension is not `dim`."""
        return [c for c in await self.vector_columns() if c.dim != dim]

    async def align_dimensions(self, dim: int) -> list[ColumnChange]:
        """Make every vector column `vector(dim)`; returns what changed (nothing when all
        columns already have `dim` dimensions). Serialised by an advisory lock, so two
        runs at once change the columns once; the caller's commit publishes it."""
        if dim < 1:
            raise ValueError("dim must be positive")
        await self.session.execute(text("SET LOCAL lock_timeout = '30s'"))
        await self.session.execute(
            text("SELECT pg_advisory_xact_lock(:key)"), {"key": ALIGN_LOCK_KEY}
        )
        changes: list[ColumnChange] = []
        for col in await self.mismatched_columns(dim):  # re-read under the lock
            table, column = _ident(col.table), _ident(col.column)
            change = ColumnChange(col.table, col.column, col.dim)
            indexes = (
                await self.session.execute(
                    _COLUMN_INDEXES, {"table": col.table, "column": col.column}
                )
            ).all()
            for index in indexes:
                change.indexes.append(index.name)
                await self.session.execute(text(f"DROP INDEX {_ident(index.name)}"))
            if col.not_null:
                result: Any = await self.session.execute(text(f"DELETE FROM {table}"))
                change.deleted_rows = result.rowcount or 0
            else:
                change.cleared_rows = int(
                    (
                        await self.session.execute(
                            text(f"SELECT count(*) FROM {table} WHERE {column} IS NOT NULL")
                        )
                    ).scalar_one()
                )
            await self.session.execute(
                text(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE vector({dim}) USING NULL")
            )
            for index in indexes:
                await self.session.execute(text(index.definition))
            changes.append(change)
        return changes

    # ------------------------------------------------------------------ filling
    async def count_pending(self, table: str) -> int:
        """What is left to embed, across every user (a maintenance count)."""
        where = _CLAIMS[table][1]
        sql = text(f"SELECT count(*) FROM {table} WHERE {where}")
        return int((await self.session.execute(sql)).scalar_one())

    async def claim(self, table: str, after: Any, limit: int) -> list[Claimed]:
        """Lock up to `limit` rows of `table` without a vector, after the id `after`
        (None = from the start): the first such rows in id order that no other run
        holds. Candidates are read in id order and locked per user until `limit` are
        held or none is left; returned in id order. Facts: live ones only (a fact
        merged into another is hidden)."""
        if table not in _CLAIMS:
            raise ValueError(f"cannot re-embed {table}")
        claimed: list[Claimed] = []
        while len(claimed) < limit:
            want = limit - len(claimed)
            params: dict[str, Any] = {"limit": want}
            if after is not None:
                params["after"] = after
            candidates = (
                await self.session.execute(_candidates_sql(table, after is not None), params)
            ).all()
            if not candidates:
                break
            per_user: dict[str, list[Any]] = {}
            for c in candidates:
                per_user.setdefault(c.user_id, []).append(c.id)
            for user_id, ids in per_user.items():
                params = {"uid": user_id, "ids": ids}
                locked = (await self.session.execute(_lock_sql(table), params)).scalars().all()
                if not locked:
                    continue
                # The filter again, in a new statement: its snapshot is taken after the
                # locks were granted, so it sees whatever a run that held one committed.
                # (The locking statement's own re-check sees only changes to the locked
                # row; a chunk's vectors are rows of another table.)
                params["ids"] = list(locked)
                rows = await self.session.execute(_locked_sql(table), params)
                claimed.extend(_claimed(table, r) for r in rows)
            if len(candidates) < want:
                break
            after = candidates[-1].id
        return sorted(claimed, key=lambda r: r.id)

    async def set_fact_embeddings(self, rows: Sequence[tuple[str, Any, list[float]]]) -> None:
        """Write the vectors of claimed facts, (user, id, vector); facts that got one
        meanwhile are kept."""
        if not rows:
            return
        await self.session.execute(
            text(
                "UPDATE memory_facts SET embedding = CAST(:embedding AS vector) "
                "WHERE user_id = :uid AND id = :id AND embedding IS NULL"
            ),
            [
                {"uid": user_id, "id": key, "embedding": vector_literal(vec)}
                for user_id, key, vec in rows
            ],
        )

    async def replace_chunk_segments(
        self, chunks: Sequence[tuple[str, Any, Sequence[tuple[int, int, list[float]]]]]
    ) -> None:
        """Replace the segment vectors of raw chunks: (user, chunk id, [(start, end,
        vector)]); each statement names the chunk's user."""
        if not chunks:
            return
        per_user: dict[str, list[Any]] = {}
        for user_id, key, _ in chunks:
            per_user.setdefault(user_id, []).append(key)
        for user_id, keys in per_user.items():
            await self.session.execute(
                text(
                    "DELETE FROM memory_chunk_vectors"
                    " WHERE user_id = :uid AND chunk_id = ANY(CAST(:ids AS uuid[]))"
                ),
                {"uid": user_id, "ids": keys},
            )
        rows = [
            {
                "uid": user_id,
                "id": key,
                "part": n,
                "start": a,
                "end": b,
                "embedding": vector_literal(vec),
            }
            for user_id, key, segments in chunks
            for n, (a, b, vec) in enumerate(segments)
        ]
        if rows:
            await self.session.execute(
                text(
                    "INSERT INTO memory_chunk_vectors "
                    "(chunk_id, part, user_id, session_id, start_char, end_char, embedding) "
                    "SELECT id, :part, user_id, session_id, :start, :end, "
                    "CAST(:embedding AS vector) FROM memory_chunks"
                    " WHERE user_id = :uid AND id = :id"
                ),
                rows,
            )


def _claimed(table: str, row: Any) -> Claimed:
    if table == "memory_facts":
        return Claimed(row.id, row.user_id, fact_text(row.category, row.key, row.value))
    return Claimed(row.id, row.user_id, row.content)
