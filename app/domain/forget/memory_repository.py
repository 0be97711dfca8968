"""The SQL of forgetting, for the memory stores: raw chunks (and their segment vectors),
facts, the memory summary, scratchpad sections, error memory. Same shape as
`repositories.py`: `find_*` returns the redaction's changes, `write_*` applies them,
every statement scoped by `user_id = :uid`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.forget.redact import Needle, redact_text
from app.domain.kernel.repositories import ChunkCountRepository
from app.domain.raw_history.chunk_writer_repository import ChunkWriter
from app.domain.raw_history.chunks import content_hash
from app.domain.raw_history.indexer import Segments
from app.lib.sql import vector_literal

MAX_TOOL = 200  # error_memory.tool is varchar(200): the marker is longer than some texts


@dataclass(frozen=True)
class ChunkChange:
    id: uuid.UUID
    session_id: uuid.UUID
    content: str
    breadcrumbs: list[str]

    @property
    def content_hash(self) -> str:
        return content_hash(self.content)

    @property
    def distinct_hash(self) -> str:
        """A hash for a chunk whose redacted content is another chunk's of the session
        (the pair is unique): the content's, salted with the chunk's id. Only new chunks
        are compared by hash, and their turns are never this chunk's (`covered`)."""
        return content_hash(f"{self.content}\x00{self.id}")


@dataclass(frozen=True)
class TextChange:
    """One text column of a row known by its id (a sketch's value, the summary)."""

    id: uuid.UUID | str
    value: str


@dataclass(frozen=True)
class ErrorChange:
    id: int
    tool: str
    error_text: str
    fix: str
    context: str | None


class ForgetMemoryRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # ------------------------------------------------------------------ raw chunks
    async def find_chunks(
        self, user_id: str, sids: Sequence[uuid.UUID] | None, needle: Needle
    ) -> list[ChunkChange]:
        """The chunks of these sessions; with `sids` None, those of no session of the
        user (chunks have no foreign key to their session, by design: docs/memory.md)."""
        where = (
            "session_id = ANY(:sids)"
            if sids is not None
            else "NOT EXISTS (SELECT 1 FROM sessions s WHERE s.user_id = memory_chunks.user_id"
            " AND s.id = memory_chunks.session_id)"
        )
        rows = await self.session.execute(
            text(
                "SELECT id, session_id, content, breadcrumbs FROM memory_chunks WHERE user_id = :uid"
                f" AND {where} AND (content ILIKE :like"
                " OR EXISTS (SELECT 1 FROM unnest(breadcrumbs) b WHERE b ILIKE :like))"
            ),
            {"uid": user_id, "sids": list(sids or ()), "like": needle.like},
        )
        out = []
        for r in rows:
            crumbs = list(r.breadcrumbs or [])
            change = ChunkChange(
                r.id,
                r.session_id,
                redact_text(needle, r.content) or "",
                [redact_text(needle, b) or "" for b in crumbs],
            )
            if (change.content, change.breadcrumbs) != (r.content, crumbs):
                out.append(change)
        return out

    async def write_chunks(self, user_id: str, changes: Sequence[ChunkChange]) -> None:
        """Rewrite the chunks (their search terms follow: a generated column), delete
        their segment vectors — no vector of the old text may match a search — and mark
        them `vectors_stale` (the live indexer's background embedder embeds them unless
        `write_segments` does first), and give the user's chunks a new version, so the
        raw search's per-process memory of their terms is dropped."""
        if not changes:
            return
        hashes = await self._hashes(user_id, changes)
        now = datetime.now(UTC)
        await self.session.execute(
            text(
                "UPDATE memory_chunks SET content = :content, breadcrumbs = CAST(:crumbs AS text[]),"
                " content_hash = :hash, vectors_stale = true,"
                " stale_since = COALESCE(stale_since, CAST(:now AS timestamptz))"
                " WHERE id = :id AND user_id = :uid"
            ),
            [
                {
                    "id": c.id,
                    "uid": user_id,
                    "content": c.content,
                    "crumbs": c.breadcrumbs,
                    "hash": hashes[c.id],
                    "now": now,  # bound: Citus takes no volatile function in a COALESCE
                }
                for c in changes
            ],
        )
        await self.session.execute(
            text("DELETE FROM memory_chunk_vectors WHERE user_id = :uid AND chunk_id = ANY(:ids)"),
            {"uid": user_id, "ids": [c.id for c in changes]},
        )
        await ChunkCountRepository(self.session).touch(user_id)

    async def _hashes(self, user_id: str, changes: Sequence[ChunkChange]) -> dict[uuid.UUID, str]:
        """Each changed chunk's new `content_hash`, distinct within its session from the
        other chunks' (unchanged ones, and the other changes)."""
        rows = await self.session.execute(
            text(
                "SELECT session_id, content_hash FROM memory_chunks WHERE user_id = :uid"
                " AND content_hash = ANY(:hashes) AND NOT id = ANY(:ids)"
            ),
            {
                "uid": user_id,
                "hashes": [c.content_hash for c in changes],
                "ids": [c.id for c in changes],
            },
        )
        taken = {(r.session_id, r.content_hash) for r in rows}
        out = {}
        for c in changes:
            h = c.content_hash
            if (c.session_id, h) in taken:
                h = c.distinct_hash
            taken.add((c.session_id, h))
            out[c.id] = h
        return out

    async def write_segments(
        self, user_id: str, changes: Sequence[ChunkChange], segments: Sequence[Segments]
    ) -> None:
        """The rewritten chunks' new segment vectors (none for a chunk the embedder
        failed: it stays stale, for the background embedder or `make reembed`)."""
        writer = ChunkWriter(self.session)
        done = []
        for c, segs in zip(changes, segments, strict=True):
            rows = [(c.id, n, a, b, e) for n, (a, b, e) in enumerate(segs)]
            await writer.add_segments(user_id, c.session_id, rows)
            if segs:
                done.append(c.id)
        if done:
            await self.session.execute(
                text(
                    "UPDATE memory_chunks SET vectors_stale = false, stale_since = NULL"
                    " WHERE user_id = :uid AND id = ANY(:ids)"
                ),
                {"uid": user_id, "ids": done},
            )

    # ------------------------------------------------------------------ facts
    async def find_facts(self, user_id: str, needle: Needle) -> list[int]:
        """The facts holding the text in any column, then the rows hidden behind them
        (deleted with them, docs/memory.md: none may resurface)."""
        rows = await self.session.execute(
            text(
                "SELECT id FROM memory_facts WHERE user_id = :uid AND (category ILIKE :like"
                " OR key ILIKE :like OR value ILIKE :like OR source_context ILIKE :like)"
            ),
            {"uid": user_id, "like": needle.like},
        )
        ids = list(rows.scalars())
        if not ids:
            return []
        hidden = await self.session.execute(
            text(
                "SELECT id FROM memory_facts WHERE user_id = :uid AND merged_into = ANY(:ids)"
                " AND NOT id = ANY(:ids)"
            ),
            {"uid": user_id, "ids": ids},
        )
        return [*hidden.scalars(), *ids]

    async def delete_facts(self, user_id: str, ids: Sequence[int]) -> None:
        """Hidden rows first (the foreign key would cascade anyway; explicit, as
        `FactRepository.delete_by_key` does)."""
        if not ids:
            return
        params = {"uid": user_id, "ids": list(ids)}
        await self.session.execute(
            text(
                "DELETE FROM memory_facts WHERE user_id = :uid AND id = ANY(:ids)"
                " AND merged_into IS NOT NULL"
            ),
            params,
        )
        await self.session.execute(
            text("DELETE FROM memory_facts WHERE user_id = :uid AND id = ANY(:ids)"), params
        )

    async def find_fact_versions(
        self, user_id: str, needle: Needle, fact_ids: Sequence[int]
    ) -> list[int]:
        """The versions holding the text, and every version of the facts deleted for it
        (`fact_ids`): forget means gone, the history included."""
        rows = await self.session.execute(
            text(
                "SELECT id FROM fact_versions WHERE user_id = :uid AND (fact_id = ANY(:fids)"
                " OR category ILIKE :like OR key ILIKE :like OR value ILIKE :like)"
            ),
            {"uid": user_id, "fids": list(fact_ids), "like": needle.like},
        )
        return list(rows.scalars())

    async def delete_fact_versions(self, user_id: str, ids: Sequence[int]) -> None:
        if ids:
            await self.session.execute(
                text("DELETE FROM fact_versions WHERE user_id = :uid AND id = ANY(:ids)"),
                {"uid": user_id, "ids": list(ids)},
            )

    # ------------------------------------------------------------------ summary, sketches
    async def find_summary(self, user_id: str, needle: Needle) -> TextChange | None:
        content = (
            await self.session.execute(
                text(
                    "SELECT content FROM memory_summary WHERE user_id = :uid"
                    " AND content ILIKE :like"
                ),
                {"uid": user_id, "like": needle.like},
            )
        ).scalar_one_or_none()
        redacted = redact_text(needle, content)
        return (
            TextChange(user_id, redacted) if redacted is not None and redacted != content else None
        )

    async def write_summary(self, user_id: str, change: TextChange | None) -> None:
        if change is not None:
            await self.session.execute(
                text("UPDATE memory_summary SET content = :c WHERE user_id = :uid"),
                {"uid": user_id, "c": change.value},
            )

    async def find_sketches(self, user_id: str, needle: Needle) -> list[TextChange]:
        rows = await self.session.execute(
            text("SELECT id, value FROM kv_store WHERE user_id = :uid AND value ILIKE :like"),
            {"uid": user_id, "like": needle.like},
        )
        out = []
        for r in rows:
            value = redact_text(needle, r.value) or ""
            if value != r.value:
                out.append(TextChange(r.id, value))
        return out

    async def write_sketches(self, user_id: str, changes: Sequence[TextChange]) -> None:
        if changes:
            await self.session.execute(
                text(
                    "UPDATE kv_store SET value = :v, updated_at = now()"
                    " WHERE id = :id AND user_id = :uid"
                ),
                [{"id": c.id, "uid": user_id, "v": c.value} for c in changes],
            )

    # ------------------------------------------------------------------ error memory
    async def find_errors(self, user_id: str, needle: Needle) -> list[ErrorChange]:
        rows = await self.session.execute(
            text(
                "SELECT id, tool, error_text, fix, context FROM error_memory WHERE user_id = :uid"
                " AND (tool ILIKE :like OR error_text ILIKE :like OR fix ILIKE :like"
                " OR context ILIKE :like)"
            ),
            {"uid": user_id, "like": needle.like},
        )
        out = []
        for r in rows:
            change = ErrorChange(
                r.id,
                (redact_text(needle, r.tool) or "")[:MAX_TOOL],
                redact_text(needle, r.error_text) or "",
                redact_text(needle, r.fix) or "",
                redact_text(needle, r.context),
            )
            if (change.tool, change.error_text, change.fix, change.context) != (
                r.tool,
                r.error_text,
                r.fix,
                r.context,
            ):
                out.append(change)
        return out

    async def write_errors(
        self,
        user_id: str,
        changes: Sequence[ErrorChange],
        vectors: Sequence[list[float] | None],
    ) -> None:
        """The redacted entries with their new vectors (None: left for a later write)."""
        if not changes:
            return
        await self.session.execute(
            text(
                "UPDATE error_memory SET tool = :tool, error_text = :err, fix = :fix,"
                " context = :ctx, embedding = CAST(:emb AS vector)"
                " WHERE id = :id AND user_id = :uid"
            ),
            [
                {
                    "id": c.id,
                    "uid": user_id,
                    "tool": c.tool,
                    "err": c.error_text,
                    "fix": c.fix,
                    "ctx": c.context,
                    "emb": vector_literal(v) if v is not None else None,
                }
                for c, v in zip(changes, vectors, strict=True)
            ],
        )

    async def write_error_vectors(
        self,
        user_id: str,
        changes: Sequence[ErrorChange],
        vectors: Sequence[list[float] | None],
    ) -> None:
        """The redacted entries' new vectors, written after their text committed (the
        model is never called under a row lock); an entry changed meanwhile is left."""
        rows = [
            {"id": c.id, "uid": user_id, "err": c.error_text, "emb": vector_literal(v)}
            for c, v in zip(changes, vectors, strict=True)
            if v is not None
        ]
        if rows:
            await self.session.execute(
                text(
                    "UPDATE error_memory SET embedding = CAST(:emb AS vector)"
                    " WHERE id = :id AND user_id = :uid AND error_text = :err"
                ),
                rows,
            )

    async def user_exists(self, user_id: str) -> bool:
        found = await self.session.execute(
            text("SELECT 1 FROM navi_users WHERE id = :uid"), {"uid": user_id}
        )
        return found.scalar_one_or_none() is not None
