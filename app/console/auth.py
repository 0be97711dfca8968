"""Signing in to the console, and the guard of every console page.

- `POST /console/login` takes a Navi token (form field `token`), checks it, and mints a
  token of the console's own for the same user, expiring after
  NAVI_CONSOLE_SESSION_HOURS. That token is the session cookie (`navi_console`:
  HttpOnly, SameSite=Strict, Path=/console). Sign-out revokes it, so a copied cookie dies
  with the session; revoking the user's tokens or deleting the user ends it too.
- CSRF: every form carries `csrf`, the HMAC-SHA256 of the cookie's value, checked in
  constant time on every non-GET console request before its handler runs (a script's
  fetch sends it as the `X-Navi-CSRF` header instead, leaving the body unread); the `Origin`
  header, when sent, must be this host. The login form uses a pre-session cookie the same
  way.
- Local mode (NAVI_AUTH_ENABLED=false): there is nothing to sign in with; the login page
  sets a random cookie (for the CSRF key) and every page is `anonymous`'s.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler
from litestar.response import Redirect

from app.config import Settings
from app.db.replica import writing_for
from app.domain.auth.services import ANONYMOUS, resolve_cached
from app.domain.kernel.runtime import Runtime
from app.lib.errors import Forbidden, NotFound, Unauthorized

COOKIE = "navi_console"
LOGIN_COOKIE = "navi_console_login"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-navi-csrf"  # a custom header: a cross-site page cannot send it either
COOKIE_PATH = "/console"
LOCAL_PREFIX = "local_"
MAX_TOKEN_CHARS = 512
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class SignInRequired(Exception):
    """No valid console session: the page answers with a redirect to the login page."""


def csrf_for(cookie: str) -> str:
    """The CSRF value of a session (or pre-session) cookie."""
    return hmac.new(cookie.encode(), b"navi-console-csrf", hashlib.sha256).hexdigest()


def csrf_matches(cookie: str, sent: str | None) -> bool:
    return bool(cookie) and hmac.compare_digest(csrf_for(cookie), sent or "")


def new_login_nonce() -> str:
    return secrets.token_urlsafe(24)


def new_local_cookie() -> str:
    return LOCAL_PREFIX + secrets.token_urlsafe(24)


def session_expiry(settings: Settings) -> datetime:
    return datetime.now(UTC) + timedelta(hours=settings.console_session_hours)


def _same_origin(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    origin = connection.headers.get("origin")
    if origin is None:  # not sent (older browsers, same-origin GET-born forms)
        return True
    host = connection.headers.get("host", "")
    return origin.split("://", 1)[-1] == host


def cookie_kwargs(
    request: Request[Any, Any, Any], settings: Settings, max_age: int
) -> dict[str, Any]:
    return {
        "path": COOKIE_PATH,
        "httponly": True,
        "samesite": "strict",
        "secure": settings.console_secure_cookie or request.url.scheme == "https",
        "max_age": max_age,
    }


async def console_guard(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """Every console route: the signed-in principal into `request.state.principal`, and
    the CSRF check of every write. Login, logout's page and the assets opt out with
    `opt={"console_public": True}`."""
    runtime: Runtime = connection.app.state.runtime
    settings = runtime.settings
    if not settings.console_enabled:
        raise NotFound("the console is disabled (NAVI_CONSOLE_ENABLED=false)")
    if handler.opt.get("console_public"):
        return
    cookie = connection.cookies.get(COOKIE, "")
    if not cookie or len(cookie) > MAX_TOKEN_CHARS:
        raise SignInRequired
    if settings.auth_enabled:
        if cookie.startswith(LOCAL_PREFIX):
            raise SignInRequired
        try:
            principal = await resolve_cached(
                runtime.session_factory, settings, runtime.principal_cache, f"Bearer {cookie}"
            )
        except Unauthorized as exc:
            raise SignInRequired from exc
    else:
        principal = ANONYMOUS
    connection.state.principal = principal
    connection.state.console_cookie = cookie
    writing_for(principal.id)
    if connection.scope.get("method") not in SAFE_METHODS:
        if not _same_origin(connection):
            raise Forbidden("cross-origin form refused")
        # A script's request (the chat's turn and upload) sends it as a header, so its
        # body is left to the handler to stream; a form, as a field.
        sent = connection.headers.get(CSRF_HEADER)
        if sent is None:
            form = await cast(Request[Any, Any, Any], connection).form()
            sent = form.get(CSRF_FIELD)
        if not csrf_matches(cookie, sent):
            raise Forbidden("the form's CSRF token is missing or wrong; reload the page")


def to_login() -> Redirect:
    return Redirect("/console/login", status_code=303)
