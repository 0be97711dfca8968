"""The built-in tools, one registry for every way in: the turn loop runs them
server-side, the MCP server lists and calls them. Each tool is the owning domain's own
implementation (facts/tool.py, search/tool.py, …), the one `/tools/*` calls too: same
checks, same limits, same text.

Bad arguments from the model are an answer (`is_error`, the text names the problem),
never an exception; the database failing still raises, so the caller's transaction
rolls back."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

import msgspec
import structlog

from app.domain.agents import tool_schemas as schemas
from app.domain.agents.file_tools import content_publish, image_view, share_file
from app.domain.agents.tool_types import ToolContext, ToolResult
from app.domain.error_memory.schemas import ErrorHistoryIn, WriteErrorIn
from app.domain.error_memory.services import ErrorMemoryService
from app.domain.error_memory.tool import (
    error_history_embeds,
    run_error_history,
    run_write_error,
    write_error_embeds,
)
from app.domain.facts.schemas import MemoryToolCall
from app.domain.facts.services import FactService
from app.domain.forget.services import ForgetService
from app.domain.forget.tool import run_memory_tool_with_forget
from app.domain.history.schemas import ChatHistoryIn
from app.domain.history.services import HistorySearch
from app.domain.history.tool import run_chat_history_tool, semantic_texts_ahead
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.search.schemas import ToolMemorySearchIn
from app.domain.search.services import UnifiedSearch
from app.domain.search.tool import run_memory_search_tool
from app.domain.sketches.services import SketchService
from app.domain.sketches.tool import read_scratchpad, sketch_out, write_scratchpad
from app.lib.errors import AppError
from app.lib.inputs import explain_pattern, scrub_text

log = structlog.get_logger()

S = TypeVar("S", bound=msgspec.Struct)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str  # written for a model
    parameters: dict[str, Any]  # JSON schema of the arguments
    run: Callable[[ToolContext, dict[str, Any]], Awaitable[ToolResult]]
    needs_session: bool = False  # answers is_error without a current session
    uses_session: bool = False  # reads the current session (needed or optional)
    #: the texts a call will embed, found with no connection held (a short read of its
    #: own at most): the turn loop embeds them before the round's transaction opens
    ahead: Ahead | None = None


#: (runtime, principal, current session, arguments) -> the texts the call will embed
Ahead = Callable[[Runtime, Principal, uuid.UUID | None, dict[str, Any]], Awaitable[list[str]]]


class BadArguments(Exception):
    """The model's arguments do not fit the tool (the message names the field)."""


def _args(arguments: dict[str, Any], struct: type[S]) -> S:
    """The arguments as the HTTP endpoint's body type; a mismatch names the field, as
    the endpoint's 422 does. `session_id` is not the model's to choose: the context's."""
    fields = {k: v for k, v in arguments.items() if k != "session_id"}
    try:
        return msgspec.convert(fields, struct)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).partition(" - at `$.")
        field = where.rstrip("`").split("[")[0] if where else "arguments"
        raise BadArguments(f"{field}: {explain_pattern(message)}") from None


def _result(out: msgspec.Struct) -> ToolResult:
    data = msgspec.to_builtins(out)
    return ToolResult(text=data["text"], data=data)


def _session(ctx: ToolContext) -> uuid.UUID:
    assert ctx.session_id is not None  # run_tool answers a missing session first
    return ctx.session_id


