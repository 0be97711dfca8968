"""Serve an ASGI app with uvicorn inside the test's own event loop, on 127.0.0.1.

Litestar's AsyncTestClient runs the app in a portal thread and blocks the caller's loop
for each request, so "concurrent" requests through it run one after another; tests of
behaviour under load use a real server instead::

    async with serve(app) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as client: ...
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn


@asynccontextmanager
async def serve(app: Any, timeout: float = 30) -> AsyncIterator[str]:  # noqa: ASYNC109
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,  # requests still running then are cancelled
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(timeout):
            while not server.started:
                if task.done():
                    task.result()  # start-up failed: raise its error
                    raise RuntimeError("uvicorn exited during start-up")
                await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
