"""SQL of size compaction (`compaction.py`): the hot history's sizes, content + thinking.

Both reads name the session's user (the tenant key) with the session."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

# A hot row's size: `octet_length` reads the stored length (no detoasting).
_SIZE = "octet_length(content) + coalesce(octet_length(thinking), 0)"


@dataclass(frozen=True)
class HotRow:
    sequence_number: int
    role: str
    nbytes: int
    is_context: bool


class CompactionRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def hot_bytes(self, user_id: str, session_id: uuid.UUID) -> int:
        return int(
            (
                await self.session.execute(
                    text(
                        f"SELECT coalesce(sum({_SIZE}), 0) FROM session_messages "
                        "WHERE user_id = :uid AND session_id = :sid"
                    ),
                    {"uid": user_id, "sid": session_id},
                )
            ).scalar_one()
        )

    async def hot_rows(self, user_id: str, session_id: uuid.UUID) -> list[HotRow]:
        rows = await self.session.execute(
            text(
                f"SELECT sequence_number, role, {_SIZE} AS nbytes, is_context "
                "FROM session_messages WHERE user_id = :uid AND session_id = :sid "
                "ORDER BY sequence_number"
            ),
            {"uid": user_id, "sid": session_id},
        )
        return [
            HotRow(int(r.sequence_number), r.role, int(r.nbytes), bool(r.is_context)) for r in rows
        ]
