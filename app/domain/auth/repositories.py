from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import func, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ApiToken, Session, User


class UserRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, user_id: str) -> User | None:
        return await self.session.get(User, user_id)

    async def get_by_name(self, name: str) -> User | None:
        return (
            await self.session.execute(select(User).where(User.name == name))
        ).scalar_one_or_none()

    async def list_page(self, limit: int, offset: int) -> tuple[list[User], int]:
        total = (await self.session.execute(select(func.count()).select_from(User))).scalar_one()
        rows = await self.session.execute(
            select(User).order_by(User.created_at, User.id).limit(limit).offset(offset)
        )
        return list(rows.scalars()), total

    async def add(self, user: User) -> User:
        self.session.add(user)
        await self.session.flush()
        return user

    async def ensure(
        self, user_id: str, name: str, *, is_admin: bool, permissions: list[str]
    ) -> None:
        """Insert the user if missing (idempotent, safe with several replicas)."""
        await self.session.execute(
            insert(User)
            .values(id=user_id, name=name, is_admin=is_admin, permissions=permissions)
            .on_conflict_do_nothing()
        )

    async def session_ids(self, user_id: str) -> list[uuid.UUID]:
        """The ids of the user's sessions (their file directories go with the user)."""
        rows = await self.session.execute(select(Session.id).where(Session.user_id == user_id))
        return list(rows.scalars())

    async def delete(self, user_id: str) -> bool:
        user = await self.get(user_id)
        if user is None:
            return False
        await self.session.delete(user)
        await self.session.flush()
        return True


class TokenRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def user_for_hash(self, token_hash: str) -> tuple[User, ApiToken] | None:
        row = (
            await self.session.execute(
                select(User, ApiToken)
                .join(ApiToken, ApiToken.user_id == User.id)
                .where(
                    ApiToken.token_hash == token_hash,
                    ApiToken.revoked_at.is_(None),
                    or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > func.now()),
                )
            )
        ).first()
        return (row[0], row[1]) if row else None

    async def add(
        self,
        user_id: str,
        name: str,
        token_hash: str,
        prefix: str,
        expires_at: datetime | None = None,
    ) -> ApiToken:
        token = ApiToken(
            user_id=user_id,
            name=name,
            token_hash=token_hash,
            prefix=prefix,
            expires_at=expires_at,
        )
        self.session.add(token)
        await self.session.flush()
        await self.session.refresh(token)
        return token

    async def count_active_locked(self, user_id: str) -> int:
        """How many active (not revoked, not expired) tokens the user holds, under a
        transaction-scoped advisory lock of that user's tokens: two concurrent issues for
        one user count one after the other, so the cap cannot be overshot by a race."""
        await self.session.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
            {"k": f"navi_api_tokens:{user_id}"},
        )
        return (
            await self.session.execute(
                select(func.count())
                .select_from(ApiToken)
                .where(
                    ApiToken.user_id == user_id,
                    ApiToken.revoked_at.is_(None),
                    or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > func.now()),
                )
            )
        ).scalar_one()

    async def ensure(self, user_id: str, name: str, token_hash: str, prefix: str) -> None:
        await self.session.execute(
            insert(ApiToken)
            .values(
                id=uuid.uuid4(), user_id=user_id, name=name, token_hash=token_hash, prefix=prefix
            )
            .on_conflict_do_nothing(index_elements=["token_hash"])
        )

    async def list_for_user(
        self, user_id: str, limit: int, offset: int
    ) -> tuple[list[ApiToken], int]:
        base = ApiToken.user_id == user_id
        total = (await self.session.execute(select(func.count()).where(base))).scalar_one()
        rows = await self.session.execute(
            select(ApiToken)
            .where(base)
            .order_by(ApiToken.created_at.desc())
            .limit(limit)
            .offset(offset)
        )
        return list(rows.scalars()), total

    async def revoke(self, user_id: str, token_id: uuid.UUID) -> bool:
        result = await self.session.execute(
            update(ApiToken)
            .where(
                ApiToken.id == token_id, ApiToken.user_id == user_id, ApiToken.revoked_at.is_(None)
            )
            .values(revoked_at=datetime.now(UTC))
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def revoke_hash(self, user_id: str, token_hash: str) -> bool:
        """Revoke the user's active token of this hash (a console sign-out)."""
        result = await self.session.execute(
            update(ApiToken)
            .where(
                ApiToken.token_hash == token_hash,
                ApiToken.user_id == user_id,
                ApiToken.revoked_at.is_(None),
            )
            .values(revoked_at=datetime.now(UTC))
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]
