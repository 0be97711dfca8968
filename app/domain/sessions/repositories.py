"""All SQL of sessions and messages.

Sequence numbers and display positions are assigned under the session row's lock (one
UPDATE … RETURNING), so concurrent appends never collide and never leave gaps. The display
position of a message is stored when it is appended, so "which positions match" is a
lookup, not a numbering of the whole history at read time.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, bindparam, delete, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.base import TRIGRAM_INDEX_PREFIX
from app.db.models import MemoryChunk, Message, MessageArchive, Session
from app.domain.sessions.access import Viewer
from app.lib.sql import contains_pattern

MESSAGE_COLUMNS = [c.name for c in Message.__table__.columns if c.name != "id"]
_COLS_SQL = ", ".join(f'"{c}"' for c in MESSAGE_COLUMNS)

SORT_COLUMNS = {
    "last_active": Session.last_active,
    "created_at": Session.created_at,
    "name": Session.name,
}


def _visible(viewer: Viewer):  # type: ignore[no-untyped-def]
    return True if viewer.all_users else Session.user_id == viewer.user_id


# Per database (URL): does session_messages.content have its trigram index? Probed once per
# process: the index appears with pg_trgm at start-up (app.db.extensions), not mid-run.
_TRIGRAM_INDEXED: dict[str, bool] = {}
_TRIGRAM_INDEX = f"{TRIGRAM_INDEX_PREFIX}session_messages_content"


class SessionRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # ---------------------------------------------------------------- sessions
    async def create(self, profile_id: str, user_id: str | None, name: str | None) -> Session:
        row = Session(profile_id=profile_id, user_id=user_id, name=name)
        self.session.add(row)
        await self.session.flush()
        await self.session.refresh(row)
        return row

    async def get(self, session_id: uuid.UUID, viewer: Viewer) -> Session | None:
        return (
            await self.session.execute(
                select(Session).where(Session.id == session_id, _visible(viewer))
            )
        ).scalar_one_or_none()

    async def lock(self, session_id: uuid.UUID, viewer: Viewer) -> Session | None:
        """The session row, locked for the rest of the transaction."""
        return (
            await self.session.execute(
                select(Session)
                .where(Session.id == session_id, _visible(viewer))
                .with_for_update()
                .execution_options(populate_existing=True)
            )
        ).scalar_one_or_none()

    async def update_fields(self, session_id: uuid.UUID, viewer: Viewer, **values: Any) -> bool:
        result = await self.session.execute(
            update(Session).where(Session.id == session_id, _visible(viewer)).values(**values)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def delete(self, session_id: uuid.UUID, viewer: Viewer) -> bool:
        """Delete the session; messages, archive, shares, state and sketches cascade.

        Raw chunks have no FK (by design) and are deleted here explicitly.
        """
        result = await self.session.execute(
            delete(Session).where(Session.id == session_id, _visible(viewer))
        )
        if not result.rowcount:  # type: ignore[attr-defined]
            return False
        await self.session.execute(delete(MemoryChunk).where(MemoryChunk.session_id == session_id))
        return True

    async def count_summaries(
        self, viewer: Viewer, *, profile_id: str | None = None, search: str | None = None
    ) -> int:
        stmt = select(func.count()).select_from(Session).where(_visible(viewer))
        per_session = await self._per_session_search(viewer, search)
        stmt = self._filters(stmt, profile_id, search, per_session=per_session)
        return (await self.session.execute(stmt)).scalar_one()

    async def _per_session_search(self, viewer: Viewer, search: str | None) -> bool:
        """Whether a search must probe session by session (see `_filters`): one user's
        list on a database whose messages have no trigram index."""
        if not search or viewer.all_users:
            return False
        key = str(self.session.get_bind().engine.url)
        if key not in _TRIGRAM_INDEXED:
            found = await self.session.execute(
                text("SELECT to_regclass(:name) IS NOT NULL"), {"name": _TRIGRAM_INDEX}
            )
            _TRIGRAM_INDEXED[key] = bool(found.scalar())
        return not _TRIGRAM_INDEXED[key]

    @staticmethod
    def _filters(  # type: ignore[no-untyped-def]
        stmt, profile_id: str | None, search: str | None, *, per_session: bool
    ):
        """`per_session`: probe each candidate session's own rows (the EXISTS stops at its
        first hit), so one user's search reads that user's messages only. Without a
        trigram index PostgreSQL may otherwise turn the EXISTS into a hashed subplan over
        every message: a whole-table ILIKE scan (a rare term at 400 MB: ~4.4 s of CPU
        instead of ~0.3 s for the user's own rows). `OFFSET 0` is PostgreSQL's documented
        fence against that rewrite. With the trigram index the planner's own choice is the
        better one (a hashed trigram bitmap for a rare term, ~10 ms, against ~85 ms of
        per-session scans; per-session probes for a common term either way), and the
        all-users view always keeps it. Figures: docs/performance.md."""
        if profile_id is not None:
            stmt = stmt.where(Session.profile_id == profile_id)
        if search:
            pattern = contains_pattern(search)
            hot = select(1).where(
                Message.session_id == Session.id,
                Message.display_index.is_not(None),
                Message.content.ilike(pattern, escape="\\"),
            )
            cold = select(1).where(
                MessageArchive.session_id == Session.id,
                MessageArchive.display_index.is_not(None),
                MessageArchive.content.ilike(pattern, escape="\\"),
            )
            if per_session:
                hot, cold = hot.offset(0), cold.offset(0)
            stmt = stmt.where(hot.exists() | cold.exists())
        return stmt

    async def list_summaries(
        self,
        viewer: Viewer,
        *,
        limit: int,
        offset: int,
        profile_id: str | None = None,
        search: str | None = None,
        sort_by: str = "last_active",
        sort_order: str = "desc",
    ) -> Sequence[Row[Any]]:
        """Sidebar rows: pinned first, then the chosen order. Histories are never loaded:
        the display count is a column kept on append, the preview one index lookup."""
        preview = (
            select(func.left(Message.content, 160))
            .where(Message.session_id == Session.id, Message.display_index.is_not(None))
            .order_by(Message.display_index.desc())
            .limit(1)
            .scalar_subquery()
        )
        col = SORT_COLUMNS[sort_by]
        order = col.asc().nulls_last() if sort_order == "asc" else col.desc().nulls_last()
        stmt = select(
            Session.id,
            Session.profile_id,
            Session.user_id,
            Session.name,
            Session.pinned,
            Session.created_at,
            Session.last_active,
            Session.next_display_index.label("display_message_count"),
            preview.label("preview"),
        ).where(_visible(viewer))
        per_session = await self._per_session_search(viewer, search)
        stmt = self._filters(stmt, profile_id, search, per_session=per_session)
        stmt = stmt.order_by(Session.pinned.desc(), order, Session.id).limit(limit).offset(offset)
        return (await self.session.execute(stmt)).all()

    async def append_planning_log(
        self, session_id: uuid.UUID, viewer: Viewer, entry: dict[str, Any], keep: int
    ) -> bool:
        # Append, keeping the newest `keep` entries.
        stmt = text(
            """
            UPDATE sessions SET planning_logs = (
                SELECT coalesce(jsonb_agg(e ORDER BY i), '[]'::jsonb) FROM (
                    SELECT e, i FROM jsonb_array_elements(planning_logs || jsonb_build_array(
                        CAST(:entry AS jsonb))) WITH ORDINALITY AS t(e, i)
                    ORDER BY i DESC LIMIT :keep
                ) kept
            )
            WHERE id = :id AND (:all_users OR user_id = :uid)
            """
        )
        import json

        result = await self.session.execute(
            stmt,
            {
                "entry": json.dumps(entry),
                "keep": keep,
                "id": session_id,
                "all_users": viewer.all_users,
                "uid": viewer.user_id,
            },
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    # ---------------------------------------------------------------- messages
    async def reserve(
        self, session_id: uuid.UUID, viewer: Viewer, n_total: int, n_display: int
    ) -> tuple[int, int] | None:
        """Reserve `n_total` sequence numbers and `n_display` display positions.

        One UPDATE takes the session row lock until commit, so concurrent appends to one
        session serialise here and get disjoint, gap-free ranges. Returns the first
        sequence number and display position, or None when the session is not visible.
        """
        stmt = (
            update(Session)
            .where(Session.id == session_id, _visible(viewer))
            .values(
                next_seq=Session.next_seq + n_total,
                next_display_index=Session.next_display_index + n_display,
                last_active=func.now(),
            )
            .returning(Session.next_seq - n_total, Session.next_display_index - n_display)
        )
        row = (await self.session.execute(stmt)).first()
        return (int(row[0]), int(row[1])) if row else None

    async def insert_messages(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            await self.session.execute(insert(Message), rows)

    async def history_page(
        self, session_id: uuid.UUID, before_seq: int | None, limit: int
    ) -> list[tuple[Message | MessageArchive, bool]]:
        """Display messages with sequence_number < before_seq, newest first, hot and
        archived alike. Returns (row, archived) pairs."""
        bound = before_seq if before_seq is not None else 2**62
        out: list[tuple[Message | MessageArchive, bool]] = []
        models: tuple[tuple[type[Message] | type[MessageArchive], bool], ...] = (
            (Message, False),
            (MessageArchive, True),
        )
        for model, archived in models:
            rows = await self.session.execute(
                select(model)
                .where(
                    model.session_id == session_id,
                    model.display_index.is_not(None),
                    model.sequence_number < bound,
                )
                .order_by(model.sequence_number.desc())
                .limit(limit)
            )
            out.extend((r, archived) for r in rows.scalars())  # type: ignore[misc]
            if not archived and len(out) >= limit:
                break  # the archive holds only older rows: nothing there can be newer
        out.sort(key=lambda p: p[0].sequence_number, reverse=True)
        return out[:limit]

    async def context_messages(self, session_id: uuid.UUID) -> list[Message]:
        """Rows flagged is_context, in order (the LLM context is rebuilt from these)."""
        rows = await self.session.execute(
            select(Message)
            .where(Message.session_id == session_id, Message.is_context.is_(True))
            .order_by(Message.sequence_number)
        )
        return list(rows.scalars())

    async def all_messages(self, session_id: uuid.UUID) -> list[Message]:
        rows = await self.session.execute(
            select(Message)
            .where(Message.session_id == session_id)
            .order_by(Message.sequence_number)
        )
        return list(rows.scalars())

    async def set_context_flag(
        self, session_id: uuid.UUID, sequence_numbers: Sequence[int], flag: bool
    ) -> int:
        """The narrow update by sequence number. It deliberately does not filter on
        is_display: context-only rows (old summaries) must be demoted too."""
        if not sequence_numbers:
            return 0
        result = await self.session.execute(
            update(Message)
            .where(
                Message.session_id == session_id,
                Message.sequence_number.in_(list(sequence_numbers)),
            )
            .values(is_context=flag)
            # Loaded rows are not synchronised: "evaluate" re-checks the IN list against
            # every loaded row (~1 s for a 2,000-row context). Readers select by is_context
            # in SQL, so a stale in-memory flag on a demoted row is never looked at.
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def archive_old_messages(self, session_id: uuid.UUID, threshold: int) -> int:
        """Move rows with sequence_number < threshold to the archive, in one statement.

        Rows still in the LLM context stay hot whatever their age: the context is read from
        the hot table only.
        """
        result = await self.session.execute(
            text(
                f"""
                WITH moved AS (
                    DELETE FROM session_messages
                    WHERE session_id = :sid AND sequence_number < :threshold AND NOT is_context
                    RETURNING {_COLS_SQL}
                )
                INSERT INTO session_messages_archive ({_COLS_SQL})
                SELECT {_COLS_SQL} FROM moved
                """
            ),
            {"sid": session_id, "threshold": threshold},
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def get_archived_messages(
        self, session_id: uuid.UUID, *, before_seq: int | None, limit: int
    ) -> list[MessageArchive]:
        stmt = select(MessageArchive).where(MessageArchive.session_id == session_id)
        if before_seq is not None:
            stmt = stmt.where(MessageArchive.sequence_number < before_seq)
        rows = await self.session.execute(
            stmt.order_by(MessageArchive.sequence_number.desc()).limit(limit)
        )
        return list(rows.scalars())

    async def hot_message_count(self, session_id: uuid.UUID) -> int:
        return (
            await self.session.execute(select(func.count()).where(Message.session_id == session_id))
        ).scalar_one()

    async def search_matches(
        self, session_ids: Sequence[uuid.UUID], viewer: Viewer, term: str, max_positions: int
    ) -> list[Row[Any]]:
        """For each visible session: display positions whose content contains `term`
        (case-insensitive, literal), their count, and a snippet around the first match.
        One aggregate over hot + archived rows; positions are stored, not numbered here.

        The visible ids are resolved first and the message tables filtered with
        `session_id = ANY(...)`, so the planner may AND the session index with the trigram
        index (rare terms). Only (session, position, id) travel through the aggregate: the
        snippet reads one row per session afterwards, instead of sorting every matching
        row's content (which spilled to disk for a common term in large sessions)."""
        visible = list(
            (
                await self.session.execute(
                    select(Session.id).where(Session.id.in_(list(session_ids)), _visible(viewer))
                )
            ).scalars()
        )
        if not visible:
            return []
        stmt = text(
            """
            WITH hits AS (
                SELECT m.session_id, m.display_index, m.id, 0::bigint AS archived
                FROM session_messages m
                WHERE m.session_id = ANY(:ids) AND m.display_index IS NOT NULL
                  AND m.content ILIKE :pattern ESCAPE '\\'
                UNION ALL
                SELECT a.session_id, a.display_index, a.id, 1::bigint
                FROM session_messages_archive a
                WHERE a.session_id = ANY(:ids) AND a.display_index IS NOT NULL
                  AND a.content ILIKE :pattern ESCAPE '\\'
            ), agg AS (
                SELECT session_id,
                       (array_agg(display_index ORDER BY display_index))[1:CAST(:max_positions AS integer)]
                           AS positions,
                       count(*) AS match_count,
                       min(ARRAY[display_index, id, archived]) AS first  -- the first match
                FROM hits GROUP BY session_id
            )
            SELECT agg.session_id, agg.positions, agg.match_count,
                   (SELECT substr(c.content,
                                  greatest(1, strpos(lower(c.content), lower(:term)) - 60), 200)
                    FROM (SELECT content FROM session_messages
                          WHERE id = agg.first[2] AND agg.first[3] = 0
                          UNION ALL
                          SELECT content FROM session_messages_archive
                          WHERE id = agg.first[2] AND agg.first[3] = 1) c
                    LIMIT 1) AS snippet
            FROM agg
            """
        ).bindparams(bindparam("ids", type_=None))
        rows = await self.session.execute(
            stmt,
            {
                "ids": visible,
                "pattern": contains_pattern(term),
                "term": term,
                "max_positions": max_positions,
            },
        )
        return list(rows.all())


def now() -> datetime:
    return datetime.now(UTC)
