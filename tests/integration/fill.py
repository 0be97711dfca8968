"""A user with something in every store, built through the API where there is a route
(and by SQL for the rows only background jobs write)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import session_factory, transaction
from app.domain.kernel.forgotten import entry_of
from app.domain.raw_history.indexer import embed_demoted, index_demoted
from app.llm.factory import build_gateway
from tests.conftest import run_sql
from tests.fakes.ollama_server import fake_embedding
from tests.integration.raw_history.test_raw_and_search import T0, Demoted

FILE_BYTES = "".join(f"line {i}: nginx moved\n" for i in range(60_000)).encode()  # > 1 record

DEMOTED = [
    Demoted("user", "Please move the nginx config to /etc/nginx/sites-enabled/navi.conf", 0),
    Demoted("assistant", "Done. The server now listens on port 8098 with `proxy_pass`.", 1),
    Demoted("tool", "ok: reloaded nginx in 12 ms", 2, name="shell"),
]


@dataclass
class Filled:
    user_id: str
    headers: dict[str, str]
    sid: str


async def fill_every_store(
    client: AsyncTestClient,
    engine: AsyncEngine,
    settings: Settings,
    db_url: str,
    user_id: str,
    headers: dict[str, str],
) -> Filled:
    """Sessions, messages (one archived), chunks and segment vectors, facts (one merged),
    the memory summary, a sketch, error memory, a share, a file, rolling summary,
    extraction and raw index state, message embeddings, a finished forget job."""
    r = await client.post(
        "/sessions", json={"profile_id": "default", "name": "ops"}, headers=headers
    )
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    messages = [
        {"role": "user", "content": "Please move the nginx config to navi.conf"},
        {"role": "assistant", "content": "Moved it.", "thinking": "easy", "metadata": {"a": 1}},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "shell", "arguments": {"cmd": "ls"}}}],
        },
        {"role": "tool", "content": "navi.conf", "name": "shell", "tool_call_id": "c1"},
    ]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": messages}, headers=headers)
    assert r.status_code == 201, r.text
    r = await client.post(
        f"/sessions/{sid}/planning", json={"entry": {"step": 1, "do": "move"}}, headers=headers
    )
    assert r.status_code in (200, 201, 204), r.text
    # one row in the archive (what size compaction does to old rows)
    run_sql(
        db_url,
        "insert into session_messages_archive (session_id, sequence_number, role, content,"
        " user_id, created_at, is_summary, metadata) select id, next_seq, 'user',"
        " 'archived: the backup bucket is s3://navi-backups', user_id, %s, false,"
        " '{\"old\": true}' from sessions where id = %s",
        T0,
        sid,
    )
    run_sql(db_url, "update sessions set next_seq = next_seq + 1 where id = %s", sid)
    # raw chunks + segment vectors, through the indexer
    llm = build_gateway(settings)
    try:
        where = {"user_id": user_id, "session_id": uuid.UUID(sid), "demoted": DEMOTED}
        factory = session_factory(engine)
        vectors = await embed_demoted(factory, llm, **where, keys=("server_port",))  # type: ignore[arg-type]
        async with transaction(factory) as db:
            assert await index_demoted(db, **where, keys=("server_port",), vectors=vectors)  # type: ignore[arg-type]
    finally:
        await llm.aclose()
    for key, value in (("editor", "neovim"), ("shell", "zsh"), ("language", "Python")):
        r = await client.post(
            "/memory/facts",
            json={"category": "preferences", "key": key, "value": value},
            headers=headers,
        )
        assert r.status_code == 201, r.text
    r = await client.post(
        "/memory/facts",
        json={
            "category": "preferences",
            "key": "preferred_language",
            "value": "Python 3",
            "dedupe": True,
        },
        headers=headers,
    )
    assert r.status_code == 201, r.text
    r = await client.put("/memory/summary", json={"content": "Ops engineer."}, headers=headers)
    assert r.status_code == 200, r.text
    r = await client.put(
        f"/sessions/{sid}/scratchpad/notes", json={"value": "nginx moved"}, headers=headers
    )
    assert r.status_code == 200, r.text
    r = await client.post(
        "/tools/write_error",
        json={"tool": "pip", "error": "permission denied", "fix": "use --user"},
        headers=headers,
    )
    assert r.status_code in (200, 201, 204), r.text
    r = await client.post(f"/sessions/{sid}/share", headers=headers)
    assert r.status_code in (200, 201, 204), r.text
    files = {"files": ("notes.txt", FILE_BYTES, "text/plain")}
    r = await client.post(f"/sessions/{sid}/files", files=files, headers=headers)
    assert r.status_code == 201, r.text
    # rows only background jobs write
    run_sql(
        db_url,
        "insert into rolling_summaries (session_id, user_id, summary, cursor_at)"
        ' values (%s, %s, \'{"text": "rolled"}\', %s)',
        sid,
        user_id,
        T0,
    )
    run_sql(
        db_url,
        "insert into session_memory_state (session_id, user_id, extracted_at)"
        " values (%s, %s, %s) on conflict do nothing",
        sid,
        user_id,
        T0,
    )
    vec = "[" + ",".join(str(x) for x in fake_embedding("nginx", settings.vector_dim)) + "]"
    run_sql(
        db_url,
        "insert into message_embeddings (session_id, sequence_number, user_id, embedding)"
        " values (%s, 0, %s, %s::vector)",
        sid,
        user_id,
        vec,
    )
    run_sql(  # a finished forget (its text erased)
        db_url,
        "insert into forget_jobs (user_id, id, state, text_sha256, via, actor)"
        " values (%s, gen_random_uuid(), 'done', '0123456789abcdef', 'api', %s)",
        user_id,
        user_id,
    )
    run_sql(  # a forget's record (a hash of a text none of the above holds)
        db_url,
        "insert into forgotten_texts (user_id, entries) values (%s, %s::jsonb)"
        " on conflict (user_id) do update set entries = excluded.entries",
        user_id,
        json.dumps([entry_of("a text long forgotten", "2026-01-01T00:00:00+00:00")]),
    )
    return Filled(user_id, headers, sid)