async def _memory(ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    call = _args(arguments, MemoryToolCall)
    facts = FactService.of(ctx.db, ctx.runtime)
    forget = ForgetService.of(ctx.db, ctx.runtime)
    return _result(
        await run_memory_tool_with_forget(facts, forget, ctx.principal.id, call, ctx.session_id)
    )


async def _memory_search(ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    call = _args(arguments, ToolMemorySearchIn)
    search = UnifiedSearch.of(ctx.db, ctx.runtime, llm=ctx.gateway)
    access = SessionAccess(ctx.db)
    return _result(
        await run_memory_search_tool(search, access, ctx.principal, call, ctx.session_id)
    )


async def _memory_search_ahead(
    runtime: Runtime, principal: Principal, session_id: uuid.UUID | None, arguments: dict[str, Any]
) -> list[str]:
    """The query, as the stores embed it (stripped; the errors scope as written)."""
    query = scrub_text(_args(arguments, ToolMemorySearchIn).query)
    return [t for t in dict.fromkeys((query.strip(), query)) if t.strip()]


async def _chat_history(ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    call = _args(arguments, ChatHistoryIn)
    history = HistorySearch.of(ctx.db, ctx.runtime, llm=ctx.gateway)
    out = await run_chat_history_tool(
        history, SessionAccess(ctx.db), ctx.principal, call, _session(ctx)
    )
    return _result(out)


async def _chat_history_ahead(
    runtime: Runtime, principal: Principal, session_id: uuid.UUID | None, arguments: dict[str, Any]
) -> list[str]:
    """The semantic mode's texts: the recent messages without a vector and the query,
    read on a connection of its own, given back before they are embedded."""
    if session_id is None:
        return []
    return await semantic_texts_ahead(
        runtime, principal, session_id, _args(arguments, ChatHistoryIn)
    )


async def _write_error(ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    errors = ErrorMemoryService.of(ctx.db, ctx.runtime, llm=ctx.gateway)
    call = _args(arguments, WriteErrorIn)
    return _result(await run_write_error(errors, ctx.settings, ctx.principal.id, call))


async def _write_error_ahead(
    runtime: Runtime, principal: Principal, session_id: uuid.UUID | None, arguments: dict[str, Any]
) -> list[str]:
    return write_error_embeds(_args(arguments, WriteErrorIn))


async def _error_history(ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    errors = ErrorMemoryService.of(ctx.db, ctx.runtime, llm=ctx.gateway)
    call = _args(arguments, ErrorHistoryIn)
    return _result(await run_error_history(errors, ctx.principal.id, call))


async def _error_history_ahead(
    runtime: Runtime, principal: Principal, session_id: uuid.UUID | None, arguments: dict[str, Any]
) -> list[str]:
    return error_history_embeds(_args(arguments, ErrorHistoryIn))


def _pad(ctx: ToolContext) -> tuple[SketchService, SessionAccess, Principal, uuid.UUID]:
    """What both scratchpad tools take: the service, the ownership check, who, which session."""
    return (
        SketchService.of(ctx.db, ctx.runtime),
        SessionAccess(ctx.db),
        ctx.principal,
        _session(ctx),
    )


async def _scratchpad_read(ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    read = await read_scratchpad(*_pad(ctx), arguments.get("section"))
    sections = [msgspec.to_builtins(sketch_out(r)) for r in read.sections]
    return ToolResult(read.text, {"total": read.total, "sections": sections, "text": read.text})


async def _scratchpad_write(ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    row = await write_scratchpad(*_pad(ctx), arguments.get("section"), arguments.get("value"))
    text = f"Saved scratchpad section [{row.key}] ({len(row.value)} characters)."
    return ToolResult(text, {**msgspec.to_builtins(sketch_out(row)), "text": text})


def _spec(
    name: str,
    run: Callable[[ToolContext, dict[str, Any]], Awaitable[ToolResult]],
    *,
    needs_session: bool = False,
    uses_session: bool = False,
    ahead: Ahead | None = None,
) -> ToolSpec:
    upper = name.upper()
    return ToolSpec(
        name=name,
        description=getattr(schemas, f"{upper}_DESCRIPTION"),
        parameters=getattr(schemas, upper),
        run=run,
        needs_session=needs_session,
        uses_session=uses_session or needs_session,
        ahead=ahead,
    )


BUILTIN_TOOLS: Mapping[str, ToolSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            _spec("memory", _memory, uses_session=True),
            _spec("memory_search", _memory_search, uses_session=True, ahead=_memory_search_ahead),
            _spec("chat_history", _chat_history, needs_session=True, ahead=_chat_history_ahead),
            _spec("write_error", _write_error, ahead=_write_error_ahead),
            _spec("error_history", _error_history, ahead=_error_history_ahead),
            _spec("scratchpad_read", _scratchpad_read, needs_session=True),
            _spec("scratchpad_write", _scratchpad_write, needs_session=True),
            _spec("image_view", image_view, needs_session=True),
            _spec("share_file", share_file, needs_session=True),
            _spec("content_publish", content_publish, needs_session=True),
        )
    }
)


def ollama_tool_defs(names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The `tools=` argument of ollama chat; `names` picks (and orders) the tools, an
    unknown name is a KeyError."""
    picked = [BUILTIN_TOOLS[n] for n in names] if names is not None else BUILTIN_TOOLS.values()
    return [
        {
            "type": "function",
            "function": {"name": s.name, "description": s.description, "parameters": s.parameters},
        }
        for s in picked
    ]


async def run_tool(name: str, ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    """Run a built-in tool; an unknown `name` is a KeyError (the caller's to hand back)."""
    spec = BUILTIN_TOOLS[name]
    if not isinstance(arguments, dict):
        return _refused(name, "arguments: expected an object of named arguments")
    if spec.needs_session and ctx.session_id is None:
        return _refused(name, f"{name}: needs the current session, and this call has none")
    try:
        return await spec.run(ctx, arguments)
    except BadArguments as exc:
        return _refused(name, str(exc))
    except AppError as exc:
        if exc.status_code >= 500:
            raise
        return _refused(name, exc.detail)


async def texts_ahead(
    name: str,
    runtime: Runtime,
    principal: Principal,
    session_id: uuid.UUID | None,
    arguments: object,
) -> list[str]:
    """What a call of the built-in tool `name` will embed (`ToolSpec.ahead`); nothing for
    a tool that embeds nothing, or for a call its run will refuse anyway (bad arguments,
    a session out of reach: the run answers that)."""
    spec = BUILTIN_TOOLS[name]
    if spec.ahead is None or not isinstance(arguments, dict):
        return []
    try:
        return await spec.ahead(runtime, principal, session_id, arguments)
    except (BadArguments, AppError):
        return []


def _refused(name: str, text: str) -> ToolResult:
    log.info("tool.refused", tool=name, reason=text[:200])
    return ToolResult(text=text, is_error=True)
