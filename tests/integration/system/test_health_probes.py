"""Issue 42, item 9: the public health routes cost the model and the database at most one
probe per `HEALTH_CHECK_SECONDS` per process, however many callers (single flight); a
readiness check for load balancers (`/health/ready`) and a liveness check with no I/O
(`/health/live`). On be065d7 every `GET /health` embedded a text (`/api/embed`), pinged
Ollama (`/api/version`) and checked out a pooled connection: 50 calls, 50 embeddings."""

from __future__ import annotations

import asyncio

from alembic.script import ScriptDirectory

from app.config import Settings
from app.db import migrate
from tests.conftest import run_sql
from tests.fakes.ollama_server import FakeOllama

CALLS = 50


async def test_a_flood_of_health_costs_one_probe(  # type: ignore[no-untyped-def]
    make_client, settings: Settings, ollama: FakeOllama
) -> None:
    async with make_client(settings, health_check_seconds=30) as client:
        embeds, pings = ollama.count("/api/embed"), ollama.count("/api/version")
        answers = await asyncio.gather(*(client.get("/health") for _ in range(CALLS)))
        assert {r.status_code for r in answers} == {200}
        assert {r.json()["status"] for r in answers} == {"ok"}
        assert answers[0].json()["index"] is not None  # the backlog is still read
        # then one after the other: answered from the probe
        for _ in range(CALLS):
            assert (await client.get("/health")).status_code == 200
        assert ollama.count("/api/embed") - embeds <= 1, "one embedding per probe, one probe"
        assert ollama.count("/api/version") - pings <= 1


async def test_the_probe_is_renewed_after_the_period(  # type: ignore[no-untyped-def]
    make_client, settings: Settings, ollama: FakeOllama
) -> None:
    async with make_client(settings, health_check_seconds=0.3) as client:
        first = (await client.get("/health")).json()
        assert first["status"] == "ok" and first["checked_seconds_ago"] < 0.3
        ollama.fail("refuse")
        cached = (await client.get("/health")).json()
        assert cached["status"] == "ok" and cached["ollama"] is True  # within the period
        await asyncio.sleep(0.4)
        later = (await client.get("/health")).json()
        assert later["status"] == "degraded" and later["ollama"] is False
        assert later["embedding"] == "unreachable"


async def test_ready_and_live(  # type: ignore[no-untyped-def]
    make_client, settings: Settings, ollama: FakeOllama, db_url: str
) -> None:
    async with make_client(settings, health_check_seconds=30) as client:
        embeds = ollama.count("/api/embed")
        live = await asyncio.gather(*(client.get("/health/live") for _ in range(CALLS)))
        assert {r.status_code for r in live} == {200}
        assert live[0].json() == {"status": "alive"}
        assert ollama.count("/api/embed") == embeds  # liveness does no I/O

        ready = await asyncio.gather(*(client.get("/health/ready") for _ in range(CALLS)))
        assert {r.status_code for r in ready} == {200}
        body = ready[0].json()
        assert body["ready"] is True and body["model"] == "ok"
        assert body["checks"] == {
            "database": True,
            "writable": True,
            "schema": True,
            "vector": True,
        }
        assert body["revision"] == body["head"] == migrate.head_revision()
        assert ollama.count("/api/embed") - embeds <= 1
        runtime = client.app.state.runtime
        from app.domain.system.health import probes

        assert probes(runtime).db.runs <= 2  # 50 concurrent callers, one probe

    # the model down: still ready (reported), never a 503 for the model's sake
    ollama.fail("refuse")
    async with make_client(settings) as client:
        r = await client.get("/health/ready")
        assert r.status_code == 200 and r.json()["model"] == "degraded", r.text
    ollama.recover()

    # the schema behind the code's head (a deploy whose `navi migrate` has not run yet)
    head = migrate.head_revision()
    previous = ScriptDirectory.from_config(migrate.alembic_config()).get_revision(head)
    assert previous is not None and isinstance(previous.down_revision, str)
    run_sql(db_url, "UPDATE alembic_version SET version_num = %s", previous.down_revision)
    try:
        async with make_client(settings) as client:
            r = await client.get("/health/ready")
            assert r.status_code == 503, r.text
            assert r.json()["ready"] is False and r.json()["checks"]["schema"] is False
            assert (await client.get("/health")).status_code == 503
            assert (await client.get("/health/live")).status_code == 200
        # past it: a later release migrated while this one still serves (rolling deploy)
        run_sql(db_url, "UPDATE alembic_version SET version_num = 'from_a_later_release'")
        async with make_client(settings) as client:
            r = await client.get("/health/ready")
            assert r.status_code == 200 and r.json()["checks"]["schema"] is True, r.text
    finally:
        run_sql(db_url, "UPDATE alembic_version SET version_num = %s", head)
