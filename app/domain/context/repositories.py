"""SQL of the context domain that the sessions repository does not already offer."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Message
from app.domain.kernel.access import Viewer
from app.domain.kernel.repositories import scope_owner


class ContextRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def context_sequence_numbers(self, user_id: str, session_id: uuid.UUID) -> set[int]:
        """Sequence numbers of the rows currently flagged is_context (a narrow read);
        `user_id` is the session's (the tenant key)."""
        rows = await self.session.execute(
            select(Message.sequence_number).where(
                Message.user_id == user_id,
                Message.session_id == session_id,
                Message.is_context.is_(True),
            )
        )
        return {int(s) for s in rows.scalars()}

    async def save_state(
        self,
        session_id: uuid.UUID,
        viewer: Viewer,
        *,
        token_count: int | None = None,
        set_metadata: Mapping[str, Any] | None = None,
        drop_metadata: Iterable[str] = (),
    ) -> bool:
        """Set ``context_token_count`` and merge keys into ``session_metadata``.

        The merge happens in one statement (``(metadata - dropped) || patch``), so keys
        written by other features are never overwritten with a stale copy.
        """
        # Names the session's user (`scope_owner`): on Citus one shard.
        owner = await scope_owner(self.session, session_id, viewer)
        if owner is None:
            return False
        result = await self.session.execute(
            text(
                """
                UPDATE sessions
                SET session_metadata = (session_metadata - CAST(:drop AS text[]))
                                       || CAST(:patch AS jsonb),
                    context_token_count = COALESCE(:tokens, context_token_count)
                WHERE id = :sid AND user_id = :uid
                """
            ),
            {
                "drop": list(drop_metadata),
                "patch": json.dumps(dict(set_metadata or {})),
                "tokens": token_count,
                "sid": session_id,
                "uid": owner,
            },
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def clear_history(self, user_id: str, session_id: uuid.UUID) -> tuple[int, int, int]:
        """Delete the session's messages, hot and archived, and their `chat_history`
        vectors; (hot, archived, vectors) deleted. `user_id` is the session's."""
        counts = []
        for table in ("session_messages", "session_messages_archive", "message_embeddings"):
            result = await self.session.execute(
                text(f"DELETE FROM {table} WHERE user_id = :uid AND session_id = :sid"),
                {"uid": user_id, "sid": session_id},
            )
            counts.append(int(result.rowcount))  # type: ignore[attr-defined]
        return counts[0], counts[1], counts[2]

    async def reset_state(
        self, user_id: str, session_id: uuid.UUID, drop_metadata: Iterable[str]
    ) -> None:
        """After a reset: no context tokens, the compression state keys dropped."""
        await self.session.execute(
            text(
                "UPDATE sessions SET context_token_count = 0, last_active = now(), "
                "session_metadata = session_metadata - CAST(:drop AS text[]) "
                "WHERE id = :sid AND user_id = :uid"
            ),
            {"drop": list(drop_metadata), "sid": session_id, "uid": user_id},
        )
