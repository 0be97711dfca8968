"""Forget, case by case: the text's bounds, literal matching of LIKE and regex
characters, the memory tool, the admin route, a forget without the embedder, chunks
that become identical."""

from __future__ import annotations

import json
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from prometheus_client import REGISTRY

from app.config import Settings
from app.db.engine import session_factory
from app.domain.forget.redact import text_hash
from app.domain.raw_history.idle_index import index_idle_sessions
from app.llm.factory import build_gateway
from tests.conftest import ADMIN_TOKEN, new_user, run_sql
from tests.fakes.ollama_server import FakeOllama
from tests.integration.forget.conftest import ok, session_with


@pytest.mark.parametrize(
    ("text", "detail"),
    [("ab", "at least 3"), ("  ab \n ", "at least 3"), ("x" * 1001, "text"), ("rgot", "marker")],
)
async def test_bad_text_is_422(client: AsyncTestClient, text: str, detail: str) -> None:
    r = await client.post("/memory/forget", json={"text": text})
    assert r.status_code == 422, r.text
    assert detail in r.json()["detail"]
    r = await client.post("/tools/memory", json={"action": "forget", "text": text})
    assert r.status_code == 422, r.text


async def test_literal_text_with_like_and_regex_metacharacters(
    client: AsyncTestClient, db_url: str
) -> None:
    weird = "a.b*c%_\\"
    uid, h = await new_user(client, "carol")
    decoys = ["aXbbbc%_\\", "a.b*cZZ\\", "a.b*c%_/"]  # a regex, a LIKE, a near miss
    messages = [{"role": "user", "content": f"key {weird} end"}]
    messages += [{"role": "user", "content": d} for d in decoys]
    call = {"function": {"name": "t", "arguments": {"k": f'quote "{weird.upper()}"'}}}
    messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
    sid = await session_with(client, h, messages)
    await ok(
        await client.post(
            "/memory/facts", json={"category": "c", "key": "k", "value": weird}, headers=h
        ),
        201,
    )
    for i, d in enumerate(decoys):
        body = {"category": "c", "key": f"decoy{i}", "value": d}
        await ok(await client.post("/memory/facts", json=body, headers=h), 201)

    out = await ok(await client.post("/memory/forget", json={"text": weird}, headers=h))
    assert out["changed"]["messages"] == 2 and out["changed"]["facts"] == 1, out
    page = await ok(await client.get(f"/sessions/{sid}/messages", headers=h))
    contents = [m["content"] for m in page["messages"]]
    assert "key [forgotten] end" in contents and all(d in contents for d in decoys)
    args = [m["tool_calls"] for m in page["messages"] if m["tool_calls"]][0][0]["function"]
    assert args["arguments"] == {"k": 'quote "[forgotten]"'}
    facts = await ok(await client.get("/memory/facts", headers=h))
    assert sorted(f["value"] for f in facts["items"]) == sorted(decoys)
    # the tool-call JSON is still valid JSON in the table
    rows = run_sql(
        db_url,
        "SELECT CAST(tool_calls AS text) FROM session_messages WHERE user_id = %s"
        " AND jsonb_typeof(tool_calls) = 'array'",
        uid,
    )
    assert rows and json.loads(rows[0][0])


async def test_memory_tool_forgets_a_text(client: AsyncTestClient) -> None:
    _, h = await new_user(client, "dave")
    sid = await session_with(client, h, [{"role": "user", "content": "my PIN is 4711-2"}])
    await ok(
        await client.post(
            "/memory/facts", json={"category": "c", "key": "pin", "value": "4711-2"}, headers=h
        ),
        201,
    )
    r = await ok(
        await client.post("/tools/memory", json={"action": "forget", "text": "4711-2"}, headers=h)
    )
    assert r["ok"] is True and r["deleted"] == 1
    assert r["forgotten"]["changed"]["messages"] == 1
    assert "4711" not in r["text"]
    page = await ok(await client.get(f"/sessions/{sid}/messages", headers=h))
    assert page["messages"][0]["content"] == "my PIN is [forgotten]"
    # by key, as before
    await ok(
        await client.post(
            "/memory/facts", json={"category": "c", "key": "shell", "value": "zsh"}, headers=h
        ),
        201,
    )
    r = await ok(
        await client.post("/tools/memory", json={"action": "forget", "key": "shell"}, headers=h)
    )
    assert r["ok"] is True and r["deleted"] == 1
    r = await client.post("/tools/memory", json={"action": "forget"}, headers=h)
    assert r.status_code == 422 and "text" in r.json()["detail"]


