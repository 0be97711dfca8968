"""All SQL of the error memory. Every method takes the owner's user id (but the purge
job's candidate scan, `expired_candidates`); expired rows (`expires_at <= now()`) are
invisible to every read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, bindparam, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models.history import ERROR_TSV
from app.lib.sql import contains_pattern, vector_literal

_COLS = (
    "id, tool, error_text, fix, context, created_at, last_hit_at, expires_at, hit_count, "
    "embedding IS NOT NULL AS embedded"
)
_LIVE = (
    "user_id = :uid AND expires_at > now() "
    "AND (CAST(:tool AS text) IS NULL OR lower(tool) = lower(CAST(:tool AS text)))"
)
_TTL = "now() + make_interval(days => :ttl)"


class ErrorMemoryRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def find_same(self, user_id: str, tool: str, error_text: str) -> int | None:
        """A live entry for the same tool and the same error text (it is then updated)."""
        return (
            await self.session.execute(
                text(
                    f"SELECT id FROM error_memory WHERE {_LIVE} AND error_text = :err "
                    "ORDER BY id DESC LIMIT 1 FOR UPDATE"
                ),
                {"uid": user_id, "tool": tool, "err": error_text},
            )
        ).scalar_one_or_none()

    async def insert(
        self,
        user_id: str,
        tool: str,
        error_text: str,
        fix: str,
        context: str | None,
        embedding: list[float] | None,
        ttl_days: int,
    ) -> Row[Any]:
        stmt = text(
            f"""
            INSERT INTO error_memory (user_id, tool, error_text, fix, context, embedding,
                                      expires_at)
            VALUES (:uid, :tool, :err, :fix, :ctx, CAST(:emb AS vector), {_TTL})
            RETURNING {_COLS}
            """
        )
        return (
            await self.session.execute(
                stmt,
                {
                    "uid": user_id,
                    "tool": tool,
                    "err": error_text,
                    "fix": fix,
                    "ctx": context,
                    "emb": _vec(embedding),
                    "ttl": ttl_days,
                },
            )
        ).one()

    async def update(
        self,
        user_id: str,
        entry_id: int,
        fix: str,
        context: str | None,
        embedding: list[float] | None,
        ttl_days: int,
    ) -> Row[Any]:
        """The newest fix wins; the entry is renewed. A failed embedding keeps the old one."""
        stmt = text(
            f"""
            UPDATE error_memory SET fix = :fix, context = coalesce(:ctx, context),
                   embedding = coalesce(CAST(:emb AS vector), embedding), expires_at = {_TTL}
            WHERE user_id = :uid AND id = :id
            RETURNING {_COLS}
            """
        )
        return (
            await self.session.execute(
                stmt,
                {
                    "uid": user_id,
                    "id": entry_id,
                    "fix": fix,
                    "ctx": context,
                    "emb": _vec(embedding),
                    "ttl": ttl_days,
                },
            )
        ).one()

    async def search_text(
        self, user_id: str, query: str, terms: Sequence[str], tool: str | None, limit: int
    ) -> list[int]:
        """Ids by full text — any of the query's terms, ranked by how well they cover it
        (GIN index on error_text || fix) — then literal substring matches of the whole
        query, newest first."""
        ids: list[int] = []
        if terms:
            stmt = text(
                f"""
                WITH q AS (SELECT to_tsquery('simple', :tsq) AS tsq)
                SELECT id FROM error_memory
                WHERE {_LIVE} AND {ERROR_TSV} @@ (SELECT tsq FROM q)
                ORDER BY ts_rank_cd({ERROR_TSV}, (SELECT tsq FROM q)) DESC, id DESC
                LIMIT :limit
                """
            )
            rows = await self.session.execute(
                stmt,
                {"uid": user_id, "tool": tool, "tsq": " | ".join(terms), "limit": limit},
            )
            ids = [int(r) for r in rows.scalars()]
        if len(ids) < limit and query.strip():
            stmt = text(
                f"""
                SELECT id FROM error_memory
                WHERE {_LIVE} AND NOT (id = ANY(:found))
                  AND (error_text ILIKE :p ESCAPE '\\' OR fix ILIKE :p ESCAPE '\\'
                       OR tool ILIKE :p ESCAPE '\\')
                ORDER BY id DESC LIMIT :limit
                """
            ).bindparams(bindparam("found", type_=None))
            rows = await self.session.execute(
                stmt,
                {
                    "uid": user_id,
                    "tool": tool,
                    "found": ids,
                    "p": contains_pattern(query.strip()),
                    "limit": limit - len(ids),
                },
            )
            ids += [int(r) for r in rows.scalars()]
        return ids

    async def search_vector(
        self,
        user_id: str,
        vector: list[float],
        tool: str | None,
        limit: int,
        max_distance: float,
    ) -> list[tuple[int, float]]:
        # Filtered HNSW scans keep looking until `limit` rows pass the filter (pgvector 0.8).
        await self.session.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))
        stmt = text(
            f"""
            SELECT id, embedding <=> CAST(:vec AS vector) AS distance FROM error_memory
            WHERE {_LIVE} AND embedding IS NOT NULL
            ORDER BY embedding <=> CAST(:vec AS vector)
            LIMIT :limit
            """
        )
        rows = await self.session.execute(
            stmt, {"uid": user_id, "tool": tool, "vec": _vec(vector), "limit": limit}
        )
        return [(int(r.id), float(r.distance)) for r in rows if r.distance < max_distance]

    async def recent(self, user_id: str, tool: str | None, limit: int) -> list[int]:
        rows = await self.session.execute(
            text(
                f"SELECT id FROM error_memory WHERE {_LIVE} "
                "ORDER BY coalesce(last_hit_at, created_at) DESC, id DESC LIMIT :limit"
            ),
            {"uid": user_id, "tool": tool, "limit": limit},
        )
        return [int(r) for r in rows.scalars()]

    async def list_live(self, user_id: str, limit: int, offset: int) -> tuple[list[Row[Any]], int]:
        """A page of the user's live entries, most recently used first, and how many
        there are. A read only: unlike a search it renews nothing."""
        params = {"uid": user_id, "tool": None, "limit": limit, "offset": offset}
        total = (
            await self.session.execute(
                text(f"SELECT count(*) FROM error_memory WHERE {_LIVE}"), params
            )
        ).scalar_one()
        rows = await self.session.execute(
            text(
                f"SELECT {_COLS} FROM error_memory WHERE {_LIVE} "
                "ORDER BY coalesce(last_hit_at, created_at) DESC, id DESC "
                "LIMIT :limit OFFSET :offset"
            ),
            params,
        )
        return list(rows.all()), int(total)

    async def renew(self, user_id: str, ids: Sequence[int], ttl_days: int) -> list[Row[Any]]:
        """A hit: expires_at = now() + TTL, hit_count + 1, last_hit_at = now(). Returns
        the renewed rows (live ones only)."""
        if not ids:
            return []
        stmt = text(
            f"""
            UPDATE error_memory
            SET expires_at = {_TTL}, hit_count = hit_count + 1, last_hit_at = now()
            WHERE user_id = :uid AND id = ANY(:ids) AND expires_at > now()
            RETURNING {_COLS}
            """
        ).bindparams(bindparam("ids", type_=None))
        rows = await self.session.execute(
            stmt, {"uid": user_id, "ids": [int(i) for i in ids], "ttl": ttl_days}
        )
        return list(rows.all())

    async def expired_candidates(self, batch: int) -> list[tuple[str, int]]:
        """(user, id) of up to `batch` expired rows, soonest expired first: the purge
        job's scan across every user, read without a lock."""
        rows = await self.session.execute(
            text(
                "SELECT user_id, id FROM error_memory WHERE expires_at <= now() "
                "ORDER BY expires_at, id LIMIT :batch"
            ),
            {"batch": batch},
        )
        return [(r.user_id, int(r.id)) for r in rows]

    async def delete_expired(self, user_id: str, ids: Sequence[int]) -> int:
        """Delete those of the user's rows `ids` that are still expired. SKIP LOCKED:
        replicas purging at the same time take disjoint rows instead of waiting on each
        other (and a row being renewed is left alone)."""
        result = await self.session.execute(
            text(
                """
                DELETE FROM error_memory WHERE user_id = :uid AND id IN (
                    SELECT id FROM error_memory
                    WHERE user_id = :uid AND id = ANY(:ids) AND expires_at <= now()
                    FOR UPDATE SKIP LOCKED
                )
                """
            ).bindparams(bindparam("ids", type_=None)),
            {"uid": user_id, "ids": [int(i) for i in ids]},
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def purge_expired(self, batch: int) -> int:
        """Delete up to `batch` expired rows, in two steps so that every lock is one
        user's (on Citus a locking read must stay on one shard): the candidates across
        users without a lock (`expired_candidates`), then each user's share deleted by
        its key (`delete_expired`)."""
        per_user: dict[str, list[int]] = {}
        for user_id, entry_id in await self.expired_candidates(batch):
            per_user.setdefault(user_id, []).append(entry_id)
        deleted = 0
        for user_id, ids in per_user.items():
            deleted += await self.delete_expired(user_id, ids)
        return deleted


def _vec(vector: list[float] | None) -> str | None:
    """pgvector's text form; NULL stays NULL."""
    return None if vector is None else vector_literal(vector)
