"""The session-file tools: `image_view` (an image of the session for the model's next
step), `share_file` and `content_publish` (the HTTP endpoints' services, with their
checks: `share_file` writes, so it needs an editor of the session, as
`POST /sessions/{id}/share_file` does; `content_publish` reads, as `POST …/publish`)."""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

import anyio.to_thread
import msgspec

from app.domain.agents.tool_types import ToolContext, ToolImage, ToolResult
from app.domain.files.image_view import read_session_image
from app.domain.files.schemas import PublishIn, ShareFileIn
from app.domain.files.services import FileService
from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.lib.errors import Unprocessable
from app.lib.inputs import explain_pattern

__all__ = ["content_publish", "image_view", "share_file"]

S = TypeVar("S", bound=msgspec.Struct)


def _args(arguments: dict[str, Any], struct: type[S]) -> S:
    """The arguments as the HTTP body type (`session_id` is the context's, not the
    model's); a mismatch names the field."""
    fields = {k: v for k, v in arguments.items() if k != "session_id"}
    try:
        return msgspec.convert(fields, struct)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).partition(" - at `$.")
        field = where.rstrip("`") if where else "arguments"
        raise Unprocessable(f"{field}: {explain_pattern(message)}") from None


async def _session(ctx: ToolContext, viewer: Viewer) -> uuid.UUID:
    assert ctx.session_id is not None  # run_tool answers a missing session first
    await SessionAccess(ctx.db).get(ctx.session_id, viewer)  # 404, or 403 for a reader
    return ctx.session_id


async def image_view(ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    ref = _args(arguments, ShareFileIn).path  # the same one argument: {path}
    sid = await _session(ctx, Viewer.of(ctx.principal))
    image = await anyio.to_thread.run_sync(read_session_image, ctx.settings, sid, ref)
    text = (
        f"Image {image.path} ({image.media_type}, {len(image.data)} bytes) is attached to "
        "this tool result: look at it now."
    )
    data = {
        "name": image.name,
        "path": image.path,
        "content_type": image.media_type,
        "size": len(image.data),
        "text": text,
    }
    return ToolResult(text, data, images=(ToolImage(image.data, image.media_type),))


async def share_file(ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    path = _args(arguments, ShareFileIn).path
    sid = await _session(ctx, Viewer.editor(ctx.principal))
    out = await FileService.of(ctx.runtime).share_file(sid, path)
    text = f"Shared {path} as {out.path} ({out.size} bytes); the user downloads it at {out.url}"
    return ToolResult(text, {**msgspec.to_builtins(out), "text": text})


async def content_publish(ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    filename = _args(arguments, PublishIn).filename
    sid = await _session(ctx, Viewer.of(ctx.principal))
    card = await FileService.of(ctx.runtime).publish(sid, filename)
    text = (
        f"Published {card.name} as a {card.type} card ({card.content_type}, {card.size} "
        f"bytes) at {card.url}"
    )
    return ToolResult(text, {**msgspec.to_builtins(card), "text": text})
