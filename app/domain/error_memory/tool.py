"""The `write_error` and `error_history` tools: argument checks, the service call and the
text the model reads — one implementation for `/tools/*` and the agents' tool registry."""

from __future__ import annotations

import dataclasses

from app.config import Settings
from app.domain.error_memory.schemas import (
    ErrorEntryOut,
    ErrorHistoryIn,
    ErrorHistoryOut,
    WriteErrorIn,
    WriteErrorOut,
)
from app.domain.error_memory.services import ErrorEntry, ErrorMemoryService, embed_text, render
from app.domain.kernel.terms import clamp_k
from app.lib.errors import PayloadTooLarge, Unprocessable
from app.lib.inputs import reject_nul, scrub_text

MAX_TOOL = 200
MAX_TEXT = 20_000
MAX_QUERY = 2000


def _text(value: object, field: str, *, required: bool, limit: int = MAX_TEXT) -> str | None:
    """Free text of the call (error, fix, context, query): kept, a NUL → U+FFFD."""
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise Unprocessable(f"{field}: required")
        return None
    if not isinstance(value, str):
        raise Unprocessable(f"{field}: expected a string")
    if len(value) > limit:
        raise PayloadTooLarge(f"{field}: at most {limit} characters")
    return scrub_text(value.strip())


def _tool(value: object, *, required: bool) -> str | None:
    """The tool's name, an identifier: a NUL is refused (422)."""
    if isinstance(value, str):
        reject_nul(value, "tool")
    return _text(value, "tool", required=required, limit=MAX_TOOL)


def entry_out(e: ErrorEntry) -> ErrorEntryOut:
    return ErrorEntryOut(**dataclasses.asdict(e))


async def run_write_error(
    errors: ErrorMemoryService, settings: Settings, user_id: str, call: WriteErrorIn
) -> WriteErrorOut:
    """Record a resolved tool error and its fix (the user's, across sessions)."""
    tool = _tool(call.tool, required=True)
    error = _text(call.error, "error", required=True)
    fix = _text(call.fix, "fix", required=True)
    context = _text(call.context, "context", required=False)
    assert tool is not None and error is not None and fix is not None
    entry, created = await errors.write(user_id, tool, error, fix, context)
    verb = "recorded" if created else "updated"
    return WriteErrorOut(
        entry=entry_out(entry),
        created=created,
        text=f"write_error: {verb} [{entry.tool}] (kept {settings.error_memory_ttl_days} "
        "days, renewed on every hit)",
    )


def write_error_embeds(call: WriteErrorIn) -> list[str]:
    """What `run_write_error` will embed (the turn loop embeds it first); its checks
    raise as the run's do."""
    tool = _tool(call.tool, required=True)
    error = _text(call.error, "error", required=True)
    assert tool is not None and error is not None
    return [embed_text(tool, error)]


def error_history_embeds(call: ErrorHistoryIn) -> list[str]:
    """What `run_error_history` will embed: its query, if any."""
    query = _text(call.query, "query", required=False, limit=MAX_QUERY)
    return [query] if query else []


async def run_error_history(
    errors: ErrorMemoryService, user_id: str, call: ErrorHistoryIn
) -> ErrorHistoryOut:
    """Past errors like this one and how they were fixed (text + vector search)."""
    query = _text(call.query, "query", required=False, limit=MAX_QUERY) or ""
    tool = _tool(call.tool, required=False)
    if not query and not tool:
        raise Unprocessable("query: required — the error to look up (or a tool)")
    limit = clamp_k(call.limit)
    entries = await errors.search(user_id, query, tool, limit)
    return ErrorHistoryOut(
        query=query,
        tool=tool,
        limit=limit,
        hits=[entry_out(e) for e in entries],
        text=render(query, tool, entries),
    )
