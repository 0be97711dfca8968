"""All SQL of public share links (`session_shares`)."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Session, SessionShare


class ShareRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def token_for_session(self, user_id: str, session_id: uuid.UUID) -> str | None:
        """The session's link token. The caller has checked the session is visible;
        `user_id` is the session's (the tenant key)."""
        return (
            await self.session.execute(
                select(SessionShare.token).where(
                    SessionShare.user_id == user_id, SessionShare.session_id == session_id
                )
            )
        ).scalar_one_or_none()

    async def create(self, user_id: str, session_id: uuid.UUID, token: str, token_hash: str) -> str:
        """Store a link unless the session has one; returns the session's token either
        way (two concurrent first calls agree on one)."""
        await self.session.execute(
            insert(SessionShare)
            .values(user_id=user_id, session_id=session_id, token=token, token_hash=token_hash)
            .on_conflict_do_nothing(index_elements=[SessionShare.session_id, SessionShare.user_id])
        )
        stored = await self.token_for_session(user_id, session_id)
        assert stored is not None
        return stored

    async def resolve(self, token_hash: str) -> tuple[SessionShare, Session] | None:
        """The share and its session for a token's SHA-256 (unique index lookup).

        The token is the capability: no user scope applies to this read — it is the one
        public read that cannot name its tenant (on Citus, a lookup on every shard)."""
        row = (
            await self.session.execute(
                select(SessionShare, Session)
                .join(
                    Session,
                    (Session.id == SessionShare.session_id)
                    & (Session.user_id == SessionShare.user_id),
                )
                .where(SessionShare.token_hash == token_hash)
            )
        ).first()
        return (row[0], row[1]) if row else None
