"""The SQL of forgetting, for the session store: messages (hot and archived), their
lazily built vectors, session names and planning logs, rolling summaries.

Each `find_*` reads the caller's rows that may hold the text (ILIKE, the text's `%`, `_`
and `\\` literal; a JSON column through its text form) and returns the changes the
redaction makes (pure `redact`); rows where it changes nothing are left out. Each
`write_*` applies them. Every statement says `user_id = :uid` (one shard on Citus), and
the session stores are read for one batch of sessions at a time (`session_id =
ANY(:sids)`: the messages' indexes lead with the session), so each statement reads a
bounded part of the user's history (the forget job, `runner.py`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.forget.redact import Needle, redact_json, redact_text

# String values of a message's metadata that are the service's machinery, not user text:
# redacting them would change how a record is read (a compression marker's `source`).
MACHINE_KEYS = ("source", "reason", "method")
MESSAGE_TABLES = ("session_messages", "session_messages_archive")
# The background jobs' per-session failure notes: an error may quote a model's reply.
JOB_STATE_TABLES = ("session_memory_state", "raw_index_state", "rolling_summaries")
_BATCH = "session_id = ANY(:sids)"


def as_json(value: Any) -> str | None:
    """A jsonb parameter: SQL NULL stays NULL (json.dumps(None) would be JSON null)."""
    return None if value is None else json.dumps(value)


@dataclass(frozen=True)
class MessageChange:
    id: int
    session_id: uuid.UUID
    sequence_number: int
    content: str
    thinking: str | None
    tool_calls: Any
    metadata: Any


@dataclass(frozen=True)
class SessionChange:
    """A session's redacted name (None: unchanged) and planning entries (`seq` → entry)."""

    id: uuid.UUID
    name: str | None
    planning: dict[int, Any]


@dataclass(frozen=True)
class JobErrorChange:
    table: str
    session_id: uuid.UUID
    last_error: str


@dataclass(frozen=True)
class RollingChange:
    session_id: uuid.UUID
    summary: Any


class ForgetSessionRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def lock_sessions(self, user_id: str, ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
        """Lock this batch's session rows (appends and compressions of these sessions wait
        for the batch to commit; the user's other sessions are not held), then their raw
        index state rows (the idle indexer, which claims them with SKIP LOCKED, passes
        them over; one that holds one is waited for, so the chunks it writes are read
        here). The ids still present, in id order. `FOR NO KEY UPDATE`: it waits for
        the session's writers (which lock the row `FOR UPDATE`), not for a transaction
        that merely inserted a row referencing it (a foreign key's `KEY SHARE`, as the
        fact extraction's claim holds across its model call: what that writes is checked
        against the forget records instead, kernel/forgotten.py)."""
        rows = await self.session.execute(
            text(
                "SELECT id FROM sessions WHERE user_id = :uid AND id = ANY(:sids)"
                " ORDER BY id FOR NO KEY UPDATE"
            ),
            {"uid": user_id, "sids": list(ids)},
        )
        locked = list(rows.scalars())
        if locked:
            await self.session.execute(
                text(
                    "SELECT 1 FROM raw_index_state WHERE user_id = :uid AND session_id = ANY(:sids)"
                    " ORDER BY session_id FOR UPDATE"
                ),
                {"uid": user_id, "sids": locked},
            )
        return locked

    async def find_messages(
        self, table: str, user_id: str, sids: Sequence[uuid.UUID], needle: Needle
    ) -> list[MessageChange]:
        assert table in MESSAGE_TABLES
        rows = await self.session.execute(
            text(
                f"SELECT id, session_id, sequence_number, content, thinking, tool_calls, metadata"
                f" FROM {table} WHERE user_id = :uid AND {_BATCH}"
                " AND (content ILIKE :like OR thinking ILIKE :like"
                " OR CAST(tool_calls AS text) ILIKE :jlike OR CAST(metadata AS text) ILIKE :jlike)"
                " ORDER BY session_id, sequence_number"
            ),
            {"uid": user_id, "sids": list(sids), "like": needle.like, "jlike": needle.json_like},
        )
        out = []
        for r in rows:
            change = MessageChange(
                r.id,
                r.session_id,
                r.sequence_number,
                redact_text(needle, r.content) or "",
                redact_text(needle, r.thinking),
                redact_json(needle, r.tool_calls),
                redact_json(needle, r.metadata, MACHINE_KEYS),
            )
            before = (r.content, r.thinking, r.tool_calls, r.metadata)
            if (change.content, change.thinking, change.tool_calls, change.metadata) != before:
                out.append(change)
        return out

    async def write_messages(
        self, table: str, user_id: str, changes: Sequence[MessageChange]
    ) -> None:
        assert table in MESSAGE_TABLES
        if not changes:
            return
        await self.session.execute(
            text(
                f"UPDATE {table} SET content = :content, thinking = :thinking,"
                " tool_calls = CAST(:tool_calls AS jsonb), metadata = CAST(:metadata AS jsonb)"
                " WHERE id = :id AND user_id = :uid"
            ),
            [
                {
                    "id": c.id,
                    "uid": user_id,
                    "content": c.content,
                    "thinking": c.thinking,
                    "tool_calls": as_json(c.tool_calls),
                    "metadata": as_json(c.metadata) or "{}",
                }
                for c in changes
            ],
        )

    async def drop_message_vectors(self, user_id: str, changes: Sequence[MessageChange]) -> None:
        """The changed messages' vectors (chat_history's semantic search embeds a message
        without one again, lazily, from its redacted text)."""
        if not changes:
            return
        await self.session.execute(
            text(
                "DELETE FROM message_embeddings WHERE user_id = :uid AND session_id = :sid"
                " AND sequence_number = :seq"
            ),
            [{"uid": user_id, "sid": c.session_id, "seq": c.sequence_number} for c in changes],
        )

    async def find_sessions(
        self, user_id: str, sids: Sequence[uuid.UUID], needle: Needle
    ) -> list[SessionChange]:
        names = await self.session.execute(
            text(
                "SELECT id, name FROM sessions WHERE user_id = :uid AND id = ANY(:sids)"
                " AND name ILIKE :like"
            ),
            {"uid": user_id, "sids": list(sids), "like": needle.like},
        )
        entries = await self.session.execute(
            text(
                "SELECT session_id, seq, entry FROM session_planning_entries"
                " WHERE user_id = :uid AND session_id = ANY(:sids)"
                " AND CAST(entry AS text) ILIKE :jlike"
            ),
            {"uid": user_id, "sids": list(sids), "jlike": needle.json_like},
        )
        renamed: dict[uuid.UUID, str | None] = {}
        for r in names:
            name = redact_text(needle, r.name)
            if name != r.name:
                renamed[r.id] = name
        planning: dict[uuid.UUID, dict[int, Any]] = {}
        for r in entries:
            entry = redact_json(needle, r.entry)
            if entry != r.entry:
                planning.setdefault(r.session_id, {})[r.seq] = entry
        return [
            SessionChange(sid, renamed.get(sid), planning.get(sid, {}))
            for sid in sorted(renamed.keys() | planning.keys())
        ]

    async def write_sessions(self, user_id: str, changes: Sequence[SessionChange]) -> None:
        names = [
            {"id": c.id, "uid": user_id, "name": c.name} for c in changes if c.name is not None
        ]
        if names:
            await self.session.execute(
                text("UPDATE sessions SET name = :name WHERE id = :id AND user_id = :uid"), names
            )
        entries = [
            {"sid": c.id, "uid": user_id, "seq": seq, "entry": as_json(entry)}
            for c in changes
            for seq, entry in c.planning.items()
        ]
        if entries:  # `bytes` follows (a generated column)
            await self.session.execute(
                text(
                    "UPDATE session_planning_entries SET entry = CAST(:entry AS jsonb)"
                    " WHERE session_id = :sid AND user_id = :uid AND seq = :seq"
                ),
                entries,
            )

    async def find_rolling(
        self, user_id: str, sids: Sequence[uuid.UUID], needle: Needle
    ) -> list[RollingChange]:
        rows = await self.session.execute(
            text(
                "SELECT session_id, summary FROM rolling_summaries WHERE user_id = :uid"
                f" AND {_BATCH} AND CAST(summary AS text) ILIKE :jlike"
            ),
            {"uid": user_id, "sids": list(sids), "jlike": needle.json_like},
        )
        out = []
        for r in rows:
            summary = redact_json(needle, r.summary)
            if summary != r.summary:
                out.append(RollingChange(r.session_id, summary))
        return out

    async def write_rolling(self, user_id: str, changes: Sequence[RollingChange]) -> None:
        if not changes:
            return
        await self.session.execute(
            text(
                "UPDATE rolling_summaries SET summary = CAST(:summary AS jsonb)"
                " WHERE session_id = :sid AND user_id = :uid"
            ),
            [{"sid": c.session_id, "uid": user_id, "summary": as_json(c.summary)} for c in changes],
        )

    async def find_job_errors(
        self, user_id: str, sids: Sequence[uuid.UUID], needle: Needle
    ) -> list[JobErrorChange]:
        out = []
        for table in JOB_STATE_TABLES:
            rows = await self.session.execute(
                text(
                    f"SELECT session_id, last_error FROM {table} WHERE user_id = :uid"
                    f" AND {_BATCH} AND last_error ILIKE :like"
                ),
                {"uid": user_id, "sids": list(sids), "like": needle.like},
            )
            for r in rows:
                redacted = redact_text(needle, r.last_error) or ""
                if redacted != r.last_error:
                    out.append(JobErrorChange(table, r.session_id, redacted))
        return out

    async def write_job_errors(self, user_id: str, changes: Sequence[JobErrorChange]) -> None:
        for table in JOB_STATE_TABLES:
            mine = [c for c in changes if c.table == table]
            if mine:
                await self.session.execute(
                    text(
                        f"UPDATE {table} SET last_error = :err"
                        " WHERE session_id = :sid AND user_id = :uid"
                    ),
                    [{"sid": c.session_id, "uid": user_id, "err": c.last_error} for c in mine],
                )
