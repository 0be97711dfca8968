from __future__ import annotations

import uuid
from pathlib import Path

from litestar import Controller, MediaType, get, post
from litestar.response import File

from app.domain.kernel.deps import READ_ONLY
from app.domain.kernel.principal import Principal
from app.domain.shares.deps import DEPENDENCIES
from app.domain.shares.schemas import SharedMessages, SharedSession, ShareOut
from app.domain.shares.services import ShareService
from app.lib.errors import NotFound
from app.lib.pagination import BeforeSeq, Limit

STATIC_DIR = Path(__file__).resolve().parents[2] / "static"
PAGE_ASSETS = {
    "share.js": "text/javascript; charset=utf-8",
    "share.css": "text/css; charset=utf-8",
}
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
}  # X-Content-Type-Options: nosniff is on every response (app/asgi/http.py, security_headers)


class ShareIssueController(Controller):
    path = "/sessions/{session_id:uuid}"
    tags = ["shares"]
    dependencies = DEPENDENCIES

    @post("/share", status_code=200)
    async def share_session(
        self, session_id: uuid.UUID, principal: Principal, shares: ShareService
    ) -> ShareOut:
        """Issue the session's public read-only link (the same one on every call)."""
        token = await shares.issue(session_id, principal)
        return ShareOut(token=token, url=f"/#share={token}")


class SharedController(Controller):
    """What a link holder may do: read. There is no write method under /shared."""

    path = "/shared"
    tags = ["shares"]
    dependencies = DEPENDENCIES
    opt = {"public": True}
    response_headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}

    @get("/{token:str}", dependencies=READ_ONLY)
    async def shared_session(
        self, token: str, shares: ShareService, limit: Limit = 50
    ) -> SharedSession:
        return await shares.view(token, limit)

    @get("/{token:str}/messages", dependencies=READ_ONLY)
    async def shared_messages(
        self,
        token: str,
        shares: ShareService,
        before_seq: BeforeSeq = None,
        limit: Limit = 50,
    ) -> SharedMessages:
        return await shares.messages(token, before_seq, limit)


class SharePageController(Controller):
    """The read-only conversation page: `/#share=<token>` (static, no build step)."""

    path = "/"
    opt = {"public": True}
    include_in_schema = False
    response_headers = PAGE_HEADERS

    @get("/", media_type=MediaType.HTML)
    async def index(self) -> File:
        return File(
            STATIC_DIR / "index.html",
            media_type="text/html; charset=utf-8",
            content_disposition_type="inline",
        )

    @get("/static/{name:str}")
    async def asset(self, name: str) -> File:
        media_type = PAGE_ASSETS.get(name)
        if media_type is None:
            raise NotFound(f"no static file {name!r}")
        return File(STATIC_DIR / name, media_type=media_type, content_disposition_type="inline")
