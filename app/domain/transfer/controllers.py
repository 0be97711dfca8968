"""`GET /me/export`, `POST /me/import` and `GET /admin/users/{id}/export`.

Neither holds a pooled connection at the client's pace: the export reads each page in a
short transaction of its own and is bounded in time (`EXPORT_IDLE_SECONDS`,
`EXPORT_MAX_SECONDS`); the import spools its body to disk first, then runs in one
transaction from the file.
"""

from __future__ import annotations

from litestar import Controller, Request, get, post
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.auth.controllers import require_admin
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.sessions.naming import start_naming_imported
from app.domain.transfer.exporter import export_lines
from app.domain.transfer.ndjson import ndjson_lines
from app.domain.transfer.services import ImportReport, import_into, require_user
from app.domain.transfer.spool import file_chunks, spool_body
from app.lib.bounded_stream import BoundedStream
from app.lib.errors import PayloadTooLarge

NDJSON = "application/x-ndjson"


def _export(runtime: Runtime, user_id: str) -> BoundedStream:
    settings = runtime.settings
    filename = f"navi-export-{user_id}.ndjson".replace('"', "")
    return BoundedStream(
        export_lines(runtime.session_factory, settings, user_id),
        idle_seconds=settings.export_idle_seconds,
        max_seconds=settings.export_max_seconds,
        what="export",
        media_type=NDJSON,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


class TransferController(Controller):
    path = "/me"
    tags = ["transfer"]

    @get("/export", media_type=NDJSON)
    async def export_mine(self, principal: Principal, runtime: Runtime) -> BoundedStream:
        return _export(runtime, principal.id)

    # The app-wide body limit (MAX_REQUEST_BODY_MB) is for JSON; an export file is read
    # line by line and limited by IMPORT_MAX_MB.
    @post("/import", status_code=201, request_max_body_size=None, opt={"errors": ["507"]})
    async def import_mine(
        self, request: Request, principal: Principal, runtime: Runtime
    ) -> ImportReport:
        settings = runtime.settings
        limit = settings.import_max_mb * 1024 * 1024
        if request.content_length is not None and request.content_length > limit:
            raise PayloadTooLarge(f"body: more than {limit} bytes (IMPORT_MAX_MB)")
        # the whole body on disk before any connection is taken
        body = await spool_body(request.stream(), settings)
        try:
            lines = ndjson_lines(file_chunks(body), limit)
            report = await import_into(runtime.session_factory, settings, principal.id, lines)
        finally:
            body.close()
        start_naming_imported(runtime, principal.id)  # committed: name what has no name
        return report


class AdminExportController(Controller):
    path = "/admin/users"
    tags = ["admin"]

    @get("/{user_id:str}/export", media_type=NDJSON)
    async def export_user(
        self, user_id: str, principal: Principal, db: AsyncSession, runtime: Runtime
    ) -> BoundedStream:
        require_admin(principal)
        await require_user(db, user_id)
        return _export(runtime, user_id)
