"""`memory_search` reads the time a question names (issue 44, `kernel.when`): the excerpt
said in that window ranks first, relative times read from `as_of` (default now).

A real PostgreSQL; the raw chunks written by the demotion index, with their messages'
times."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import session_factory, transaction
from app.domain.raw_history.chunks import ChunkMessage
from app.domain.raw_history.indexer import embed_demoted, index_demoted
from app.llm.factory import build_gateway

MAY = datetime(2025, 5, 10, 12, 0, tzinfo=UTC)
JULY = datetime(2025, 7, 12, 12, 0, tzinfo=UTC)


async def _sitting(
    client: AsyncTestClient, engine: AsyncEngine, settings: Settings, at: datetime, lines: list[str]
) -> str:
    """A session of the admin user whose turns (said at `at`) are in the raw index."""
    r = await client.post("/sessions", json={"profile_id": "default"})
    sid = r.json()["id"]
    said = [
        ChunkMessage("user" if i % 2 == 0 else "assistant", line, i, at)
        for i, line in enumerate(lines)
    ]
    llm = build_gateway(settings)
    try:
        where = {"user_id": "admin", "session_id": uuid.UUID(sid), "demoted": said, "keys": ()}
        factory = session_factory(engine)
        vectors = await embed_demoted(factory, llm, **where)
        async with transaction(factory) as db:
            assert await index_demoted(db, **where, vectors=vectors) == 1
    finally:
        await llm.aclose()
    return sid


async def _first_session(client: AsyncTestClient, query: str, **extra: object) -> str:
    r = await client.post("/memory/search", json={"query": query, "scope": "raw", **extra})
    assert r.status_code == 200, r.text
    hits = r.json()["hits"]
    assert len(hits) == 2, hits
    return str(hits[0]["session_id"])


async def test_the_excerpt_said_in_the_window_ranks_first(
    client: AsyncTestClient, engine: AsyncEngine, settings: Settings
) -> None:
    may = await _sitting(
        client,
        engine,
        settings,
        MAY,
        [
            "We went hiking by the lake, the hiking trail was long. Hiking all day!",
            "Hiking by a lake sounds lovely.",
        ],
    )
    july = await _sitting(
        client,
        engine,
        settings,
        JULY,
        ["This weekend we went hiking in the mountains.", "Mountains are great."],
    )
    # without a time, the chunk with more of the words is first
    assert await _first_session(client, "where did we go hiking") == may
    # a window the July sitting is in: it is first, whichever way the time is named
    assert await _first_session(client, "where did we go hiking in July 2025") == july
    assert await _first_session(client, "where did we go hiking on 12 July, 2025?") == july
    as_of = "2025-08-05T09:00:00Z"
    assert await _first_session(client, "where did we go hiking last month", as_of=as_of) == july
    # relative to now (2026 or later) last month holds neither: the window changes nothing
    assert await _first_session(client, "where did we go hiking last month") == may
    assert await _first_session(client, "where did we go hiking in May 2025") == may
