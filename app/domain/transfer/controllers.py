"""`GET /me/export`, `POST /me/import` and `GET /admin/users/{id}/export`."""

from __future__ import annotations

from collections.abc import AsyncIterator

from litestar import Controller, Request, get, post
from litestar.response import Stream
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.engine import read_snapshot
from app.domain.auth.controllers import require_admin
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.transfer.deps import DEPENDENCIES
from app.domain.transfer.ndjson import ndjson_lines
from app.domain.transfer.services import (
    ImportReport,
    ImportService,
    export_lines,
    require_user,
)
from app.lib.errors import PayloadTooLarge

NDJSON = "application/x-ndjson"


def _export(runtime: Runtime, user_id: str) -> Stream:
    """The export streamed from a snapshot session of its own, opened when the first
    line is asked for and closed when the last is sent (or the client goes away)."""

    async def body() -> AsyncIterator[bytes]:
        async with read_snapshot(runtime.session_factory) as db:
            async for chunk in export_lines(db, runtime.settings, user_id):
                yield chunk

    filename = f"navi-export-{user_id}.ndjson".replace('"', "")
    return Stream(
        body(),
        media_type=NDJSON,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


class TransferController(Controller):
    path = "/me"
    tags = ["transfer"]
    dependencies = DEPENDENCIES

    @get("/export", media_type=NDJSON)
    async def export_mine(self, principal: Principal, runtime: Runtime) -> Stream:
        return _export(runtime, principal.id)

    # The app-wide body limit (MAX_REQUEST_BODY_MB) is for JSON; an export file is read
    # line by line and limited by IMPORT_MAX_MB.
    @post("/import", status_code=201, request_max_body_size=None)
    async def import_mine(
        self, request: Request, principal: Principal, transfer: ImportService, settings: Settings
    ) -> ImportReport:
        limit = settings.import_max_mb * 1024 * 1024
        if request.content_length is not None and request.content_length > limit:
            raise PayloadTooLarge(f"body: more than {limit} bytes (IMPORT_MAX_MB)")
        return await transfer.run(principal.id, ndjson_lines(request.stream(), limit))


class AdminExportController(Controller):
    path = "/admin/users"
    tags = ["admin"]

    @get("/{user_id:str}/export", media_type=NDJSON)
    async def export_user(
        self, user_id: str, principal: Principal, db: AsyncSession, runtime: Runtime
    ) -> Stream:
        require_admin(principal)
        await require_user(db, user_id)
        return _export(runtime, user_id)
