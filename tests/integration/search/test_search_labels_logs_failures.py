"""memory_search: raw excerpts labelled against newer facts whatever the scope, one
`memory_search.done` event per search, one store failing leaves the others answering."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from psycopg.errors import UndefinedTable
from sqlalchemy import text
from structlog.testing import capture_logs

from app.db.engine import session_factory, transaction
from app.domain.error_memory.services import unified_error_search
from app.domain.facts.memory_hits import search_fact_hits
from app.domain.kernel.principal import Principal
from app.domain.search.services import UnifiedSearch
from tests.conftest import ADMIN_TOKEN, run_sql
from tests.integration.agents.test_tools import _tool
from tests.integration.raw_history.test_raw_and_search import _index, _session

OLD_PORT = "nginx config sites-enabled"  # words of the indexed chunk (port 8098, at T0)


async def _newer_port_fact(client) -> str:  # type: ignore[no-untyped-def]
    """A `server_port` fact written now (after the chunk's turns): its label."""
    r = await client.post(
        "/memory/facts",
        json={
            "category": "technical",
            "key": "server_port",
            "value": "server listens on port 9000",
        },
    )
    assert r.status_code == 201, r.text
    at = datetime.fromisoformat(r.json()["updated_at"]).astimezone(UTC)
    return f"server_port (updated {at:%Y-%m-%d %H:%M})"


async def test_raw_excerpt_is_labelled_with_the_newer_fact_in_scope_raw_and_all(
    client, engine, settings
) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _index(engine, settings, "admin", sid)
    label = await _newer_port_fact(client)
    for path, scope in [
        ("/memory/search", "raw"),
        ("/memory/search", "all"),
        ("/tools/memory_search", "raw"),
    ]:
        r = await client.post(path, json={"query": "which server port", "scope": scope})
        assert r.status_code == 200, r.text
        body = r.json()
        raws = [h for h in body["hits"] if h["source_type"] == "raw"]
        assert raws and raws[0]["superseded_by"] == label, (path, scope, body["hits"])
        assert raws[0]["superseded_value"] == "server listens on port 9000"  # what replaced it
        assert f"overrides this — {label}, now: server listens on port 9000. Trust" in body["text"]
        kinds = {h["source_type"] for h in body["hits"]}
        # scope raw: the facts label the excerpts, they are not returned
        assert ("fact" in kinds) == (scope == "all")
    # the tool as /turns and MCP run it
    tool = await _tool(
        client,
        Principal(id="admin", name="admin"),
        sid,
        "memory_search",
        {"query": "which server port", "scope": "raw"},
    )
    assert not tool.is_error and f"overrides this — {label}, now: server" in tool.text


async def test_each_search_logs_its_counts_never_the_query(make_client, engine, settings) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, log_level="info") as client:  # the event is an info line
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        await _logged_search(client, engine, settings)


async def _logged_search(client, engine, settings) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _index(engine, settings, "admin", sid)
    await _newer_port_fact(client)
    await client.put(f"/sessions/{sid}/scratchpad/plan", json={"value": "move the server port"})
    query = "which server port secret-word-xyz"
    with capture_logs() as logs:
        r = await client.post("/memory/search", json={"query": query, "scope": "all"})
        assert r.status_code == 200
        await client.post("/memory/search", json={"query": "server port", "scope": "raw"})
    done = [e for e in logs if e["event"] == "memory_search.done"]
    assert len(done) == 2
    first, second = done
    assert first["query_len"] == len(query) and first["scope"] == "all"
    assert (first["facts"], first["raw"], first["sketches"], first["errors"]) == (1, 1, 1, 0)
    assert first["failed"] == [] and isinstance(first["ms"], float) and first["ms"] >= 0
    assert (second["scope"], second["facts"], second["raw"]) == ("raw", 0, 1)
    assert not any("secret-word-xyz" in repr(v) for e in logs for v in e.values())


def _failures(logs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["store"], e["error"]) for e in logs if e["event"] == "memory_search.store_failed"]


async def test_a_failing_store_empties_its_tier_and_the_others_answer(
    make_client, engine, settings, db_url
) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, log_level="info") as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        await _failing_stores(client, engine, settings, db_url)


async def _failing_stores(client, engine, settings, db_url) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _index(engine, settings, "admin", sid)
    await _newer_port_fact(client)
    await client.put(f"/sessions/{sid}/scratchpad/plan", json={"value": "move the server port"})
    query = {"query": "which server port", "scope": "all"}
    # sketches and facts are read on one side connection: the facts failing there
    # leaves the sketches (read after them) answering
    for table, store, answering in [
        ("kv_store", "sketches", ["fact", "raw"]),
        ("memory_facts", "facts", ["raw", "sketch"]),
    ]:
        run_sql(db_url, f"ALTER TABLE {table} RENAME TO {table}_away")
        try:
            with capture_logs() as logs:
                r = await client.post("/memory/search", json=query)
        finally:
            run_sql(db_url, f"ALTER TABLE {table}_away RENAME TO {table}")
        assert r.status_code == 200, r.text
        kinds = [h["source_type"] for h in r.json()["hits"]]
        assert kinds == answering
        assert _failures(logs) == [(store, "UndefinedTable")]
        [done] = [e for e in logs if e["event"] == "memory_search.done"]
        assert done["failed"] == [store]
    # every store asked for failing is the error, not "no matches in any store"
    run_sql(db_url, "ALTER TABLE kv_store RENAME TO kv_store_away")
    try:
        r = await client.post("/memory/search", json={"query": "server port", "scope": "sketches"})
        assert r.status_code == 500
    finally:
        run_sql(db_url, "ALTER TABLE kv_store_away RENAME TO kv_store")
    # the raw index runs on the caller's own session: its failure is kept to a
    # savepoint, the caller's transaction stays usable (the turn loop goes on with it)
    run_sql(db_url, "ALTER TABLE memory_chunks RENAME TO memory_chunks_away")
    try:
        r = await client.post("/memory/search", json=query)
        assert r.status_code == 200, r.text
        assert [h["source_type"] for h in r.json()["hits"]] == ["fact", "sketch"]
        factory = session_factory(engine)
        async with transaction(factory) as db:
            for side in (factory, None):  # with and without the side connection
                search = UnifiedSearch(
                    db,
                    None,
                    settings,
                    facts=search_fact_hits,
                    errors=unified_error_search(settings),
                    side_sessions=side,
                )
                with capture_logs() as logs:
                    res = await search.search("which server port", user_id="admin")
                assert [h.source_type for h in res.hits] == ["fact", "sketch"]
                assert _failures(logs) == [("raw", "UndefinedTable")]
                assert (await db.execute(text("select 1"))).scalar() == 1
                with pytest.raises(UndefinedTable, match="memory_chunks"):
                    await search.search("which server port", user_id="admin", scope="raw")
                assert (await db.execute(text("select 1"))).scalar() == 1
    finally:
        run_sql(db_url, "ALTER TABLE memory_chunks_away RENAME TO memory_chunks")
