"""Error memory: write_error / error_history, TTL renewed on hit, purge, unified scope."""

from __future__ import annotations

import psycopg

from app.db.engine import session_factory
from app.domain.error_memory.services import purge_expired_errors
from app.domain.kernel.runtime import Runtime
from tests.conftest import new_user

PERM = {
    "tool": "shell",
    "error": "Permission denied: /var/log/navi/app.log",
    "fix": "Run the service as the navi user; chown -R navi /var/log/navi.",
    "context": "deploying on the staging box",
}
PIP = {
    "tool": "pip",
    "error": "error: externally-managed-environment",
    "fix": "Create a virtualenv first: python -m venv .venv",
}


def _sql(db_url: str, stmt: str, *args: object) -> list[tuple]:
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as c:
        cur = c.execute(stmt, args)  # type: ignore[arg-type]
        rows = cur.fetchall() if cur.description else []
        c.commit()
        return rows


async def test_write_and_search_merges_text_and_vector(client, db_url) -> None:  # type: ignore[no-untyped-def]
    r = await client.post("/tools/write_error", json={**PERM, "extra": "ignored"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["created"] is True and body["entry"]["embedded"] is True
    assert body["entry"]["hit_count"] == 0
    await client.post("/tools/write_error", json=PIP)
    r = await client.post("/tools/error_history", json={"query": "permission denied log file"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["hits"][0]["tool"] == "shell"
    assert body["hits"][0]["score"] is not None  # found by the vector search too
    assert body["hits"][0]["hit_count"] == 1 and body["hits"][0]["last_hit_at"]
    assert "fix: Run the service as the navi user" in body["text"]
    # substring fallback: a token full text does not split this way
    r = await client.post("/tools/error_history", json={"query": "externally-managed"})
    assert [h["tool"] for h in r.json()["hits"]][0] == "pip"
    # tool filter (case-insensitive), and a tool alone lists its recent errors
    r = await client.post("/tools/error_history", json={"query": "permission", "tool": "PIP"})
    assert all(h["tool"] == "pip" for h in r.json()["hits"])
    r = await client.post("/tools/error_history", json={"tool": "shell"})
    assert [h["tool"] for h in r.json()["hits"]] == ["shell"]
    r = await client.post("/tools/error_history", json={"query": "  "})
    assert r.status_code == 422 and "query" in r.json()["detail"]
    r = await client.post("/tools/write_error", json={"tool": "shell", "error": "x"})
    assert r.status_code == 422 and r.json()["detail"].startswith("fix")


async def test_same_error_updates_and_llm_failure_keeps_entry(client, ollama, db_url) -> None:  # type: ignore[no-untyped-def]
    ollama.fail("http500")
    r = await client.post("/tools/write_error", json=PERM)
    assert r.status_code == 200, r.text
    assert r.json()["entry"]["embedded"] is False  # no vector, still stored
    ollama.recover()
    r = await client.post("/tools/write_error", json={**PERM, "fix": "Use sudo -u navi"})
    body = r.json()
    assert body["created"] is False and body["entry"]["embedded"] is True
    assert body["entry"]["fix"] == "Use sudo -u navi"
    assert _sql(db_url, "select count(*) from error_memory")[0][0] == 1
    # search without embeddings: text only
    ollama.fail("http500")
    r = await client.post("/tools/error_history", json={"query": "permission denied"})
    hits = r.json()["hits"]
    assert len(hits) == 1 and hits[0]["score"] is None


async def test_ttl_renewed_on_hit_expired_hidden_and_purged(
    client, db_url, engine, settings
) -> None:  # type: ignore[no-untyped-def]
    await client.post("/tools/write_error", json=PERM)
    await client.post("/tools/write_error", json=PIP)
    (ttl_days,) = _sql(
        db_url, "select extract(day from expires_at - created_at) from error_memory limit 1"
    )[0]
    assert int(ttl_days) == 90
    # almost expired: a hit renews it to now() + 90 days
    _sql(
        db_url, "update error_memory set expires_at = now() + interval '1 hour' where tool='shell'"
    )
    r = await client.post("/tools/error_history", json={"query": "permission denied"})
    assert r.json()["hits"][0]["tool"] == "shell"
    (days, hits) = _sql(
        db_url,
        "select extract(epoch from expires_at - now()) / 86400, hit_count from error_memory "
        "where tool = 'shell'",
    )[0]
    assert 89.9 < float(days) <= 90 and hits == 1
    # expired: never returned, by the tool or by the unified search
    _sql(
        db_url,
        "update error_memory set expires_at = now() - interval '1 second' where tool='shell'",
    )
    r = await client.post("/tools/error_history", json={"query": "permission denied"})
    assert all(h["tool"] != "shell" for h in r.json()["hits"])
    r = await client.post("/memory/search", json={"query": "permission denied", "scope": "errors"})
    assert r.json()["hits"] == []
    # the job deletes expired rows only
    runtime = Runtime.of(settings, session_factory(engine))
    assert await purge_expired_errors(runtime) == 1
    assert _sql(db_url, "select tool from error_memory") == [("pip",)]
    assert await purge_expired_errors(runtime) == 0


async def test_unified_search_scope_errors_and_isolation(client, db_url) -> None:  # type: ignore[no-untyped-def]
    _, alice = await new_user(client, "alice")
    _, bob = await new_user(client, "bob")
    await client.post("/tools/write_error", json=PERM, headers=alice)
    r = await client.post(
        "/memory/search", json={"query": "permission denied", "scope": "errors"}, headers=alice
    )
    assert r.status_code == 200, r.text
    hits = r.json()["hits"]
    assert [(h["source_type"], h["key"]) for h in hits] == [("error", "shell")]
    assert "error [shell]" in r.json()["text"] and "fix: Run the service" in r.json()["text"]
    assert _sql(db_url, "select hit_count from error_memory")[0][0] == 1  # a hit renews
    # scope all does not include errors (asked for explicitly only)
    r = await client.post("/memory/search", json={"query": "permission denied"}, headers=alice)
    assert all(h["source_type"] != "error" for h in r.json()["hits"])
    # bob sees none of alice's errors
    r = await client.post("/tools/error_history", json={"query": "permission"}, headers=bob)
    assert r.json()["hits"] == []
    r = await client.post(
        "/memory/search", json={"query": "permission denied", "scope": "errors"}, headers=bob
    )
    assert r.json()["hits"] == []
