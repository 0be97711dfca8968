"""All SQL of the session rows: create, lock, update, delete, the sidebar list and its
search, the match positions. A session's messages are `MessageRepository`'s
(message_repository.py), its planning log `PlanningRepository`'s (planning_repository.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Row, delete, func, select, text, update

from app.db.base import TRIGRAM_INDEX_PREFIX
from app.db.models import MemoryChunk, Session
from app.domain.kernel.access import Viewer
from app.domain.kernel.repositories import (
    ChunkCountRepository,
    SessionLookupRepository,
    scope_owner,
    visible,
)
from app.domain.sessions.cursor import ListCursor
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

# Per database (URL): does session_messages.content have its trigram index? Probed once per
# process: the index appears with pg_trgm at start-up (app.db.extensions), not mid-run.
_TRIGRAM_INDEXED: dict[str, bool] = {}

#: session_metadata key of the turn running on the session: ``{"id", "until"}`` (a lease;
#: `until` in seconds since the epoch: Citus takes no STABLE function of a column, such
#: as a text-to-timestamptz cast, in an UPDATE on a distributed table).
TURN_LEASE_KEY = "running_turn"
#: session_metadata key of the auto-naming under way: ``{"until"}`` (a lease).
NAMING_LEASE_KEY = "auto_naming"

# A lease is taken by one conditional UPDATE: while another unexpired one is there, no
# row matches. Two takers at once: the second's UPDATE waits for the first's commit, then
# re-checks its WHERE against the new row and matches nothing.
_TAKE_LEASE_SQL = """
UPDATE sessions
SET session_metadata = session_metadata || jsonb_build_object(
    CAST(:key AS text),
    jsonb_build_object(
        'id', CAST(:token AS text),
        'until', CAST(:until AS double precision)
    )
)
WHERE id = :sid AND user_id = :uid {extra}
  AND (session_metadata -> CAST(:key AS text) IS NULL
       OR CAST(session_metadata -> CAST(:key AS text) ->> 'until' AS double precision)
          < CAST(:now AS double precision))
