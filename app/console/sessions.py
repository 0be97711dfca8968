"""`/console`: the signed-in user's sessions (pinned first, searched, paged)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, get
from litestar.params import Parameter
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.console.web import page
from app.domain.kernel.access import Viewer
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.sessions.services import SessionService

PAGE_SIZE = 25
MAX_SEARCH = 200


class SessionListPage(Controller):
    path = "/"

    @get("/")
    async def sessions(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
        q: Annotated[str, Parameter(max_length=MAX_SEARCH)] = "",
        offset: Annotated[int, Parameter(ge=0, le=1_000_000)] = 0,
        limit: Annotated[int, Parameter(ge=1, le=100)] = PAGE_SIZE,
    ) -> Template:
        term = q.strip()  # (a NUL in a parameter is refused app-wide: reject_nul_parameters)
        # Own sessions only, even for a reader of all (the admin page shows other users').
        viewer = Viewer(user_id=principal.id)
        rows, total = await SessionService.of(db, runtime).list_page(
            viewer, limit=limit, offset=offset, search=term or None
        )
        return page(
            request,
            "sessions.html",
            nav="sessions",
            rows=rows,
            total=total,
            offset=offset,
            limit=limit,
            q=term,
            profiles=runtime.profiles.ids(),
        )
