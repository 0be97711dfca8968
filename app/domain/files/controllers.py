from __future__ import annotations

import uuid

from litestar import Controller, Request, get, post
from litestar.response import File

from app.domain.files.deps import DEPENDENCIES
from app.domain.files.schemas import CardOut, FileOut, PublishIn, ShareFileIn, UploadOut
from app.domain.files.services import FileService
from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.lib.pagination import Limit, Offset, Page, page

# HTML and SVG may carry script: never rendered on our origin.
ACTIVE_CONTENT_CSP = "default-src 'none'; sandbox"


class SessionFilesController(Controller):
    path = "/sessions/{session_id:uuid}"
    tags = ["files"]
    dependencies = DEPENDENCIES

    # The app-wide body limit (MAX_REQUEST_BODY_MB) is for JSON. Uploads are streamed to
    # disk and limited per file by SESSION_FILES_MAX_SIZE_MB (and per request by
    # MAX_FILES_PER_UPLOAD of them) in the receiver, which knows the settings.
    @post("/files", status_code=201, request_max_body_size=None, opt={"errors": ["507"]})
    async def upload_files(
        self,
        session_id: uuid.UUID,
        request: Request,
        principal: Principal,
        files: FileService,
    ) -> UploadOut:
        """Multipart upload (one or more `files` parts), streamed to disk."""
        files.take_upload(principal.id)  # 429 past FILES_UPLOADS_PER_MINUTE
        owner = await files.check_session(session_id, Viewer.editor(principal))
        outs, block = await files.upload(
            session_id,
            request.headers.get("content-type", ""),
            request.content_length,
            request.stream(),
            owner=owner,  # within its quota (FILES_MAX_BYTES_PER_USER)
        )
        return UploadOut(files=outs, message_block=block)

    @get("/files")
    async def list_session_files(
        self,
        session_id: uuid.UUID,
        principal: Principal,
        access: SessionAccess,
        files: FileService,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[FileOut]:
        await access.get(session_id, Viewer.of(principal))
        items, total = await files.list_page(session_id, limit, offset)
        return page(items, total, limit, offset)

    @get("/files/{filename:str}")
    async def download_file(
        self,
        session_id: uuid.UUID,
        filename: str,
        principal: Principal,
        access: SessionAccess,
        files: FileService,
    ) -> File:
        await access.get(session_id, Viewer.of(principal))
        path, info = await files.stored(session_id, filename)
        ctype = info.content_type
        headers = {"Cache-Control": "private, no-cache"}  # nosniff: every response (asgi/http.py)
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

    @post("/share_file", status_code=201, opt={"errors": ["507"]})
    async def share_file(
        self,
        session_id: uuid.UUID,
        data: ShareFileIn,
        principal: Principal,
        files: FileService,
    ) -> FileOut:
        """Copy a local file (under SHARE_FILE_ROOTS) into the session directory."""
        await files.check_session(session_id, Viewer.editor(principal))
        return await files.share_file(session_id, data.path)

    @post("/publish", status_code=200)
    async def publish(
        self,
        session_id: uuid.UUID,
        data: PublishIn,
        principal: Principal,
        access: SessionAccess,
        files: FileService,
    ) -> CardOut:
        """content_publish: card metadata of a file already in the session directory."""
        await access.get(session_id, Viewer.of(principal))
        return await files.publish(session_id, data.filename)
