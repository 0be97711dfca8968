"""Compression writes the demoted messages as raw chunks, on every path, and prepare
recalls them once per turn after a summary."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg

from tests.integration.context.conftest import append, new_session

TOPICS = [
    "the nginx reverse proxy listens on port 8098 behind /etc/nginx/sites-enabled/navi.conf",
    "invoice INV-2291 for 4,5 GB of storage was paid on the corporate card",
    "the deploy script deploy_prod.sh must run with FORCE_MIGRATE=1 on fridays",
    "postgres replication lag alarm threshold is 250 ms on the replica pg-02",
]


def _chunks(db_url: str, sid: str) -> list[tuple[str, list[str]]]:
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as c:
        return c.execute(
            "select content, breadcrumbs from memory_chunks where session_id = %s order by start_seq",
            (sid,),
        ).fetchall()


async def fill(client, sid: str, n: int = 12, filler: int = 600, start: int = 0) -> None:  # type: ignore[no-untyped-def]
    """`n` turns `note {i}: <topic>. <padding>` / `Noted {i}: <topic>.`, i from `start`."""
    for i in range(start, start + n):
        topic = TOPICS[i % len(TOPICS)]
        pad = " ".join(f"detail{i}_{j}" for j in range(filler // 10))
        await append(
            client,
            sid,
            [
                {"role": "user", "content": f"note {i}: {topic}. {pad}"},
                {"role": "assistant", "content": f"Noted {i}: {topic}."},
            ],
        )


async def test_forced_compaction_indexes_demoted_messages(cclient, db_url) -> None:  # type: ignore[no-untyped-def]
    sid = await new_session(cclient)
    await fill(cclient, sid)
    r = await cclient.post(f"/sessions/{sid}/compact", json={})
    assert r.status_code == 200, r.text
    chunks = _chunks(db_url, sid)
    assert chunks, "forced compaction wrote no raw chunks"
    text = "\n".join(c for c, _ in chunks)
    assert "User: note 0: the nginx reverse proxy" in text
    crumbs = {b for _, bs in chunks for b in bs}
    assert "/etc/nginx/sites-enabled/navi.conf" in crumbs
    # idempotent: compacting again only adds what was newly demoted
    before = len(chunks)
    await fill(cclient, sid, n=8)
    await cclient.post(f"/sessions/{sid}/compact", json={})
    assert len(_chunks(db_url, sid)) > before


async def test_preturn_compression_indexes_too(cclient, db_url) -> None:  # type: ignore[no-untyped-def]
    sid = await new_session(cclient)
    await fill(cclient, sid, n=10, filler=1500)
    r = await cclient.post(
        f"/sessions/{sid}/prepare", json={"message": {"role": "user", "content": "next"}}
    )
    assert r.status_code == 200, r.text
    assert any(e["type"] == "ContextCompressed" for e in r.json()["events"])
    assert _chunks(db_url, sid)


async def test_recall_once_per_turn_only_after_summary(cclient, ollama) -> None:  # type: ignore[no-untyped-def]
    sid = await new_session(cclient)
    ask = {"message": {"role": "user", "content": "which port does the nginx reverse proxy use?"}}
    # no summary yet: nothing is recalled
    first = (await cclient.post(f"/sessions/{sid}/prepare", json=ask)).json()
    assert not [m for m in first["context"] if m["metadata"].get("source") == "memory_recall"]
    await fill(cclient, sid)
    assert (await cclient.post(f"/sessions/{sid}/compact", json={})).status_code == 200
    for i in range(3):  # the conversation moved on: nginx is only in the compressed part
        await append(
            cclient,
            sid,
            [
                {"role": "user", "content": f"how is the weather today {i}?"},
                {"role": "assistant", "content": "Sunny and mild."},
            ],
        )
    ctx = (await cclient.post(f"/sessions/{sid}/prepare", json=ask)).json()["context"]
    recalled = [m for m in ctx if m["metadata"].get("source") == "memory_recall"]
    assert len(recalled) == 1
    assert "port 8098" in recalled[0]["content"]
    assert recalled[0] is ctx[-1] or ctx[-1]["metadata"].get("source") == "memory_recall"
    ids = recalled[0]["metadata"]["chunk_ids"]
    assert 1 <= len(ids) <= 2
    meta = (await cclient.get(f"/sessions/{sid}")).json()["session_metadata"]
    assert set(ids) <= set(meta["injected_chunk_ids"])
    # the same excerpts are not injected again on the next turn
    again = (await cclient.post(f"/sessions/{sid}/prepare", json=ask)).json()["context"]
    for m in again:
        if m["metadata"].get("source") == "memory_recall":
            assert not set(m["metadata"]["chunk_ids"]) & set(ids)
    # mid-turn prepares never recall
    mid = (await cclient.post(f"/sessions/{sid}/prepare", json={**ask, "mid_turn": True})).json()
    assert not [m for m in mid["context"] if m["metadata"].get("source") == "memory_recall"]


async def test_recall_disabled(make_client, settings, ctx_settings) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import ADMIN_TOKEN

    async with make_client(settings, memory_recall_enabled=False, **ctx_settings) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = await new_session(c)
        await fill(c, sid)
        await c.post(f"/sessions/{sid}/compact", json={})
        ctx = (
            await c.post(
                f"/sessions/{sid}/prepare",
                json={"message": {"role": "user", "content": "nginx reverse proxy port"}},
            )
        ).json()["context"]
        assert not [m for m in ctx if m["metadata"].get("source") == "memory_recall"]


async def test_prepare_carries_memory_summary_and_facts(cclient) -> None:  # type: ignore[no-untyped-def]
    r = await cclient.post(
        "/memory/facts",
        json={
            "category": "preferences",
            "key": "editor",
            "value": "neovim",
            "source": "user_explicit",
        },
    )
    assert r.status_code in (200, 201), r.text
    assert (
        await cclient.put("/memory/summary", json={"content": "Likes terse answers."})
    ).status_code in (200, 201)
    sid = await new_session(cclient)
    await append(
        cclient, sid, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    )
    ctx = (
        await cclient.post(
            f"/sessions/{sid}/prepare",
            json={"message": {"role": "user", "content": "which editor do I use?"}},
        )
    ).json()["context"]
    sources = [m["metadata"].get("source") for m in ctx]
    assert sources[:2] == ["memory_summary", "memory_facts"]
    assert ctx[0]["content"] == "## What I remember about the user\n\nLikes terse answers."
    assert "• [preferences] editor → neovim (confidence: 90%, updated today)" in ctx[1]["content"]
    assert [m["content"] for m in ctx[2:]] == ["hi", "hello"]


async def test_unified_search_puts_facts_first_and_flags_outdated_raw(
    cclient, engine, settings
) -> None:  # type: ignore[no-untyped-def]
    sid = await new_session(cclient)
    await fill(cclient, sid)
    await cclient.post(f"/sessions/{sid}/compact", json={})
    r = await cclient.post(
        "/memory/facts",
        json={
            "category": "technical",
            "key": "nginx_proxy_port",
            "value": "nginx reverse proxy now on port 9000",
        },
    )
    assert r.status_code in (200, 201), r.text
    body = (
        await cclient.post(
            "/memory/search", json={"query": "nginx reverse proxy port", "current_session_id": sid}
        )
    ).json()
    kinds = [h["source_type"] for h in body["hits"]]
    assert kinds[0] == "fact" and "raw" in kinds
    raw = next(h for h in body["hits"] if h["source_type"] == "raw" and "nginx" in h["text"])
    updated = datetime.fromisoformat(r.json()["updated_at"]).astimezone(UTC)
    assert raw["superseded_by"] == f"nginx_proxy_port (updated {updated:%Y-%m-%d %H:%M})"
    assert "⚠ outdated" in body["text"]
