"""Plugs the raw-history index into compression (every path goes through the hook)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.domain.compression import Msg
from app.domain.raw_history.indexer import Segments, embed_demoted, index_demoted
from app.llm.gateway import LLMGateway


@dataclass(frozen=True, eq=False)
class RawHistoryHook:
    """The raw-history index as a preparing demotion hook (kernel/hooks.py): the chunks'
    vectors before the lock (`embed`: this process embeds; not with
    `INDEX_EMBEDDING=external`), the chunks written under it."""

    llm: LLMGateway
    embed: bool = True

    async def prepare(
        self,
        factory: async_sessionmaker[AsyncSession],
        user_id: str,
        session_id: uuid.UUID,
        demoted: Sequence[Msg],
        keys: Sequence[str],
    ) -> dict[str, Segments]:
        if not self.embed:
            return {}
        return await embed_demoted(
            factory, self.llm, user_id=user_id, session_id=session_id, demoted=demoted, keys=keys
        )

    async def __call__(
        self,
        db: AsyncSession,
        user_id: str,
        session_id: uuid.UUID,
        demoted: Sequence[Msg],
        keys: Sequence[str],
        ready: dict[str, Segments] | None = None,
    ) -> None:
        await index_demoted(
            db, user_id=user_id, session_id=session_id, demoted=demoted, keys=keys, vectors=ready
        )


def raw_history_hook(llm: LLMGateway, *, embed: bool = True) -> RawHistoryHook:
    return RawHistoryHook(llm, embed)
