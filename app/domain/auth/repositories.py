from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import func, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ApiToken, User


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
                    User.deleting_since.is_(None),  # being deleted: signed out for good
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


# The user-keyed tables whose rows are not reached through a session (deleted in
# batches before the user's row, whose cascade then has little left to do).
_USER_TABLES = ("memory_chunks", "memory_facts", "fact_versions", "error_memory")


class UserDeletionRepository:
    """The SQL of deleting a user batch by batch (app/domain/auth/deletion.py): every
    statement names the user (one shard on Citus) and touches a bounded number of rows."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def mark(self, user_id: str, now: datetime) -> None:
        """Mark the user as being deleted (a mark already there is kept)."""
        await self.session.execute(
            text(
                "UPDATE navi_users SET deleting_since = :now"
                " WHERE id = :uid AND deleting_since IS NULL"
            ),
            {"uid": user_id, "now": now},
        )

    async def still_deleting(self, user_id: str, now: datetime) -> bool:
        """Whether the user is still marked; the mark moves to `now` (a running deletion
        stays fresh: the periodic job takes up only one whose runner stopped)."""
        rows = await self.session.execute(
            text(
                "UPDATE navi_users SET deleting_since = :now"
                " WHERE id = :uid AND deleting_since IS NOT NULL RETURNING 1"
            ),
            {"uid": user_id, "now": now},
        )
        return rows.first() is not None

    async def deleting(self, user_id: str) -> bool | None:
        """Whether the user is being deleted; None: no such user (any more)."""
        rows = await self.session.execute(
            text("SELECT deleting_since IS NOT NULL FROM navi_users WHERE id = :uid"),
            {"uid": user_id},
        )
        found = rows.scalar_one_or_none()
        return None if found is None else bool(found)

    async def marked_before(self, before: datetime, limit: int) -> list[str]:
        """Users marked for deletion before `before` (a reference table on Citus)."""
        rows = await self.session.execute(
            text(
                "SELECT id FROM navi_users WHERE deleting_since < :before"
                " ORDER BY deleting_since LIMIT :n"
            ),
            {"before": before, "n": limit},
        )
        return list(rows.scalars())

    async def delete_sessions(self, user_id: str, ids: list[uuid.UUID]) -> None:
        """These sessions, with their chunks (no foreign key to the session, by design)
        and every row that cascades from the session."""
        params = {"uid": user_id, "sids": ids}
        await self.session.execute(
            text("DELETE FROM memory_chunks WHERE user_id = :uid AND session_id = ANY(:sids)"),
            params,
        )
        await self.session.execute(
            text("DELETE FROM sessions WHERE user_id = :uid AND id = ANY(:sids)"), params
        )

    async def delete_some(self, user_id: str, limit: int) -> int:
        """Up to `limit` rows of one of the user-keyed tables not under a session; how
        many (0: none left in any)."""
        for table in _USER_TABLES:
            rows = await self.session.execute(
                text(
                    f"DELETE FROM {table} WHERE user_id = :uid AND id IN"
                    f" (SELECT id FROM {table} WHERE user_id = :uid LIMIT :n)"
                ),
                {"uid": user_id, "n": limit},
            )
            n = int(rows.rowcount)  # type: ignore[attr-defined]
            if n:
                return n
        return 0

    async def delete_user(self, user_id: str) -> bool:
        """The user's row (its cascade takes what is left: tokens, summary, counts, …)."""
        rows = await self.session.execute(
            text("DELETE FROM navi_users WHERE id = :uid RETURNING id"), {"uid": user_id}
        )
        return rows.scalar_one_or_none() is not None
