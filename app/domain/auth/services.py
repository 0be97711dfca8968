"""Resolving the caller, and managing users and tokens."""

from __future__ import annotations

import re
import uuid
from datetime import datetime

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.models import ApiToken, User
from app.domain.auth.repositories import TokenRepository, UserRepository
from app.domain.auth.tokens import display_prefix, hash_token, new_token
from app.domain.kernel.principal import (
    ADMIN_ID,
    ALL_PERMISSIONS,
    ANONYMOUS_ID,
    BUILT_IN_USERS,
    Principal,
)
from app.domain.kernel.principal_cache import PrincipalCache
from app.domain.kernel.runtime import Runtime
from app.lib.errors import Conflict, Forbidden, NotFound, Unauthorized, Unprocessable

log = structlog.get_logger()

ANONYMOUS = Principal(
    id=ANONYMOUS_ID,
    name=ANONYMOUS_ID,
    is_admin=True,  # local mode: every access check is bypassed (seed 003, Ownership)
    permissions=frozenset(ALL_PERMISSIONS),
    auth_disabled=True,
)

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


def principal_of(user: User, token: ApiToken | None = None) -> Principal:
    """The principal of `user`, signed in with `token` (its expiry travels with it)."""
    return Principal(
        id=user.id,
        name=user.name,
        is_admin=user.is_admin,
        permissions=frozenset(user.permissions or ()),
        token_expires_at=token.expires_at if token is not None else None,
    )


