"""Plugs the raw-history index into compression (every path goes through the hook)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compression import Msg
from app.domain.kernel.hooks import DemotionHook
from app.domain.raw_history.indexer import index_demoted
from app.llm.gateway import LLMGateway


def raw_history_hook(llm: LLMGateway) -> DemotionHook:
    async def index_raw_history(
        db: AsyncSession,
        user_id: str,
        session_id: uuid.UUID,
        demoted: Sequence[Msg],
        keys: Sequence[str],
    ) -> None:
        await index_demoted(
            db, llm, user_id=user_id, session_id=session_id, demoted=demoted, keys=keys
        )

    return index_raw_history
