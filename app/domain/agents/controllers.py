"""``POST /sessions/{id}/turns``: one turn of the agent loop, streamed or as one answer;
and the mount of the MCP server at ``/mcp`` (agents/mcp.py).

No request ``db``: each step of the turn commits in its own transaction (turns.py), so
the request holds no connection while the model talks.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import structlog
from litestar import Controller, Request, Response, asgi, post
from litestar.openapi import ResponseSpec
from litestar.response import Stream
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Scope, Send

from app.domain.agents.deps import DEPENDENCIES, TurnLoopFactory
from app.domain.agents.mcp import MCP_PATH, PRINCIPAL_KEY
from app.domain.agents.run import TurnRun
from app.domain.agents.schemas import TurnOut, TurnRequest
from app.domain.auth.services import resolve_cached
from app.domain.compression import ContextTooLargeError
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.lib.errors import AppError

SSE = "text/event-stream"

log = structlog.get_logger()


class TurnController(Controller):
    path = "/sessions"
    tags = ["agents"]
    dependencies = DEPENDENCIES

    @post(
        "/{session_id:uuid}/turns",
        status_code=200,
        responses={
            200: ResponseSpec(
                TurnOut,
                description="The turn (with `Accept: text/event-stream`: its events, as SSE)",
                generate_examples=False,  # polyfactory's Structs are not JSON in the spec
            ),
        },
        summary="Run one turn: the model with memory, built-in tools and compression",
        opt={"errors": ["502", "507"]},
        description=(
            "With `Accept: text/event-stream` the answer is a stream of Server-Sent Events "
            "(token, thinking, tool_call, tool_result, compression, recall, usage, done, "
            "error: docs/agents.md); otherwise one JSON answer. A model failure during the "
            "turn answers 502 `llm_rejected` (the model server refused the request) or "
            "503 `llm_unavailable`, in the error body; the user's message and every "
            "complete round are kept. One turn at a time per session: while one runs "
            '(in any worker process), another answers 409 `conflict` ("a turn is already '
            'running on this session"), nothing stored; retry once it has ended.'
        ),
    )
    async def turn(
        self,
        request: Request[Any, Any, Any],
        session_id: uuid.UUID,
        data: TurnRequest,
        principal: Principal,
        turn_loops: TurnLoopFactory,
    ) -> Response[Any] | Stream:
        loop = turn_loops(session_id, data)
        first = await loop.begin(data)  # 404 / 4xx here, before anything streams
        if isinstance(first, ContextTooLargeError):
            return Response(first.body(), status_code=422)  # a compression that ran stays
        run = TurnRun(loop.runtime.jobs, loop, first)
        if SSE in request.headers.get("accept", ""):
            return Stream(
                run.sse(),
                media_type=SSE,
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        out, error = await run.answer()
        if error is not None:
            # the house error body; the turn so far is stored (GET /sessions/{id}/messages)
            body = {"error": error.error, "detail": error.detail}
            # no Retry-After, even on a 503: the user's message is stored already, and a
            # client that re-sent the request would store it twice (the clients retry a
            # 503 only when it says when; docs/agents.md)
            return Response(body, status_code=error.status)
        return Response(out, status_code=200)


async def _refuse(
    send: Send, status: int, error: str, detail: str, headers: list[tuple[bytes, bytes]]
) -> None:
    """An answer in the house error body, written by hand: the mount is raw ASGI."""
    body = json.dumps({"error": error, "detail": detail}).encode()
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *headers,
        ],
    }
    await send(start)
    chunk: HTTPResponseBodyEvent = {"type": "http.response.body", "body": body, "more_body": False}
    await send(chunk)


@asgi(MCP_PATH, is_mount=True, copy_scope=True, opt={"public": True})
async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    """`/mcp`: the bearer token resolved here (`public` only skips the app-wide guard,
    which would answer in Litestar's error shape before this)."""
    state = scope["litestar_app"].state
    runtime: Runtime = state.runtime
    authorization = dict(scope.get("headers") or []).get(b"authorization")
    try:
        principal = await resolve_cached(
            runtime.session_factory,
            runtime.settings,
            runtime.principal_cache,
            authorization.decode("latin-1") if authorization else None,
        )
    except AppError as exc:
        if exc.status_code != 401:
            raise
        log.info("mcp.unauthorized", reason=exc.detail)
        auth = [(b"www-authenticate", b'Bearer realm="navi"')]
        await _refuse(send, 401, "unauthorized", exc.detail, auth)
        return
    if scope.get("method") != "POST":
        # Stateless with JSON answers: no stream for a GET to open (the SDK would hold
        # it open forever, sending nothing) and no session for a DELETE to end. The MCP
        # transport's answer for "no SSE stream here" is 405.
        detail = "this MCP endpoint answers POSTed JSON-RPC only (stateless, JSON responses)"
        await _refuse(send, 405, "method_not_allowed", detail, [(b"allow", b"POST")])
        return
    scope[PRINCIPAL_KEY] = principal  # type: ignore[literal-required]
    await state.mcp.manager.handle_request(scope, receive, send)
