"""The MCP server at `/mcp`: the built-in tools (agents/tools.py) over streamable HTTP,
with the official `mcp` SDK's low-level server and session manager.

- Authenticated by the REST API's bearer token, resolved by the mount
  (`agents/controllers.py`, `mcp_endpoint`: the web framework's guards do not run for a
  mounted ASGI app): no token or a bad one is a 401 before the SDK reads the
  request. The tools act as that user only.
- Stateless, JSON responses: every POST stands alone (no MCP session kept in memory), so
  any replica or worker answers any request; the tools send no server-side requests or
  notifications that would need a stream.
- Each tool call runs in its own transaction, committed on success.
- The current session: the `X-Navi-Session-Id` header or a `session_id` argument,
  resolved for the caller (another user's is a tool error: "no session …").
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import mcp.types as mt
import structlog
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from app import __version__
from app.db.engine import transaction
from app.db.replica import writing_for
from app.domain.agents.tools import BUILTIN_TOOLS, ToolContext, ToolResult, run_tool
from app.domain.kernel.access import SESSION_HEADER, Viewer, session_id_of
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.lib.errors import AppError

log = structlog.get_logger()

MCP_PATH = "/mcp"
PRINCIPAL_KEY = "navi.principal"  # where the mount leaves the caller in the ASGI scope
SESSION_ARGUMENT = {
    "type": "string",
    "format": "uuid",
    "description": "the current session's id (else the X-Navi-Session-Id header)",
}


def tool_list() -> list[mt.Tool]:
    """The registry's tools; a tool that reads the current session takes `session_id`."""
    tools = []
    for spec in BUILTIN_TOOLS.values():
        schema = spec.parameters
        if spec.uses_session:
            schema = {
                **schema,
                "properties": {**schema["properties"], "session_id": SESSION_ARGUMENT},
            }
        tools.append(mt.Tool(name=spec.name, description=spec.description, input_schema=schema))
    return tools


def _answer(result: ToolResult) -> mt.CallToolResult:
    content: list[mt.ContentBlock] = [mt.TextContent(text=result.text)]
    content += [
        mt.ImageContent(data=base64.b64encode(i.data).decode("ascii"), mime_type=i.media_type)
        for i in result.images
    ]
    return mt.CallToolResult(
        content=content,
        structured_content=result.data,
        is_error=result.is_error,
    )


def _failed(text: str) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(text=text)], is_error=True)


class NaviMCP:
    """The SDK server and its session manager for one run of the app (the manager runs
    once: the app's lifespan builds a new one each start)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.server: Server[Any] = Server(
            "navi",
            version=__version__,
            instructions="Navi's memory: facts, history, error memory and the scratchpad.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.manager = StreamableHTTPSessionManager(
            self.server,
            json_response=True,
            stateless=True,
            max_request_body_size=runtime.settings.max_request_body_mb * 1024 * 1024,
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=tool_list())

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        scope = ctx.request.scope if ctx.request is not None else {}
        principal: Principal | None = scope.get(PRINCIPAL_KEY)
        if principal is None:  # the mount always sets it; never run a tool as nobody
            return _failed("not authenticated")
        name = params.name
        if name not in BUILTIN_TOOLS:
            return _failed(f"unknown tool {name!r}; the tools are: {', '.join(BUILTIN_TOOLS)}")
        arguments = dict(params.arguments or {})
        headers = dict(scope.get("headers") or [])
        raw_sid = arguments.pop("session_id", None) or headers.get(
            SESSION_HEADER.encode(), b""
        ).decode("latin-1")
        log.info("mcp.tool_call", tool=name, user_id=principal.id)
        try:
            return await self._run(name, principal, session_id_of(raw_sid), arguments)
        except AppError as exc:
            if exc.status_code >= 500:
                raise
            return _failed(exc.detail)

    async def _run(
        self, name: str, principal: Principal, sid: uuid.UUID | None, arguments: dict[str, Any]
    ) -> mt.CallToolResult:
        writing_for(principal.id)  # its commits are the caller's (read-your-writes)
        async with transaction(self.runtime.session_factory) as db:
            if sid is not None:
                await SessionAccess(db).get(sid, Viewer.of(principal))  # else NotFound
            ctx = ToolContext(db=db, runtime=self.runtime, principal=principal, session_id=sid)
            return _answer(await run_tool(name, ctx, arguments))