"""
_TRIGRAM_INDEX = f"{TRIGRAM_INDEX_PREFIX}session_messages_content"

# The first user message and the first assistant reply (with text) after it, of an unnamed session
# (hot rows: the first exchange of a new session is never archived that soon).
# Every table names the user by the parameter, not through `s` (Citus routes a statement
# to one shard only when each relation's tenant key is a constant).
# The first exchange is read from the hot table and the archive together: compaction
# moves a long session's first messages to the archive, and an import writes them there.
_FIRST_EXCHANGE_SQL = """
SELECT s.profile_id, u.content, a.content
FROM sessions s
JOIN LATERAL (
    SELECT m.sequence_number, m.content FROM (
        SELECT sequence_number, content FROM session_messages
        WHERE user_id = :uid AND session_id = :sid AND role = 'user'
          AND NOT is_summary AND is_display
        UNION ALL
        SELECT sequence_number, content FROM session_messages_archive
        WHERE user_id = :uid AND session_id = :sid AND role = 'user'
          AND NOT is_summary AND is_display
    ) m ORDER BY m.sequence_number LIMIT 1
) u ON true
JOIN LATERAL (
    SELECT m.content FROM (
        SELECT sequence_number, content FROM session_messages
        WHERE user_id = :uid AND session_id = :sid AND role = 'assistant'
          AND btrim(content) <> ''
        UNION ALL
        SELECT sequence_number, content FROM session_messages_archive
        WHERE user_id = :uid AND session_id = :sid AND role = 'assistant'
          AND btrim(content) <> ''
    ) m WHERE m.sequence_number > u.sequence_number
    ORDER BY m.sequence_number LIMIT 1
) a ON true
WHERE s.id = :sid AND s.user_id = :uid AND s.name IS NULL
"""


class SessionRepository(SessionLookupRepository):
    """Session rows (`get`, a session in a viewer's scope, is the kernel's); their
    messages are `MessageRepository`'s."""

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

    async def unnamed_first_exchange(
        self, user_id: str, session_id: uuid.UUID
    ) -> tuple[str, str, str] | None:
        """``(profile_id, first user text, first assistant reply after it)`` of a session
        that has no name and has had its first exchange; None otherwise."""
        found = (
            await self.session.execute(
                text(_FIRST_EXCHANGE_SQL), {"uid": user_id, "sid": session_id}
            )
        ).first()
        return (str(found[0]), str(found[1]), str(found[2])) if found else None

    async def unnamed_ids(self, user_id: str, limit: int) -> list[uuid.UUID]:
        """Up to `limit` of the user's sessions without a name, oldest first."""
        rows = await self.session.execute(
            select(Session.id)
            .where(Session.user_id == user_id, Session.name.is_(None))
            .order_by(Session.created_at, Session.id)
            .limit(limit)
        )
        return list(rows.scalars())

    async def reload(self, row: Session) -> Session:
        """The row read again (another statement of this transaction changed it)."""
        await self.session.refresh(row)
        return row

    async def name_if_unnamed(self, user_id: str, session_id: uuid.UUID, name: str) -> bool:
        """Set the name only while the session still has none (a name the user set in
        the meantime is kept); True when it was set."""
        result = await self.session.execute(
            update(Session)
            .where(Session.id == session_id, Session.user_id == user_id, Session.name.is_(None))
            .values(name=name)
            .execution_options(synchronize_session=False)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def take_lease(
        self,
        user_id: str,
        session_id: uuid.UUID,
        key: str,
        token: str,
        seconds: float,
        *,
        unnamed: bool = False,
    ) -> bool:
        """Take the session's lease `key` (a turn, the auto-naming) for `seconds` unless
        another unexpired one is held (with `unnamed`: only while it has no name); True
        when taken. `user_id` is the session's (the tenant key)."""
        sql = _TAKE_LEASE_SQL.format(extra="AND name IS NULL" if unnamed else "")
        now = time.time()
        params = {
            "key": key,
            "token": token,
            "until": now + seconds,
            "now": now,
            "sid": session_id,
            "uid": user_id,
        }
        result = await self.session.execute(text(sql), params)
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def renew_lease(
        self, user_id: str, session_id: uuid.UUID, key: str, token: str, seconds: float
    ) -> bool:
        """Extend the holder's lease `key` to `seconds` from now; False when it is not
        held by `token` any more (it expired and another took it)."""
        result = await self.session.execute(
            text(
                "UPDATE sessions SET session_metadata = jsonb_set(session_metadata, "
                "ARRAY[CAST(:key AS text), 'until'], to_jsonb(CAST(:until AS double precision))) "
                "WHERE id = :sid AND user_id = :uid "
                "AND session_metadata -> CAST(:key AS text) ->> 'id' = CAST(:token AS text)"
            ),
            {
                "key": key,
                "token": token,
                "until": time.time() + seconds,
                "sid": session_id,
                "uid": user_id,
            },  # fmt: skip
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def drop_lease(
        self, user_id: str, session_id: uuid.UUID, key: str, token: str | None = None
    ) -> None:
        """Drop the lease `key` (only the holder's, when `token` is given)."""
        await self.session.execute(
            text(
                "UPDATE sessions SET session_metadata = session_metadata - CAST(:key AS text) "
                "WHERE id = :sid AND user_id = :uid "
                "AND (CAST(:token AS text) IS NULL "
                "     OR session_metadata -> CAST(:key AS text) ->> 'id' = CAST(:token AS text))"
            ),
            {"key": key, "token": token, "sid": session_id, "uid": user_id},
        )

    async def message_bytes(self, user_id: str) -> int:
        """The user's message-storage usage: the sum of their sessions' `message_bytes`
        (their rows by the `user_id` index; no message is read)."""
        total = await self.session.scalar(
            select(func.coalesce(func.sum(Session.message_bytes), 0)).where(
                Session.user_id == user_id
            )
        )
        return int(total or 0)

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
        after: ListCursor | None = None,
    ) -> tuple[list[Row[Any]], int]:
        """Sidebar rows (pinned first, then the chosen order) and the total, in one
        statement (`queries.summaries_page`). Histories are never loaded: the display
        count is a column kept on append, the preview one index lookup per row.
        `after`: the rows after that cursor instead of `offset`."""
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
            after=after,
        )
        rows: list[Any] = list((await self.session.execute(stmt, params)).all())
        if rows and viewer.all_users:  # the previews of a page across users: a second read
            sql, keys = previews([(r.id, r.user_id) for r in rows])
            heads: dict[Any, str] = {r[0]: r[1] for r in await self.session.execute(sql, keys)}
            rows = [SimpleNamespace(**{**r._asdict(), "preview": heads.get(r.id)}) for r in rows]
        if rows:
            return rows, int(rows[0].total)
        if offset == 0 and after is None:
            return rows, 0
        # Past the end: the window saw no row, so count on its own.
        return rows, await self.count_summaries(viewer, profile_id=profile_id, search=search)

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
