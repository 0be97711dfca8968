"""A raw excerpt whose messages span two days marks each shown line's day (issue 44,
`raw_history.line_days`): the messages' own times, read from the session's history.

A real PostgreSQL; the messages appended through the API with their times, then the
demotion index over them."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

from litestar.testing import AsyncTestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import session_factory, transaction
from app.domain.raw_history.chunks import ChunkMessage
from app.domain.raw_history.indexer import embed_demoted, index_demoted
from app.llm.factory import build_gateway

MAY = datetime(2025, 5, 10, 12, 0, tzinfo=UTC)
JULY = datetime(2025, 7, 12, 12, 0, tzinfo=UTC)


async def test_an_excerpt_over_two_days_shows_each_lines_day(
    client: AsyncTestClient, engine: AsyncEngine, settings: Settings
) -> None:
    r = await client.post("/sessions", json={"profile_id": "default"})
    sid = r.json()["id"]
    sent = [
        ("user", "We went hiking by the lake.\n\nThe trail was long.", MAY),
        ("assistant", "A lake sounds lovely.", MAY),
        ("user", "Today we went hiking in the mountains.", JULY),
        ("assistant", "Mountains are great.", JULY),
    ]
    payload = [
        {"role": role, "content": content, "created_at": at.isoformat()}
        for role, content, at in sent
    ]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": payload})
    assert r.status_code == 201, r.text
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT sequence_number, role, content, created_at FROM session_messages"
                    " WHERE user_id = 'admin' AND session_id = :sid ORDER BY sequence_number"
                ),
                {"sid": uuid.UUID(sid)},
            )
        ).all()
    said = [ChunkMessage(r.role, r.content, r.sequence_number, r.created_at) for r in rows]
    assert [s.created_at.date() for s in said] == [MAY.date()] * 2 + [JULY.date()] * 2
    llm = build_gateway(settings)
    try:
        where = {"user_id": "admin", "session_id": uuid.UUID(sid), "demoted": said, "keys": ()}
        factory = session_factory(engine)
        vectors = await embed_demoted(factory, llm, **where)
        async with transaction(factory) as db:
            await index_demoted(db, **where, vectors=vectors)
    finally:
        await llm.aclose()

    r = await client.post("/memory/search", json={"query": "hiking", "scope": "raw"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["hits"]) == 1, body["hits"]
    shown = body["text"]
    assert "2025-05-10…07-12" in shown.splitlines()[2]  # the header: first and last day
    assert re.search(r"^   \[(2025-)?05-10\] User: We went hiking by the lake\.$", shown, re.M)
    assert re.search(r"^   \[(2025-)?07-12\] User: Today we went hiking", shown, re.M)
    # a line of the day of the line shown just before it is not marked again
    assert "   The trail was long." in shown.splitlines()
