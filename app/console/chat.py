"""`/console/chat/{id}`: talk to the agent of a session — its history as cards
(`chat_cards.py`), a message box, the answer streamed from the turn loop.

Why the console has its own turn route (`POST /console/chat/{id}/turn`) rather than
the page calling `POST /sessions/{id}/turns`: the console is signed in by its cookie
(HttpOnly, SameSite=Strict, Path=/console), which the API never sees, and the page holds
no bearer token to send (and should not: a script-readable token outlives the sign-out).
The route runs the same turn loop the API runs (`TurnLoop` → `TurnRun.sse()`, the same
events), behind the console's guard: the cookie's principal, the CSRF check (the
`X-Navi-CSRF` header, so the body is the handler's), the turn's own ownership rules
(404 for a session the caller may not see, 403 for a reader's write). Uploads and the
files the viewers show go the same way: `FileService`, as the files API uses it.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import anyio.to_thread
import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.params import Parameter
from litestar.response import File, Redirect, Stream, Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.console.chat_cards import Card, chat_cards
from app.console.session_page import COMPRESSIONS_MAX, compressions_of
from app.console.web import PAGE_HEADERS, form_text, page
from app.domain.agents.controllers import SSE
from app.domain.agents.run import TurnRun
from app.domain.agents.schemas import TurnMessage, TurnRequest
from app.domain.agents.turns import TurnLoop
from app.domain.compression import ContextTooLargeError
from app.domain.files.schemas import UploadOut
from app.domain.files.services import FileService
from app.domain.kernel.access import Viewer
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.sessions.services import MAX_NAME, SessionService
from app.lib.errors import NotFound, Unprocessable
from app.lib.pagination import MAX_LIMIT, BeforeSeq

PAGE_SIZE = 50
SIDEBAR_SIZE = 30
TEXT_VIEW_BYTES = 200_000  # of a published text file shown inline (the rest: download)
TEXT_VIEW_LINES = 2_000
# The chat frames the files it shows (PDF, SVG, HTML) and plays audio and video: both
# from this origin only.
CHAT_HEADERS = {
    **PAGE_HEADERS,
    "Content-Security-Policy": PAGE_HEADERS["Content-Security-Policy"]
    + "; frame-src 'self'; media-src 'self'",
}
# A file framed by the chat: never the page's script, never framed elsewhere. HTML and
# SVG run with no script, in an origin of their own (the frame is `sandbox` too).
FRAMED_CSP = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; "
ACTIVE_FILE_CSP = FRAMED_CSP + "sandbox; frame-ancestors 'self'"
PASSIVE_FILE_CSP = "default-src 'none'; frame-ancestors 'self'"
_turn_message = msgspec.json.Decoder(TurnMessage)


def _read_lines(path: Any) -> list[str]:
    with open(path, "rb") as f:
        head = f.read(TEXT_VIEW_BYTES)
    return head.decode("utf-8", errors="replace").splitlines()[:TEXT_VIEW_LINES]


async def _with_text(runtime: Runtime, session_id: uuid.UUID, cards: list[Card]) -> list[Card]:
    """Text viewers get their file's first lines (a file gone since: a download link)."""
    files = FileService.of(runtime)
    for card in cards:
        v = card.viewer
        if v is None or v.kind != "text":
            continue
        try:
            path, _ = await files.stored(session_id, v.name)
        except NotFound:  # removed since it was published: the link answers 404 too
            continue
        lines = await anyio.to_thread.run_sync(_read_lines, path)
        card.viewer = type(v)(v.kind, v.name, v.content_type, v.size, v.url, lines)
    return cards


async def _message(request: Request[Any, Any, Any], runtime: Runtime) -> TurnMessage:
    """The script's JSON `{"content", "images"}`; a plain form's `content` (no script:
    the answer is then the event stream as text)."""
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            return _turn_message.decode(await request.body())
        except msgspec.ValidationError as exc:
            raise Unprocessable(f"message: {exc}") from None
        except msgspec.DecodeError:
            raise Unprocessable("message: not JSON") from None
    limit = runtime.settings.message_max_chars
    return TurnMessage(content=form_text(await request.form(), "content", limit=limit))


