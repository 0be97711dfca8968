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
from types import SimpleNamespace
from typing import Any, cast

from sqlalchemy import Row, Table, bindparam, delete, func, insert, select, text, update

from app.db.base import TRIGRAM_INDEX_PREFIX
from app.db.models import MemoryChunk, Message, MessageArchive, Session
from app.domain.kernel.access import Viewer
from app.domain.kernel.repositories import (
    ChunkCountRepository,
    SessionLookupRepository,
    scope_owner,
    visible,
)
from app.domain.sessions.queries import (
    ESTIMATE_MATCHES_SQL,
    MATCHES_RARE_SQL,
    MATCHES_SQL,
    RARE_TERM_ROWS,
    previews,
    search_filters,
    summaries_page,
)
from app.lib.sql import contains_pattern

MESSAGE_COLUMNS = [c.name for c in Message.__table__.columns if c.name != "id"]
_COLS_SQL = ", ".join(f'"{c}"' for c in MESSAGE_COLUMNS)

_MESSAGES = cast(Table, Message.__table__)
_SESSIONS = cast(Table, Session.__table__)
# An append's reservation (`SessionRepository.reserve`), built once: Core, not the ORM's
# bulk-update path, and no expression building per call (both measurable per append).
_RESERVE = (
    update(_SESSIONS)
    .where(_SESSIONS.c.id == bindparam("sid"), _SESSIONS.c.user_id == bindparam("uid"))
    .values(
        next_seq=_SESSIONS.c.next_seq + bindparam("n"),
        next_display_index=_SESSIONS.c.next_display_index + bindparam("d"),
        last_active=func.now(),
    )
    .returning(
        _SESSIONS.c.next_seq - bindparam("n"),
        _SESSIONS.c.next_display_index - bindparam("d"),
        _SESSIONS.c.user_id,
    )
)


# Per database (URL): does session_messages.content have its trigram index? Probed once per
# process: the index appears with pg_trgm at start-up (app.db.extensions), not mid-run.
_TRIGRAM_INDEXED: dict[str, bool] = {}
_TRIGRAM_INDEX = f"{TRIGRAM_INDEX_PREFIX}session_messages_content"


