"""The console's upload of a chat export (`POST /console/import/chats`, the form on the
sessions page): the same import as `POST /me/import/chats`, into the signed-in user's
account, its answer shown as a page.

The console's guard reads the form before the handler (its CSRF field): Litestar
spools the file part to a temporary file as it arrives (in memory up to 1 MiB), so the
import reads it from there. The body is bounded by the handler's
`request_max_body_size` (the default CHAT_IMPORT_MAX_MB) and then by the setting.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from litestar import Controller, Request, post
from litestar.datastructures import UploadFile
from litestar.response import Template

from app.console.web import page
from app.domain.chat_import.reader import ExportReader
from app.domain.chat_import.services import import_chats
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.lib.errors import PayloadTooLarge, Unprocessable

MB = 1024 * 1024
FORM_MAX_BYTES = 2048 * MB + 64 * 1024  # CHAT_IMPORT_MAX_MB's default and the form's own


def _size(upload: UploadFile) -> int:
    upload.file.seek(0, 2)
    size = upload.file.tell()
    upload.file.seek(0)
    return size


class ChatImportForm(Controller):
    path = "/import"

    @post("/chats", request_max_body_size=FORM_MAX_BYTES, status_code=200)
    async def import_chats_form(
        self, request: Request[Any, Any, Any], runtime: Runtime, principal: Principal
    ) -> Template:
        form = await request.form()
        upload = form.get("file")
        if not isinstance(upload, UploadFile) or not upload.filename:
            raise Unprocessable("file: choose an export file to import")
        settings = runtime.settings
        limit = settings.chat_import_max_mb * MB
        if await anyio.to_thread.run_sync(_size, upload) > limit:
            raise PayloadTooLarge(f"file: more than {limit} bytes (CHAT_IMPORT_MAX_MB)")
        fmt = str(form.get("format") or "").strip() or None
        max_line = settings.message_max_chars * 4 + 64 * 1024
        reader = await anyio.to_thread.run_sync(ExportReader, upload.file, fmt, max_line)
        report = await import_chats(runtime.session_factory, settings, principal.id, reader)
        return page(request, "chat_import.html", nav="sessions", report=report)
