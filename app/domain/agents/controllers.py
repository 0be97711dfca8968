"""``POST /sessions/{id}/turns``: one turn of the agent loop, streamed or as one answer.

No request ``db``: each step of the turn commits in its own transaction (turns.py), so
the request holds no connection while the model talks.
"""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Controller, Request, Response, post
from litestar.openapi import ResponseSpec
from litestar.response import Stream

from app.domain.agents.deps import DEPENDENCIES, TurnLoopFactory
from app.domain.agents.run import TurnRun
from app.domain.agents.schemas import TurnOut, TurnRequest
from app.domain.compression import ContextTooLargeError
from app.domain.context.controllers import too_large
from app.domain.kernel.principal import Principal

SSE = "text/event-stream"


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
        opt={"errors": ["502"]},
        description=(
            "With `Accept: text/event-stream` the answer is a stream of Server-Sent Events "
            "(token, thinking, tool_call, tool_result, compression, recall, usage, done, "
            "error: docs/agents.md); otherwise one JSON answer. A model failure during the "
            "turn answers 502 `llm_rejected` (the model server refused the request) or "
            "503 `llm_unavailable`, in the error body; the user's message and every "
            "complete round are kept."
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
            return too_large(first)
        run = TurnRun(request.app.state, loop, first)
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
            return Response(body, status_code=error.status)
        return Response(out, status_code=200)