class ChatPage(Controller):
    path = "/chat"

    @post("/")
    async def new_chat(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Redirect:
        """ "New chat" on the sessions list: a session of the chosen profile, then its chat."""
        form = await request.form()
        profile = form_text(form, "profile_id", limit=200, required=False) or "default"
        name = form_text(form, "name", limit=MAX_NAME, required=False) or None
        row = await SessionService.of(db, runtime).create(
            profile, principal.id, name, known=runtime.profiles.ids()
        )
        runtime.session_hooks.created(runtime)
        return Redirect(f"/console/chat/{row.id}", status_code=303)

    @get("/{session_id:uuid}")
    async def chat(
        self,
        request: Request[Any, Any, Any],
        session_id: uuid.UUID,
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
        before: BeforeSeq = None,
        limit: Annotated[int, Parameter(ge=1, le=MAX_LIMIT)] = PAGE_SIZE,
    ) -> Template:
        sessions = SessionService.of(db, runtime)
        viewer = Viewer.of(principal)
        session = await sessions.get(session_id, viewer)  # 404: not theirs
        history = await sessions.history(session_id, viewer, before, limit)
        compressions = compressions_of(
            await sessions.compression_records(session, COMPRESSIONS_MAX)
        )
        cards = chat_cards(history.messages, str(session_id), compressions, newest=before is None)
        profile = runtime.profiles.get(session.profile_id)
        # the sidebar: the caller's own sessions, pinned first (as /console lists them)
        sidebar, _ = await sessions.list_page(
            Viewer(user_id=principal.id), limit=SIDEBAR_SIZE, offset=0
        )
        return page(
            request,
            "chat.html",
            nav="sessions",
            headers=CHAT_HEADERS,
            s=session,
            model=profile.model,
            window=profile.context_window,
            can_write=principal.is_admin or session.user_id == principal.id,
            cards=await _with_text(runtime, session_id, cards),
            older=history.next_before_seq if history.has_more else None,
            newest=before is None,
            limit=limit,
            sidebar=sidebar,
        )

    @post("/{session_id:uuid}/turn", status_code=200)
    async def turn(
        self,
        request: Request[Any, Any, Any],
        session_id: uuid.UUID,
        runtime: Runtime,
        principal: Principal,
    ) -> Response[Any] | Stream:
        """One turn of the agent loop, as `POST /sessions/{id}/turns` with
        `Accept: text/event-stream` answers it."""
        req = TurnRequest(message=await _message(request, runtime))
        loop = TurnLoop(runtime, principal, session_id, [])
        first = await loop.begin(req)  # 404 / 403 / 409 / 4xx here, before anything streams
        if isinstance(first, ContextTooLargeError):
            return Response(first.body(), status_code=422)
        run = TurnRun(runtime.jobs, loop, first)
        return Stream(
            run.sse(),
            media_type=SSE,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @post("/{session_id:uuid}/files", status_code=201, request_max_body_size=None)
    async def upload(
        self,
        request: Request[Any, Any, Any],
        session_id: uuid.UUID,
        runtime: Runtime,
        principal: Principal,
    ) -> UploadOut:
        """The upload button: `POST /sessions/{id}/files` as the files API runs it
        (streamed to disk, its limits, its 413s and 415s)."""
        files = FileService.of(runtime)
        files.take_upload(principal.id)
        owner = await files.check_session(session_id, Viewer.editor(principal))
        outs, block = await files.upload(
            session_id,
            request.headers.get("content-type", ""),
            request.content_length,
            request.stream(),
            owner=owner,
        )
        return UploadOut(files=outs, message_block=block)

    @get("/{session_id:uuid}/files/{name:str}")
    async def file(
        self,
        session_id: uuid.UUID,
        name: str,
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> File:
        """A session's file for the chat's viewers (the API's download, for the cookie)."""
        await SessionService.of(db, runtime).get(session_id, Viewer.of(principal))
        path, info = await FileService.of(runtime).stored(session_id, name)
        ctype = info.content_type
        csp = ACTIVE_FILE_CSP if ctype.active else PASSIVE_FILE_CSP
        disposition = "attachment" if ctype.kind in ("binary", "model") else "inline"
        return File(
            path,
            filename=info.name,
            media_type=ctype.media_type,
            content_disposition_type=disposition,  # type: ignore[arg-type]
            headers={
                "Cache-Control": "private, no-cache",
                "Content-Security-Policy": csp,
                "Referrer-Policy": "same-origin",
            },
        )
