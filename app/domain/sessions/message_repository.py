"""All SQL of a session's messages: appends, history pages, the context, the archive.
The statements of the history reads (pages, size buckets, compression records) are built
in message_queries.py and executed here.

Sequence numbers and display positions are assigned under the session row's lock (one
UPDATE … RETURNING), so concurrent appends never collide and never leave gaps. The display
position of a message is stored when it is appended, so "which positions match" is a
lookup, not a numbering of the whole history at read time. The session row's other SQL
is `SessionRepository`'s (repositories.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import (
    Boolean,
    Row,
    String,
    Table,
    and_,
    any_,
    bindparam,
    false,
    func,
    insert,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Message, MessageArchive, Session
from app.domain.kernel.access import LLM_SYSTEM_SOURCES, Viewer
from app.domain.kernel.repositories import scope_owner
from app.domain.sessions.message_queries import COMPRESSIONS, NEWER, PAGE, SIZE_BUCKETS

#: summaries `context_tail` adds before the newest rows (one leads a context, as a rule)
MAX_TAIL_SUMMARIES = 5
MESSAGE_COLUMNS = [c.name for c in Message.__table__.columns if c.name != "id"]
_COLS_SQL = ", ".join(f'"{c}"' for c in MESSAGE_COLUMNS)

_MESSAGES = cast(Table, Message.__table__)
_SESSIONS = cast(Table, Session.__table__)
# An append's reservation (`MessageRepository.reserve`), built once: Core, not the ORM's
# bulk-update path, and no expression building per call (both measurable per append).
_RESERVE = (
    update(_SESSIONS)
    .where(_SESSIONS.c.id == bindparam("sid"), _SESSIONS.c.user_id == bindparam("uid"))
    .values(
        next_seq=_SESSIONS.c.next_seq + bindparam("n"),
        next_display_index=_SESSIONS.c.next_display_index + bindparam("d"),
        message_bytes=_SESSIONS.c.message_bytes + bindparam("bytes"),
        last_active=func.now(),
        # fact extraction's marker: pending once the session has a user message (this
        # append's `user`, or an earlier one: not NULL), NULL before (nothing to learn)
        memory_pending=func.nullif(
            or_(bindparam("user", type_=Boolean), _SESSIONS.c.memory_pending.is_not(None)),
            false(),
        ),
        # the rolling summary's marker: the session's profile is in rolling mode — in
        # `rolling_ids`, or, with `rolling_all_but`, not in them — and neither it nor
        # the session is `temp-…` (plain comparisons of the row: no function, no CASE)
        rolling_pending=and_(
            (_SESSIONS.c.profile_id == any_(bindparam("rolling_ids", type_=ARRAY(String))))
            != bindparam("rolling_all_but", type_=Boolean),
            _SESSIONS.c.profile_id.not_like("temp-%"),
            or_(_SESSIONS.c.name.is_(None), _SESSIONS.c.name.not_like("temp-%")),
        ),
        # the idle raw index's marker: this session may hold messages it does not cover
        raw_index_pending=true(),
    )
    .returning(
        _SESSIONS.c.next_seq - bindparam("n"),
        _SESSIONS.c.next_display_index - bindparam("d"),
        _SESSIONS.c.user_id,
    )
)


class MessageRepository:
    """A session's messages, hot (`session_messages`) and archived
    (`session_messages_archive`). Built from the same `AsyncSession` as the
    `SessionRepository` it works beside."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def reserve(
        self,
        session_id: uuid.UUID,
        viewer: Viewer,
        n_total: int,
        n_display: int,
        *,
        has_user: bool = False,
        rolling: tuple[bool, Sequence[str]] = (False, ()),
        n_bytes: int = 0,
    ) -> tuple[int, int, str] | None:
        """Reserve `n_total` sequence numbers and `n_display` display positions.

        One UPDATE takes the session row lock until commit, so concurrent appends to one
        session serialise here and get disjoint, gap-free ranges. Returns the first
        sequence number and display position and the session's user (the messages'
        tenant key), or None when the session is not visible. The same statement marks
        the session pending for fact extraction (`sessions.memory_pending`) once it
        holds a user message (`has_user`: this append has one), for the rolling summary
        (`sessions.rolling_pending`) when its profile is in rolling mode (`rolling`:
        `Profiles.rolling_marks`), and for the idle raw index (`raw_index_pending`); it
        adds `n_bytes` to the session's `message_bytes` (the storage quota's count).
        """
        owner = await scope_owner(self.session, session_id, viewer)
        if owner is None:
            return None
        params = {
            "sid": session_id,
            "uid": owner,
            "n": n_total,
            "d": n_display,
            "user": has_user,
            "rolling_all_but": rolling[0],
            "rolling_ids": list(rolling[1]),
            "bytes": n_bytes,
        }
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
    ) -> list[tuple[Row[Any], bool]]:
        """The `limit` display messages right below before_seq, newest first, hot and
        archived alike, in one statement (`message_queries.PAGE`). Returns (row, archived)
        pairs: plain rows of the columns a page shows (`message_queries.PAGE_FIELDS`), not
        ORM objects (nothing on a page is changed)."""
        bound = before_seq if before_seq is not None else 2**62
        params = {"uid": user_id, "sid": session_id, "bound": bound, "lim": limit}
        return [(r, bool(r.archived)) for r in await self.session.execute(PAGE, params)]

    async def _newest_of_both(
        self, statements: list[Any], params: dict[str, Any], limit: int
    ) -> list[Row[Any]]:
        """The newest `limit` rows of a newest-first statement over the hot table and
        the archive together, oldest first (a row still in the context stays hot however
        old it is, so the archive may hold rows newer than some hot ones)."""
        out: list[Row[Any]] = []
        for stmt in statements:
            out.extend(await self.session.execute(stmt, {**params, "lim": limit}))
        out.sort(key=lambda r: r.sequence_number)
        return out[-limit:]

    async def size_buckets(
        self, user_id: str, session_id: uuid.UUID, first: int, width: int, cpt: float
    ) -> list[tuple[int, int, int | None]]:
        """(last display index, tokens, measured context or None) per bucket of `width`
        displayed messages from display index `first` on
        (`message_queries._size_buckets`), hot and archived rows together, in order."""
        params = {"uid": user_id, "sid": session_id, "first": first, "width": width, "cpt": cpt}
        buckets: dict[int, list[int]] = {}
        for stmt in SIZE_BUCKETS:
            for r in await self.session.execute(stmt, params):
                b = buckets.setdefault(int(r.bucket), [0, 0, -1, -1])
                b[0] = max(b[0], int(r.last_index))
                b[1] += int(r.tokens or 0)
                if r.measured_at is not None and r.measured_at > b[2]:  # the newer table's
                    b[2], b[3] = int(r.measured_at), int(r.measured[0])
        return [
            (last, tokens, None if at < 0 else context)
            for _, (last, tokens, at, context) in sorted(buckets.items())
        ]

    async def compression_records(
        self, user_id: str, session_id: uuid.UUID, limit: int
    ) -> list[Row[Any]]:
        """The newest `limit` compression markers and summaries, oldest first."""
        params = {"uid": user_id, "sid": session_id}
        return await self._newest_of_both(COMPRESSIONS, params, limit)

    async def newer_bound(
        self, user_id: str, session_id: uuid.UUID, after_seq: int, limit: int
    ) -> int | None:
        """The `before_seq` of the history page of the `limit` displayed messages right
        after `after_seq`: the sequence number of the next one after them, None when
        there is none (that page is the newest)."""
        params = {"uid": user_id, "sid": session_id, "after": after_seq, "lim": limit + 1}
        seqs = sorted([r[0] for stmt in NEWER for r in await self.session.execute(stmt, params)])
        return int(seqs[limit]) if len(seqs) > limit else None

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

    async def context_rows_from(
        self, user_id: str, session_id: uuid.UUID, first: int
    ) -> list[Message]:
        """The is_context rows from sequence number `first` on, in order (what one
        append just wrote)."""
        rows = await self.session.execute(
            select(Message)
            .where(
                Message.user_id == user_id,
                Message.session_id == session_id,
                Message.is_context.is_(True),
                Message.sequence_number >= first,
            )
            .order_by(Message.sequence_number)
        )
        return list(rows.scalars())

    async def context_tail(
        self, user_id: str, session_id: uuid.UUID, newest: int
    ) -> tuple[int, list[Message]]:
        """How many context rows reach the model, and the newest `newest` context rows
        with the newest MAX_TAIL_SUMMARIES summaries among the older ones, in order (`context_messages`' rows for
        a page that shows the end of a long context)."""
        base = (
            Message.user_id == user_id,
            Message.session_id == session_id,
            Message.is_context.is_(True),
        )
        seen = or_(
            Message.role != "system",
            Message.message_metadata["source"].astext.in_(sorted(LLM_SYSTEM_SOURCES)),
        )
        total = (await self.session.execute(select(func.count()).where(*base, seen))).scalar_one()
        tail = select(Message).where(*base).order_by(Message.sequence_number.desc()).limit(newest)
        summaries = (
            select(Message)
            .where(*base, Message.is_summary.is_(True))
            .order_by(Message.sequence_number.desc())
            .limit(MAX_TAIL_SUMMARIES)
        )
        rows = {m.id: m for stmt in (tail, summaries) for m in (await self.session.scalars(stmt))}
        return int(total), sorted(rows.values(), key=lambda m: m.sequence_number)

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
