"""`/console/login` and `/console/logout` (how the cookie works: app/console/auth.py)."""

from __future__ import annotations

from typing import Any

import structlog
from litestar import Controller, Request, get, post
from litestar.response import Redirect, Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.console.auth import (
    COOKIE,
    COOKIE_PATH,
    CSRF_FIELD,
    LOGIN_COOKIE,
    MAX_TOKEN_CHARS,
    cookie_kwargs,
    csrf_for,
    csrf_matches,
    new_local_cookie,
    new_login_nonce,
    session_expiry,
)
from app.console.web import page
from app.domain.auth.services import UserService, principal_for_hash
from app.domain.auth.tokens import hash_token
from app.domain.kernel.commits import after_commit
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.lib.errors import Conflict, Unauthorized

log = structlog.get_logger()
LOGIN_MAX_AGE = 3600


def _login_page(
    request: Request[Any, Any, Any], nonce: str, error: str | None, status: int
) -> Template:
    settings = request.app.state.runtime.settings
    response = page(
        request,
        "login.html",
        status_code=status,
        login_csrf=csrf_for(nonce),
        error=error,
        auth_enabled=settings.auth_enabled,
    )
    response.set_cookie(LOGIN_COOKIE, nonce, **cookie_kwargs(request, settings, LOGIN_MAX_AGE))
    return response


class SignInController(Controller):
    path = "/"
    opt = {"console_public": True}

    @get("/login")
    async def login_page(self, request: Request[Any, Any, Any]) -> Template:
        return _login_page(request, new_login_nonce(), None, 200)

    @post("/login")
    async def login(
        self, request: Request[Any, Any, Any], db: AsyncSession, runtime: Runtime
    ) -> Any:
        form = await request.form()
        nonce = request.cookies.get(LOGIN_COOKIE, "")
        if not csrf_matches(nonce, form.get(CSRF_FIELD)):
            return _login_page(request, new_login_nonce(), "The form expired; sign in again.", 403)
        settings = runtime.settings
        max_age = int(settings.console_session_hours * 3600)
        if not settings.auth_enabled:
            cookie = new_local_cookie()
        else:
            token = (form.get("token") or "").strip()
            if not token or len(token) > MAX_TOKEN_CHARS:
                return _login_page(request, nonce, "token: paste a Navi token.", 422)
            try:
                principal = await principal_for_hash(db, hash_token(token))
            except Unauthorized:
                log.info("console.login_refused")
                return _login_page(request, nonce, "That token is invalid or revoked.", 401)
            # The session never outlives the token it was opened with.
            expires_at = session_expiry(settings)
            if principal.token_expires_at is not None:
                expires_at = min(expires_at, principal.token_expires_at)
            try:
                _, cookie = await UserService.of(db, runtime).issue_token(
                    principal.id, "console sign-in", expires_at=expires_at
                )
            except Conflict as exc:  # MAX_TOKENS_PER_USER
                return _login_page(request, nonce, exc.detail, 409)
            log.info("console.login", user_id=principal.id)
        response: Redirect = Redirect("/console", status_code=303)
        response.set_cookie(COOKIE, cookie, **cookie_kwargs(request, settings, max_age))
        response.delete_cookie(LOGIN_COOKIE, path=COOKIE_PATH)
        return response


class SignOutController(Controller):
    path = "/"

    @post("/logout")
    async def logout(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Redirect:
        cookie = request.state.console_cookie
        if runtime.settings.auth_enabled:
            await UserService.of(db, runtime).revoke_own_token(principal.id, cookie)
            after_commit(db, lambda: runtime.principal_cache.drop_user(principal.id))
            log.info("console.logout", user_id=principal.id)
        response = Redirect("/console/login", status_code=303)
        response.delete_cookie(COOKIE, path=COOKIE_PATH)
        return response
