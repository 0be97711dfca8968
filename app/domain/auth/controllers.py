from __future__ import annotations

import uuid

from litestar import Controller, Response, delete, get, post
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ApiToken, User
from app.domain.auth.deletion import delete_user, deletion_state
from app.domain.auth.deps import DEPENDENCIES
from app.domain.auth.schemas import (
    MeOut,
    TokenCreate,
    TokenIssued,
    TokenOut,
    UserCreate,
    UserDeletionOut,
    UserOut,
)
from app.domain.auth.services import UserService
from app.domain.kernel.commits import after_commit
from app.domain.kernel.principal import PERM_USERS_ADMIN, Principal
from app.domain.kernel.runtime import Runtime
from app.lib.errors import Forbidden, Unprocessable
from app.lib.inputs import reject_nul
from app.lib.pagination import Limit, Offset, Page, page


def _user_out(u: User) -> UserOut:
    return UserOut(
        id=u.id,
        name=u.name,
        is_admin=u.is_admin,
        permissions=list(u.permissions or []),
        created_at=u.created_at,
    )


def _token_out(t: ApiToken) -> TokenOut:
    return TokenOut(
        id=t.id,
        name=t.name,
        prefix=t.prefix,
        created_at=t.created_at,
        last_used_at=t.last_used_at,
        revoked_at=t.revoked_at,
        expires_at=t.expires_at,
    )


def require_admin(principal: Principal) -> None:
    if principal.auth_disabled:
        raise Forbidden("user management needs NAVI_AUTH_ENABLED=true")
    if not principal.has(PERM_USERS_ADMIN):
        raise Forbidden("this needs an admin")


def forget_tokens_after_commit(db: AsyncSession, runtime: Runtime, user_id: str) -> None:
    """This process stops accepting the user's cached tokens once the change is committed
    (other processes: within AUTH_CACHE_TTL_SECONDS; app/domain/kernel/principal_cache.py)."""
    after_commit(db, lambda: runtime.principal_cache.drop_user(user_id))


def _check_token_name(name: str) -> str:
    reject_nul(name, "name")
    if len(name) > 200:
        raise Unprocessable("name: at most 200 characters")
    return name


class AdminUserController(Controller):
    path = "/admin/users"
    tags = ["admin"]
    dependencies = DEPENDENCIES

    @post("/")
    async def create_user(
        self, data: UserCreate, principal: Principal, users: UserService
    ) -> UserOut:
        require_admin(principal)
        user = await users.create_user(
            data.name, is_admin=data.is_admin, permissions=data.permissions
        )
        return _user_out(user)

    @get("/")
    async def list_users(
        self, principal: Principal, users: UserService, limit: Limit = 50, offset: Offset = 0
    ) -> Page[UserOut]:
        require_admin(principal)
        rows, total = await users.list_users(limit, offset)
        return page([_user_out(u) for u in rows], total, limit, offset)

    @post("/{user_id:str}/tokens")
    async def issue_token(
        self,
        user_id: str,
        principal: Principal,
        users: UserService,
        data: TokenCreate | None = None,
    ) -> TokenIssued:
        require_admin(principal)
        await users.require_user(user_id)
        name = _check_token_name(data.name if data else "")
        row, token = await users.issue_token(user_id, name)
        return TokenIssued(id=row.id, user_id=user_id, name=row.name, token=token)

    @delete("/{user_id:str}", status_code=202)  # 204 when it finished in time
    async def delete_user(
        self, user_id: str, principal: Principal, users: UserService, runtime: Runtime
    ) -> Response[UserDeletionOut | None]:
        """204 once the user and everything they own are gone; 202 when the deletion
        goes on past USER_DELETE_WAIT_SECONDS (its state at the status URL)."""
        require_admin(principal)
        await users.check_deletable(user_id, principal)
        state, left = await delete_user(runtime, user_id)
        if state == "deleted":
            return Response(None, status_code=204)
        return Response(_deletion_out(user_id, state, left), status_code=202)

    @get("/{user_id:str}/deletion")
    async def deletion(
        self, user_id: str, principal: Principal, runtime: Runtime
    ) -> UserDeletionOut:
        require_admin(principal)
        state, left = await deletion_state(runtime.session_factory, user_id)
        return _deletion_out(user_id, state, left)


def _deletion_out(user_id: str, state: str, left: int) -> UserDeletionOut:
    return UserDeletionOut(user_id, state, left, f"/admin/users/{user_id}/deletion")


class MeController(Controller):
    path = "/me"
    tags = ["auth"]
    dependencies = DEPENDENCIES

    @get("/")
    async def me(self, principal: Principal) -> MeOut:
        return MeOut(
            id=principal.id,
            name=principal.name,
            is_admin=principal.is_admin,
            permissions=sorted(principal.permissions),
            auth_enabled=not principal.auth_disabled,
        )

    @get("/tokens")
    async def list_tokens(
        self, principal: Principal, users: UserService, limit: Limit = 50, offset: Offset = 0
    ) -> Page[TokenOut]:
        rows, total = await users.list_tokens(principal.id, limit, offset)
        return page([_token_out(t) for t in rows], total, limit, offset)

    @post("/tokens")
    async def create_token(
        self, principal: Principal, users: UserService, data: TokenCreate | None = None
    ) -> TokenIssued:
        """Issue a token for yourself (shown once). It does not expire, so a caller whose
        own token expires (a console sign-in's) is refused with 403 rather than given a
        token that would outlive theirs; at MAX_TOKENS_PER_USER active tokens → 409."""
        row, token = await users.issue_own_token(
            principal, _check_token_name(data.name if data else "")
        )
        return TokenIssued(id=row.id, user_id=principal.id, name=row.name, token=token)

    @delete("/tokens/{token_id:uuid}", status_code=204)
    async def revoke_token(
        self,
        token_id: uuid.UUID,
        principal: Principal,
        users: UserService,
        db: AsyncSession,
        runtime: Runtime,
    ) -> None:
        await users.revoke_token(principal.id, token_id)
        forget_tokens_after_commit(db, runtime, principal.id)