def bearer_token(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header; "" when there is none."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def bearer_hash(authorization: str | None) -> str:
    """The SHA-256 of the bearer token of an Authorization header (401 when malformed)."""
    if not authorization:
        raise Unauthorized("missing Authorization: Bearer <token> header")
    token = bearer_token(authorization)
    if not token:
        raise Unauthorized("expected Authorization: Bearer <token>")
    return hash_token(token)


async def principal_for_hash(session: AsyncSession, token_hash: str) -> Principal:
    # The lookup is by SHA-256 of the token through a unique index: the time it takes does
    # not depend on how many leading characters of a guess are right.
    found = await TokenRepository(session).user_for_hash(token_hash)
    if found is None:
        raise Unauthorized("invalid or revoked token")
    return principal_of(found[0], found[1])


async def resolve_cached(
    factory: async_sessionmaker[AsyncSession],
    settings: Settings,
    cache: PrincipalCache,
    authorization: str | None,
) -> Principal:
    """The caller's principal (anonymous when auth is off), through the process's cache:
    a hit costs no database session (see app/domain/kernel/principal_cache.py for what is cached and
    when it is dropped)."""
    if not settings.auth_enabled:
        return ANONYMOUS
    token_hash = bearer_hash(authorization)
    principal = cache.get(token_hash)
    if principal is not None:
        return principal
    epoch = cache.epoch
    async with factory() as session:
        principal = await principal_for_hash(session, token_hash)
    cache.put(token_hash, principal, epoch)
    return principal


async def bootstrap(session: AsyncSession, settings: Settings) -> None:
    """Ensure the anonymous user (local mode) and the admin of NAVI_ADMIN_TOKEN exist."""
    users = UserRepository(session)
    await users.ensure(ANONYMOUS_ID, ANONYMOUS_ID, is_admin=False, permissions=[])
    if settings.admin_token:
        await users.ensure(ADMIN_ID, ADMIN_ID, is_admin=True, permissions=list(ALL_PERMISSIONS))
        token = settings.admin_token
        await TokenRepository(session).ensure(
            ADMIN_ID, "bootstrap (NAVI_ADMIN_TOKEN)", hash_token(token), display_prefix(token)
        )


class UserService:
    def __init__(self, session: AsyncSession, max_tokens_per_user: int) -> None:
        self.users = UserRepository(session)
        self.tokens = TokenRepository(session)
        self.max_tokens_per_user = max_tokens_per_user

    @classmethod
    def of(cls, db: AsyncSession, runtime: Runtime) -> UserService:
        """The service on `db`, with the runtime's MAX_TOKENS_PER_USER."""
        return cls(db, runtime.settings.max_tokens_per_user)

    async def create_user(self, name: str, *, is_admin: bool, permissions: list[str]) -> User:
        if not _NAME_RE.match(name):
            raise Unprocessable(
                "name: 1-64 characters, letters, digits and _ . @ -, starting with a letter or digit"
            )
        unknown = sorted(set(permissions) - set(ALL_PERMISSIONS))
        if unknown:
            raise Unprocessable(
                f"permissions: unknown {', '.join(unknown)}; known: {', '.join(ALL_PERMISSIONS)}"
            )
        if await self.users.get_by_name(name) is not None:
            raise Conflict(f"a user named {name!r} already exists")
        user = await self.users.add(
            User(
                id=uuid.uuid4().hex,
                name=name,
                is_admin=is_admin,
                permissions=sorted(set(permissions)),
            )
        )
        log.info("auth.user_created", user_id=user.id, is_admin=is_admin)
        return user

    async def list_users(self, limit: int, offset: int) -> tuple[list[User], int]:
        return await self.users.list_page(limit, offset)

    async def require_user(self, user_id: str) -> User:
        """The user, or 404."""
        user = await self.users.get(user_id)
        if user is None:
            raise NotFound(f"no user {user_id!r}")
        return user

    async def check_deletable(self, user_id: str, by: Principal) -> User:
        """The user an admin may delete (deletion.py deletes them and everything they own;
        every table of user data reaches `navi_users` by an `ON DELETE CASCADE` key). The
        built-in users are refused (409): without `admin` the bootstrap token fails until
        a restart re-creates it, and `anonymous` owns every local-mode session."""
        if user_id in BUILT_IN_USERS:
            raise Conflict(
                f"user_id: {user_id!r} is built in ({BUILT_IN_USERS[user_id]}) and cannot "
                "be deleted"
            )
        if user_id == by.id:
            raise Unprocessable("user_id: you cannot delete yourself")
        return await self.require_user(user_id)

    async def issue_token(
        self, user_id: str, name: str, expires_at: datetime | None = None
    ) -> tuple[ApiToken, str]:
        """A new token for `user_id`, shown once. 409 when the user already holds
        MAX_TOKENS_PER_USER active (not revoked, not expired) tokens: every way of issuing
        one (`POST /me/tokens`, the admin routes, a console sign-in) counts against it."""
        held = await self.tokens.count_active_locked(user_id)
        if held >= self.max_tokens_per_user:
            raise Conflict(
                f"this user already holds {held} active tokens, the limit "
                f"(MAX_TOKENS_PER_USER={self.max_tokens_per_user}); revoke one first "
                "(DELETE /me/tokens/{id})"
            )
        token = new_token()
        row = await self.tokens.add(
            user_id, name, hash_token(token), display_prefix(token), expires_at
        )
        log.info("auth.token_issued", user_id=user_id, token_id=str(row.id))
        return row, token

    async def issue_own_token(self, principal: Principal, name: str) -> tuple[ApiToken, str]:
        """`POST /me/tokens`: a token the caller issues for themselves. A caller signed in
        with a token that expires (a console sign-in's cookie) is refused (403): a
        short-lived credential must not turn itself into a permanent one. Sign in with a
        non-expiring token (or ask an admin) to create tokens."""
        if principal.auth_disabled:
            raise Forbidden("tokens need NAVI_AUTH_ENABLED=true")
        if principal.token_expires_at is not None:
            raise Forbidden(
                "a token that expires (such as a console sign-in's) cannot issue tokens; "
                "use a token that does not expire"
            )
        return await self.issue_token(principal.id, name)

    async def list_tokens(
        self, user_id: str, limit: int, offset: int
    ) -> tuple[list[ApiToken], int]:
        return await self.tokens.list_for_user(user_id, limit, offset)

    async def revoke_token(self, user_id: str, token_id: uuid.UUID) -> None:
        """Revoke one of the user's active tokens, or 404."""
        if not await self.tokens.revoke(user_id, token_id):
            raise NotFound("no such active token")

    async def revoke_own_token(self, user_id: str, token: str) -> bool:
        """Revoke the user's token given in full (a console sign-out); False if it was
        not theirs or not active."""
        return await self.tokens.revoke_hash(user_id, hash_token(token))
