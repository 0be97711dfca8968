"""`/console/admin`: users and tokens, a user's memory and sessions (read only), and this
process's health and background jobs.

Who may see what is the REST API's rule, checked by the same functions:

- every admin page: an admin (`navi.users.admin`) or a holder of `navi.memory.read_all`
  or `navi.sessions.read_all`; anyone else 403;
- users and tokens (list, create, tokens, issue, revoke, delete): `require_admin`, as
  `/admin/users` (so not in local mode);
- a user's facts: `navi.memory.read_all`, as `GET /admin/memory`; their sessions:
  `navi.sessions.read_all`, as `GET /sessions`. Both read only: the page has no form;
- health, jobs and the sessions whose fact extraction failed (every user's): an admin,
  as `/metrics` (local mode too).

A new token is shown once, in the answer to the POST that issued it (201), never in a
redirect's URL and never logged.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from urllib.parse import quote

from litestar import Controller, Request, get, post
from litestar.params import Parameter
from litestar.response import Redirect, Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.console.web import form_text, page
from app.domain.auth.controllers import forget_tokens_after_commit, require_admin
from app.domain.auth.deletion import delete_user
from app.domain.auth.services import UserService
from app.domain.facts.extraction_repository import ExtractionRepository
from app.domain.facts.services import FactService, fact_out
from app.domain.kernel.access import Viewer
from app.domain.kernel.principal import (
    ALL_PERMISSIONS,
    BUILT_IN_USERS,
    PERM_USERS_ADMIN,
    Principal,
)
from app.domain.kernel.runtime import Runtime
from app.domain.sessions.services import SessionService
from app.domain.system.health import health_report
from app.lib.errors import Forbidden, Unprocessable

PAGE_SIZE = 50
SESSIONS_SHOWN = 25
EXTRACTION_SHOWN = 50  # sessions whose fact extraction failed (system page)
MAX_NAME = 200
Offset = Annotated[int, Parameter(ge=0, le=1_000_000)]
Limit = Annotated[int, Parameter(ge=1, le=200)]
CHECKED = frozenset({"true", "on"})


def _require_admin_page(principal: Principal) -> None:
    """Every admin page: an admin or a reader of all memory or all sessions."""
    if not (
        principal.has(PERM_USERS_ADMIN)
        or principal.can_read_all_memory
        or principal.can_read_all_sessions
    ):
        raise Forbidden(
            "the admin pages need an admin, navi.memory.read_all or navi.sessions.read_all"
        )


def _manages_users(principal: Principal) -> bool:
    try:
        require_admin(principal)
    except Forbidden:
        return False
    return True


def _require_system(principal: Principal) -> None:
    """Health and jobs: as `/metrics` (an admin; anyone in local mode)."""
    if not (principal.auth_disabled or principal.has(PERM_USERS_ADMIN)):
        raise Forbidden("health and jobs need an admin (as /metrics)")


def _token_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise Unprocessable("token_id: expected a token id (a UUID)") from exc


def _user_url(user_id: str, suffix: str = "") -> str:
    return f"/console/admin/users/{quote(user_id, safe='')}{suffix}"


def _done(url: str, message: str) -> Redirect:
    return Redirect(f"{url}?done={quote(message)}", status_code=303)


def _permissions(form: Any) -> list[str]:
    """The ticked permissions; which are known is `UserService.create_user`'s check."""
    chosen = [p.strip() for p in form.getall("permissions", []) if p.strip()]
    if len(chosen) > len(ALL_PERMISSIONS) or any(len(p) > MAX_NAME for p in chosen):
        raise Unprocessable(f"permissions: at most {len(ALL_PERMISSIONS)}, one of each")
    return chosen


def _checkbox(form: Any, name: str) -> bool:
    value = (form.get(name) or "").strip().lower()
    if value and value not in CHECKED:
        raise Unprocessable(f"{name}: a checkbox (true or absent)")
    return bool(value)


def _ago(ts: datetime | None, now: datetime) -> str:
    if ts is None:
        return "never"
    seconds = max(0, int((now - ts).total_seconds()))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


def job_rows(runtime: Runtime) -> list[dict[str, Any]]:
    """This process's periodic jobs (`Jobs.status`), by name, for the page."""
    now = datetime.now(UTC)
    rows = []
    for name, s in sorted(runtime.jobs.status.items()):
        if s.running:
            state = "running"
        elif s.runs == 0:
            state = "waiting for its first run"
        elif s.last_failed:
            state = "failed"
        else:
            state = "ok"
        rows.append(
            {
                "name": name,
                "interval": s.interval,
                "state": state,
                "runs": s.runs,
                "failures": s.failures,
                "last_started": s.last_started,
                "last_started_ago": _ago(s.last_started, now),
                "last_finished": s.last_finished,
                "last_seconds": s.last_seconds,
                "next_due": (s.last_started or now) + timedelta(seconds=s.interval),
                "last_error": s.last_error,
                "last_error_at": s.last_error_at,
            }
        )
    return rows


