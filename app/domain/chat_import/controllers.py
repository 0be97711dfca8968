"""`POST /me/import/chats` and `POST /admin/users/{id}/import/chats`: a chat export in.

The body (the file itself, or a multipart form with it) is spooled to disk before any
database work (`upload.py`); the import then reads it a conversation at a time and
commits a batch of conversations per transaction (`services.py`): a pooled connection is
held for one batch at a time, never for the client's upload.
"""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from litestar import Controller, Request, post
from litestar.params import Parameter

from app.db.engine import transaction
from app.domain.auth.controllers import require_admin
from app.domain.chat_import.reader import ExportReader
from app.domain.chat_import.schemas import ChatImportReport
from app.domain.chat_import.services import import_chats
from app.domain.chat_import.upload import spool_export
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.transfer.services import require_user

FormatParam = Annotated[
    str | None,
    Parameter(
        query="format",
        description="chatgpt, claude or jsonl; detected from the file when absent",
        max_length=16,
    ),
]


async def import_upload(
    request: Request, runtime: Runtime, user_id: str, fmt: str | None
) -> ChatImportReport:
    settings = runtime.settings
    body = await spool_export(
        request.stream(),
        request.headers.get("content-type", ""),
        request.content_length,
        settings,
    )
    try:
        max_line = settings.message_max_chars * 4 + 64 * 1024
        reader = await anyio.to_thread.run_sync(ExportReader, body, fmt, max_line)
        return await import_chats(runtime.session_factory, settings, user_id, reader)
    finally:
        body.close()


class ChatImportController(Controller):
    path = "/me/import"
    tags = ["transfer"]

    # The app-wide body limit (MAX_REQUEST_BODY_MB) is for JSON; an export is read a
    # conversation at a time and limited by CHAT_IMPORT_MAX_MB.
    @post("/chats", status_code=201, request_max_body_size=None, opt={"errors": ["507"]})
    async def import_chats_mine(
        self, request: Request, principal: Principal, runtime: Runtime, fmt: FormatParam = None
    ) -> ChatImportReport:
        """Import a ChatGPT export (`conversations.json` or its zip), a Claude export
        (`conversations.json`) or JSON Lines of messages: a session per conversation."""
        return await import_upload(request, runtime, principal.id, fmt)


class AdminChatImportController(Controller):
    path = "/admin/users"
    tags = ["admin"]

    @post(
        "/{user_id:str}/import/chats",
        status_code=201,
        request_max_body_size=None,
        opt={"errors": ["507"]},
    )
    async def import_chats_user(
        self,
        user_id: str,
        request: Request,
        principal: Principal,
        runtime: Runtime,
        fmt: FormatParam = None,
    ) -> ChatImportReport:
        """A chat export into the account `user_id` (an admin's)."""
        require_admin(principal)
        async with transaction(runtime.session_factory) as db:  # not held for the import
            await require_user(db, user_id)
        return await import_upload(request, runtime, user_id, fmt)