class SessionRepository(SessionLookupRepository):
    """Sessions and their messages (`get`, a session in a viewer's scope, is the kernel's)."""

    # ---------------------------------------------------------------- sessions
    async def create(self, profile_id: str, user_id: str, name: str | None) -> Session:
        row = Session(profile_id=profile_id, user_id=user_id, name=name)
        self.session.add(row)
        await self.session.flush()
        await self.session.refresh(row)
        return row

    # The statements on one session below name its user (`scope_owner`: the viewer's
    # own, or an all-users viewer's session's owner looked up first), so each stays on
    # one shard on Citus — a locking read must.
    async def lock(self, session_id: uuid.UUID, viewer: Viewer) -> Session | None:
        """The session row, locked for the rest of the transaction."""
        owner = await scope_owner(self.session, session_id, viewer)
        if owner is None:
            return None
        return (
            await self.session.execute(
                select(Session)
                .where(Session.id == session_id, Session.user_id == owner)
                .with_for_update()
                .execution_options(populate_existing=True)
            )
        ).scalar_one_or_none()

    async def update_fields(self, session_id: uuid.UUID, viewer: Viewer, **values: Any) -> bool:
        owner = await scope_owner(self.session, session_id, viewer)
        if owner is None:
            return False
        result = await self.session.execute(
            update(Session)
            .where(Session.id == session_id, Session.user_id == owner)
            .values(**values)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def delete(self, session_id: uuid.UUID, viewer: Viewer) -> bool:
        """Delete the session; messages, archive, shares, state and sketches cascade.

        Raw chunks have no FK (by design) and are deleted here explicitly.
        """
        owner = await scope_owner(self.session, session_id, viewer)
        if owner is None:
            return False
        deleted = (
            await self.session.execute(
                delete(Session)
                .where(Session.id == session_id, Session.user_id == owner)
                .returning(Session.user_id)
            )
        ).scalar_one_or_none()
        if deleted is None:
            return False
        removed = await self.session.execute(
            delete(MemoryChunk).where(
                MemoryChunk.user_id == owner, MemoryChunk.session_id == session_id
            )
        )
        await ChunkCountRepository(self.session).change(owner, -removed.rowcount)  # type: ignore[attr-defined]
        return True

    async def count_summaries(
        self, viewer: Viewer, *, profile_id: str | None = None, search: str | None = None
    ) -> int:
        stmt = select(func.count()).select_from(Session).where(visible(viewer))
        per_session = await self._per_session_search(viewer, search)
        stmt = search_filters(stmt, profile_id, search, per_session=per_session)
        return (await self.session.execute(stmt)).scalar_one()

    async def _per_session_search(self, viewer: Viewer, search: str | None) -> bool:
        """Whether a search must probe session by session (see `queries._contains`):
        one user's list on a database whose messages have no trigram index."""
        if not search or viewer.all_users:
            return False
        return not await self._trigram_indexed()

    async def _trigram_indexed(self) -> bool:
        key = str(self.session.get_bind().engine.url)
        if key not in _TRIGRAM_INDEXED:
            found = await self.session.execute(
                text("SELECT to_regclass(:name) IS NOT NULL"), {"name": _TRIGRAM_INDEX}
            )
            _TRIGRAM_INDEXED[key] = bool(found.scalar())
        return _TRIGRAM_INDEXED[key]

    async def _rare_term(self, pattern: str) -> bool:
        """With the trigram index: does the planner expect few rows to contain the term?"""
        if not await self._trigram_indexed():
            return False
        plan = (await self.session.execute(ESTIMATE_MATCHES_SQL, {"pattern": pattern})).scalar_one()
        return float(plan[0]["Plan"]["Plan Rows"]) < RARE_TERM_ROWS

    async def list_page(
        self,
        viewer: Viewer,
        *,
        limit: int,
        offset: int,
        profile_id: str | None = None,
        search: str | None = None,
        sort_by: str = "last_active",
        sort_order: str = "desc",
    ) -> tuple[list[Row[Any]], int]:
        """Sidebar rows (pinned first, then the chosen order) and the total, in one
        statement (`queries.summaries_page`). Histories are never loaded: the display
        count is a column kept on append, the preview one index lookup per row."""
        per_session = await self._per_session_search(viewer, search)
        stmt, params = summaries_page(
            viewer,
            limit=limit,
            offset=offset,
            profile_id=profile_id,
            search=search,
            sort_by=sort_by,
            sort_order=sort_order,
            per_session=per_session,
        )
        rows: list[Any] = list((await self.session.execute(stmt, params)).all())
        if rows and viewer.all_users:  # the previews of a page across users: a second read
            sql, keys = previews([(r.id, r.user_id) for r in rows])
            heads: dict[Any, str] = {r[0]: r[1] for r in await self.session.execute(sql, keys)}
            rows = [SimpleNamespace(**{**r._asdict(), "preview": heads.get(r.id)}) for r in rows]
        if rows:
            return rows, int(rows[0].total)
        if offset == 0:
            return rows, 0
        # Past the end: the window saw no row, so count on its own.
        return rows, await self.count_summaries(viewer, profile_id=profile_id, search=search)

    async def append_planning_log(
        self, session_id: uuid.UUID, viewer: Viewer, entry: dict[str, Any], keep: int
    ) -> bool:
        # Append, keeping the newest `keep` entries.
        owner = await scope_owner(self.session, session_id, viewer)
        if owner is None:
            return False
        stmt = text(
            """
            UPDATE sessions SET planning_logs = (
                SELECT coalesce(jsonb_agg(e ORDER BY i), '[]'::jsonb) FROM (
                    SELECT e, i FROM jsonb_array_elements(planning_logs || jsonb_build_array(
                        CAST(:entry AS jsonb))) WITH ORDINALITY AS t(e, i)
                    ORDER BY i DESC LIMIT :keep
                ) kept
            )
            WHERE id = :id AND user_id = :uid
            """
        )
        import json

        result = await self.session.execute(
            stmt,
            {
                "entry": json.dumps(entry),
                "keep": keep,
                "id": session_id,
                "uid": owner,
            },
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    # ---------------------------------------------------------------- messages
    async def reserve(
        self, session_id: uuid.UUID, viewer: Viewer, n_total: int, n_display: int
    ) -> tuple[int, int, str] | None:
        """Reserve `n_total` sequence numbers and `n_display` display positions.

        One UPDATE takes the session row lock until commit, so concurrent appends to one
        session serialise here and get disjoint, gap-free ranges. Returns the first
        sequence number and display position and the session's user (the messages'
        tenant key), or None when the session is not visible.
        """
        owner = await scope_owner(self.session, session_id, viewer)
        if owner is None:
            return None
        params = {"sid": session_id, "uid": owner, "n": n_total, "d": n_display}
        row = (await self.session.execute(_RESERVE, params)).first()
        return (int(row[0]), int(row[1]), str(row[2])) if row else None

    async def insert_messages(self, rows: list[dict[str, Any]]) -> None:
        """One multi-row INSERT (Core executemany → insertmanyvalues), bypassing the ORM's
        bulk path: no per-row bookkeeping, nothing is loaded into the session."""
        if rows:
            # Core keys are column names: the ORM's `message_metadata` is column "metadata".
            for row in rows:
                if "message_metadata" in row:
                    row["metadata"] = row.pop("message_metadata")
            await self.session.execute(insert(_MESSAGES), rows)

    # Every message statement below names the session's user (the tenant key, its
    # `user_id`) next to the session id: on Citus each then routes to one shard.
    async def history_page(
        self, user_id: str, session_id: uuid.UUID, before_seq: int | None, limit: int
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
                    model.user_id == user_id,
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

    async def context_messages(self, user_id: str, session_id: uuid.UUID) -> list[Message]:
        """Rows flagged is_context, in order (the LLM context is rebuilt from these)."""
        rows = await self.session.execute(
            select(Message)
            .where(
                Message.user_id == user_id,
                Message.session_id == session_id,
                Message.is_context.is_(True),
            )
            .order_by(Message.sequence_number)
        )
        return list(rows.scalars())

    async def all_messages(self, user_id: str, session_id: uuid.UUID) -> list[Message]:
        rows = await self.session.execute(
            select(Message)
            .where(Message.user_id == user_id, Message.session_id == session_id)
            .order_by(Message.sequence_number)
        )
        return list(rows.scalars())

    async def set_context_flag(
        self, user_id: str, session_id: uuid.UUID, sequence_numbers: Sequence[int], flag: bool
    ) -> int:
        """The narrow update by sequence number. It deliberately does not filter on
        is_display: context-only rows (old summaries) must be demoted too."""
        if not sequence_numbers:
            return 0
        result = await self.session.execute(
            update(Message)
            .where(
                Message.user_id == user_id,
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

    async def archive_old_messages(
        self, user_id: str, session_id: uuid.UUID, threshold: int
    ) -> int:
        """Move rows with sequence_number < threshold to the archive, in one statement.

        Rows still in the LLM context stay hot whatever their age: the context is read from
        the hot table only.
        """
        result = await self.session.execute(
            text(
                f"""
                WITH moved AS (
                    DELETE FROM session_messages
                    WHERE user_id = :uid AND session_id = :sid
                      AND sequence_number < :threshold AND NOT is_context
                    RETURNING {_COLS_SQL}
                )
                INSERT INTO session_messages_archive ({_COLS_SQL})
                SELECT {_COLS_SQL} FROM moved
                """
            ),
            {"uid": user_id, "sid": session_id, "threshold": threshold},
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def get_archived_messages(
        self, user_id: str, session_id: uuid.UUID, *, before_seq: int | None, limit: int
    ) -> list[MessageArchive]:
        stmt = select(MessageArchive).where(
            MessageArchive.user_id == user_id, MessageArchive.session_id == session_id
        )
        if before_seq is not None:
            stmt = stmt.where(MessageArchive.sequence_number < before_seq)
        rows = await self.session.execute(
            stmt.order_by(MessageArchive.sequence_number.desc()).limit(limit)
        )
        return list(rows.scalars())

    async def hot_message_count(self, user_id: str, session_id: uuid.UUID) -> int:
        return (
            await self.session.execute(
                select(func.count()).where(
                    Message.user_id == user_id, Message.session_id == session_id
                )
            )
        ).scalar_one()

    async def search_matches(
        self, session_ids: Sequence[uuid.UUID], viewer: Viewer, term: str, max_positions: int
    ) -> list[Row[Any]]:
        """For each visible session: the first `max_positions` display positions whose
        content contains `term` (case-insensitive, literal), how many of them there are
        (`match_count`: more than `max_positions` means "there are more"; how many more
        is not counted for a common term), and a snippet around the first match.
        `queries.MATCHES_SQL` reads each session in display order and stops at the cap;
        a term the trigram statistics call rare goes through the trigram index
        (`queries.MATCHES_RARE_SQL`).

        The visible sessions and their users are resolved first (one primary-key
        lookup); then one statement per user (one, but for an all-users viewer asking
        about several users' sessions), each naming its user. Positions are stored, not
        numbered here."""
        owners: dict[str, list[uuid.UUID]] = {}
        found = await self.session.execute(
            select(Session.user_id, Session.id).where(
                Session.id.in_(list(session_ids)), visible(viewer)
            )
        )
        for owner, sid in found.all():
            owners.setdefault(owner, []).append(sid)
        if not owners:
            return []
        pattern = contains_pattern(term)
        rare = await self._rare_term(pattern)
        out: list[Row[Any]] = []
        for owner, ids in owners.items():
            rows = await self.session.execute(
                MATCHES_RARE_SQL if rare else MATCHES_SQL,
                {"uid": owner, "ids": ids, "pattern": pattern, "term": term, "cap": max_positions},
            )
            out.extend(rows.all())
        return out


def now() -> datetime:
    return datetime.now(UTC)