class AdminPage(Controller):
    path = "/admin"

    @get("/")
    async def overview(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
        offset: Offset = 0,
        limit: Limit = PAGE_SIZE,
    ) -> Template:
        _require_admin_page(principal)
        manages = _manages_users(principal)
        rows: list[Any] = []
        total = 0
        if manages:
            rows, total = await UserService.of(db, runtime).list_users(limit, offset)
        return page(
            request,
            "admin.html",
            nav="admin",
            manages_users=manages,
            sees_system=principal.auth_disabled or principal.has(PERM_USERS_ADMIN),
            users=rows,
            total=total,
            offset=offset,
            limit=limit,
            all_permissions=ALL_PERMISSIONS,
        )

    @get("/lookup")
    async def lookup(self, principal: Principal, user_id: str = "") -> Redirect:
        """The overview's "open a user" form (GET): to that user's memory page."""
        _require_admin_page(principal)
        target = user_id.strip()
        if not target:
            raise Unprocessable("user_id: required")
        if len(target) > MAX_NAME:
            raise Unprocessable(f"user_id: at most {MAX_NAME} characters")
        return Redirect(_user_url(target, "/memory"), status_code=303)

    @post("/users", status_code=303)
    async def create_user(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Redirect:
        _require_admin_page(principal)
        require_admin(principal)
        form = await request.form()
        name = form_text(form, "name", limit=MAX_NAME)
        user = await UserService.of(db, runtime).create_user(
            name, is_admin=_checkbox(form, "is_admin"), permissions=_permissions(form)
        )
        return _done(_user_url(user.id), f"User {user.name} created")

    @get("/users/{user_id:str}")
    async def user(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
        user_id: str,
        offset: Offset = 0,
        limit: Limit = PAGE_SIZE,
    ) -> Template:
        _require_admin_page(principal)
        require_admin(principal)
        users = UserService.of(db, runtime)
        user = await users.require_user(user_id)
        tokens, total = await users.list_tokens(user.id, limit, offset)
        return page(
            request,
            "admin_user.html",
            nav="admin",
            user=user,
            user_url=_user_url(user.id),
            tokens=tokens,
            total=total,
            offset=offset,
            limit=limit,
            now=datetime.now(UTC),
            is_self=user.id == principal.id,
            built_in=user.id in BUILT_IN_USERS,
        )

    @post("/users/{user_id:str}/tokens", status_code=201)
    async def issue_token(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
        user_id: str,
    ) -> Template:
        _require_admin_page(principal)
        require_admin(principal)
        users = UserService.of(db, runtime)
        user = await users.require_user(user_id)
        name = form_text(await request.form(), "name", limit=MAX_NAME, required=False)
        row, token = await users.issue_token(user.id, name)
        return page(
            request,
            "admin_token.html",
            nav="admin",
            status_code=201,
            user=user,
            user_url=_user_url(user.id),
            token_row=row,
            token=token,
        )

    @post("/users/{user_id:str}/tokens/{token_id:str}/revoke", status_code=303)
    async def revoke_token(
        self,
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
        user_id: str,
        token_id: str,
    ) -> Redirect:
        _require_admin_page(principal)
        require_admin(principal)
        users = UserService.of(db, runtime)
        user = await users.require_user(user_id)
        await users.revoke_token(user.id, _token_id(token_id))
        forget_tokens_after_commit(db, runtime, user.id)
        return _done(_user_url(user.id), "Token revoked")

    @post("/users/{user_id:str}/delete", status_code=303)
    async def delete_user(
        self,
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
        user_id: str,
    ) -> Redirect:
        _require_admin_page(principal)
        require_admin(principal)
        users = UserService.of(db, runtime)
        user = await users.check_deletable(user_id, principal)
        state, left = await delete_user(runtime, user.id)
        if state == "deleted":
            return _done("/console/admin", f"User {user.name} deleted")
        return _done(
            "/console/admin",
            f"User {user.name} is being deleted ({left} session(s) left): it goes on in"
            " the background",
        )

    @get("/users/{user_id:str}/memory")
    async def user_memory(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
        user_id: str,
        offset: Offset = 0,
        limit: Limit = PAGE_SIZE,
        include_merged: bool = False,
    ) -> Template:
        _require_admin_page(principal)
        user = await UserService.of(db, runtime).require_user(user_id)
        facts: list[Any] = []
        fact_total = 0
        if principal.can_read_all_memory:  # as AdminMemoryController.list_all
            service = FactService.of(db, runtime)
            rows = await service.get_all_facts(
                user.id,
                all_users=True,
                limit=limit,
                offset=offset,
                sort_by="category",
                sort_order="asc",
                include_merged=include_merged,
            )
            facts = [fact_out(r) for r in rows]
            fact_total = await service.fact_count(
                user.id, all_users=True, include_merged=include_merged
            )
        sessions: list[Any] = []
        session_total = 0
        if principal.can_read_all_sessions:  # that user's sessions only
            sessions, session_total = await SessionService.of(db, runtime).list_page(
                Viewer(user_id=user.id), limit=SESSIONS_SHOWN, offset=0
            )
        return page(
            request,
            "admin_memory.html",
            nav="admin",
            user=user,
            user_url=_user_url(user.id),
            manages_users=_manages_users(principal),
            reads_memory=principal.can_read_all_memory,
            reads_sessions=principal.can_read_all_sessions,
            facts=facts,
            total=fact_total,
            offset=offset,
            limit=limit,
            include_merged=include_merged,
            sessions=sessions,
            session_total=session_total,
        )

    @get("/system")
    async def system(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Template:
        _require_admin_page(principal)
        _require_system(principal)
        troubled, troubled_total = await ExtractionRepository(db).troubled(EXTRACTION_SHOWN)
        health = await health_report(runtime)  # what GET /health answers
        tasks = Counter(t.get_name() for t in runtime.jobs.tasks if not t.done())
        return page(
            request,
            "admin_system.html",
            nav="admin",
            health=health,
            health_status=200 if health.status != "down" else 503,
            jobs=job_rows(runtime),
            tasks=sorted(tasks.items()),
            pid=os.getpid(),
            workers=runtime.settings.web_concurrency,
            extraction=troubled,
            extraction_total=troubled_total,
            max_attempts=runtime.settings.extraction_max_attempts,
        )