async def test_admin_forgets_for_a_user(make_client, settings: Settings, capsys) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, log_level="info") as client:  # after capsys: logs captured
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        uid, h = await new_user(client, "erin")
        _, other = await new_user(client, "frank", ["navi.memory.read_all"])
        await session_with(client, h, [{"role": "user", "content": "secret word zebra42"}])
        path = f"/admin/users/{uid}/forget"
        for headers in (other, h):
            r = await client.post(path, json={"text": "zebra42"}, headers=headers)
            assert r.status_code == 403, r.text
        r = await client.post("/admin/users/nobody-here/forget", json={"text": "zebra42"})
        assert r.status_code == 404, r.text
        capsys.readouterr()
        rows = {"store": "messages"}
        before = REGISTRY.get_sample_value("navi_forgotten_rows_total", rows) or 0
        out = await ok(await client.post(path, json={"text": "zebra42"}))
        assert out["changed"]["messages"] == 1
        assert REGISTRY.get_sample_value("navi_forgotten_rows_total", rows) == before + 1
        # the log names a hash of the text, never the text
        logged = "".join(capsys.readouterr())
        assert "memory.forgotten" in logged and text_hash("zebra42") in logged
        assert "actor=admin" in logged and f"user_id={uid}" in logged
        assert "zebra42" not in logged


async def test_without_the_embedder_changed_rows_are_left_unembedded(
    client: AsyncTestClient, ollama: FakeOllama, engine: Any, settings: Settings, db_url: str
) -> None:
    uid, h = await new_user(client, "gina")
    await session_with(client, h, [{"role": "user", "content": "door code 8086-X, remember"}])
    body = {"tool": "door", "error": "code 8086-X refused", "fix": "call the janitor"}
    await ok(await client.post("/tools/write_error", json=body, headers=h))
    llm = build_gateway(settings)
    try:
        await index_idle_sessions(session_factory(engine), llm, settings, older_than_minutes=0)
    finally:
        await llm.aclose()
    ollama.fail("http500", paths={"/api/embed"})
    out = await ok(await client.post("/memory/forget", json={"text": "8086-x"}, headers=h))
    ollama.recover()
    assert out["changed"]["chunks"] == 1 and out["changed"]["errors"] == 1
    assert run_sql(db_url, "SELECT count(*) FROM memory_chunk_vectors WHERE user_id = %s", uid) == [
        (0,)
    ]  # what `make reembed` embeds
    assert run_sql(
        db_url, "SELECT embedding IS NULL, error_text FROM error_memory WHERE user_id = %s", uid
    ) == [(True, "code [forgotten] refused")]


async def test_chunks_that_become_identical_keep_distinct_hashes(
    client: AsyncTestClient, db_url: str
) -> None:
    """(session, content_hash) is unique: two chunks that differ only in the text's
    letter case are both redacted (the second's hash salted with its id)."""
    uid, h = await new_user(client, "hank")
    sid = await session_with(client, h, [{"role": "user", "content": "hello"}])
    for n, content in enumerate(["note Q-42 done", "note q-42 done", "note [forgotten] done"]):
        run_sql(
            db_url,
            "INSERT INTO memory_chunks (id, user_id, session_id, content, content_hash,"
            " start_seq, end_seq) VALUES (gen_random_uuid(), %s, %s, %s,"
            " encode(sha256(convert_to(%s, 'UTF8')), 'hex'), %s, %s)",
            uid,
            sid,
            content,
            content,
            n,
            n,
        )
    out = await ok(await client.post("/memory/forget", json={"text": "q-42"}, headers=h))
    assert out["changed"]["chunks"] == 2
    rows = run_sql(
        db_url, "SELECT content, content_hash FROM memory_chunks WHERE user_id = %s", uid
    )
    assert rows is not None and {r[0] for r in rows} == {"note [forgotten] done"}
    assert len({r[1] for r in rows}) == 3
