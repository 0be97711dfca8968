from __future__ import annotations

import uuid

import anyio.to_thread
import structlog
from litestar import Controller, Request, get, post
from litestar.datastructures import State
from litestar.response import File
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.files import services
from app.domain.files.schemas import CardOut, FileOut, PublishIn, ShareFileIn, UploadOut
from app.domain.files.storage import file_info, list_files, session_dir
from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.lib.pagination import Limit, Offset, Page, page

log = structlog.get_logger()


# HTML and SVG may carry script: never rendered on our origin.
ACTIVE_CONTENT_CSP = "default-src 'none'; sandbox"


class SessionFilesController(Controller):
    path = "/sessions/{session_id:uuid}"
    tags = ["files"]

    # The app-wide body limit (MAX_REQUEST_BODY_MB) is for JSON. Uploads are streamed to
    # disk and limited per file by SESSION_FILES_MAX_SIZE_MB (and per request by
    # MAX_FILES_PER_UPLOAD of them) in the receiver, which knows the settings.
    @post("/files", status_code=201, request_max_body_size=None)
    async def upload_files(
        self,
        session_id: uuid.UUID,
        request: Request,
        principal: Principal,
        state: State,
        settings: Settings,
    ) -> UploadOut:
        """Multipart upload (one or more `files` parts), streamed to disk."""
        await services.check_session(state, settings, session_id, Viewer.editor(principal))
        files, block = await services.upload(
            settings,
            session_id,
            request.headers.get("content-type", ""),
            request.content_length,
            request.stream(),
        )
        return UploadOut(files=files, message_block=block)

    @get("/files")
    async def list_session_files(
        self,
        session_id: uuid.UUID,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[FileOut]:
        await SessionAccess(db).get(session_id, Viewer.of(principal))
        directory = session_dir(settings, session_id)

        def read() -> tuple[list[FileOut], int]:
            names = list_files(directory)
            chosen = names[offset : offset + limit]
            return [services.file_out(session_id, file_info(directory / n)) for n in chosen], len(
                names
            )

        items, total = await anyio.to_thread.run_sync(read)
        return page(items, total, limit, offset)

    @get("/files/{filename:str}")
    async def download_file(
        self,
        session_id: uuid.UUID,
        filename: str,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
    ) -> File:
        await SessionAccess(db).get(session_id, Viewer.of(principal))
        path = services.stored_file(settings, session_id, filename)
        info = await anyio.to_thread.run_sync(file_info, path)
        ctype = info.content_type
        headers = {"Cache-Control": "private, no-cache"}  # nosniff: every response (asgi.py)
        disposition = "inline"
        if ctype.active:
            headers["Content-Security-Policy"] = ACTIVE_CONTENT_CSP
            disposition = "attachment"
        elif ctype.kind == "binary":
            disposition = "attachment"
        return File(
            path,
            filename=info.name,
            media_type=ctype.media_type,  # text/* gets charset=utf-8
            content_disposition_type=disposition,  # type: ignore[arg-type]
            headers=headers,
        )

    @post("/share_file", status_code=201)
    async def share_file(
        self,
        session_id: uuid.UUID,
        data: ShareFileIn,
        principal: Principal,
        state: State,
        settings: Settings,
    ) -> FileOut:
        """Copy a local file (under SHARE_FILE_ROOTS) into the session directory."""
        await services.check_session(state, settings, session_id, Viewer.editor(principal))
        info = await anyio.to_thread.run_sync(
            services.copy_shared_file, settings, session_id, data.path
        )
        log.info("files.share_file_copied", session_id=str(session_id), size=info.size)
        return services.file_out(session_id, info)

    @post("/publish", status_code=200)
    async def publish(
        self,
        session_id: uuid.UUID,
        data: PublishIn,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
    ) -> CardOut:
        """content_publish: card metadata of a file already in the session directory."""
        await SessionAccess(db).get(session_id, Viewer.of(principal))
        return await anyio.to_thread.run_sync(
            services.publish_card, settings, session_id, data.filename
        )
