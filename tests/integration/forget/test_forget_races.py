"""Forget stays forgotten (issue 45, item 1): every writer of derived text that was
already under way when a forget ran — its model answering slowly, the forget landing
meanwhile — stores the text redacted, never verbatim. After each race the text is found
in no table of the user's (the summary and its KEYS, the raw chunks and their
breadcrumbs, the rolling summary, the facts, the user summary, the session name).

Served by uvicorn (real concurrent requests), a real PostgreSQL, the fake Ollama whose
answer to the writer's call waits until the test has seen the forget answer.
`FORGET_RACES` (environment) repeats each race that many times (default 1)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.base import Base
from app.db.engine import session_factory
from app.domain.facts.extraction import prompt, run_extraction_pass
from app.domain.kernel.forgotten import MARKER
from app.domain.kernel.runtime import Runtime
from app.domain.rolling.services import run_rolling_summaries
from tests.conftest import ADMIN_TOKEN, run_sql
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.served import serve

SECRET = "K7-VAULT-3141"
RACES = range(int(os.environ.get("FORGET_RACES", "1")))
EXTRACT_HEAD = prompt("extract_facts.txt")[:60]


class Gate:
    """A model answer that waits: `asked` once the writer's call reached the fake model,
    which answers only after `go` (set by the test once the forget has answered)."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.go = threading.Event()

    def reply(self, answer: str | Callable[[dict[str, Any]], str]) -> Callable[..., str]:
        def gated(body: dict[str, Any]) -> str:
            self.asked.set()
            self.go.wait(30)
            return answer(body) if callable(answer) else answer

        return gated

    async def wait_asked(self) -> None:
        assert await asyncio.to_thread(self.asked.wait, 30), "the writer never asked the model"


@pytest.fixture
def race_settings(settings: Settings, tmp_path: Path) -> Settings:
    profiles = tmp_path / "profiles.json"
    profiles.write_text(json.dumps({"chat": {"context_mode": "rolling"}}))
    return dataclasses.replace(
        settings,
        profiles_file=str(profiles),
        session_auto_name_enabled=False,
        extraction_enabled=False,  # the app's own passes (a new session sets one off): the test's only
        llm_max_attempts=1,
        llm_backoff_initial=0.0,
        forget_wait_seconds=30.0,
        rolling_summary_noise_filter=False,
    )


@asynccontextmanager
async def served(engine: AsyncEngine, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    from app.asgi import create_app

    app = create_app(settings, engine=engine, background_jobs=False)
    async with serve(app) as base:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


async def ok(r: httpx.Response, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json() if r.content else None


async def session_saying(c: httpx.AsyncClient, profile: str, turns: int = 8) -> str:
    """A session whose first exchange says the secret, then `turns` plain exchanges."""
    sid = (await ok(await c.post("/sessions", json={"profile_id": profile}), 201))["id"]
    msgs = [
        {"role": "user", "content": f"The vault code is {SECRET}, keep it safe."},
        {"role": "assistant", "content": f"Noted: {SECRET}."},
    ]
    for i in range(turns):
        msgs += [
            {"role": "user", "content": f"question {i} about the garden shed and its roof"},
            {"role": "assistant", "content": f"answer {i}: tar paper, then shingles"},
        ]
    await ok(await c.post(f"/sessions/{sid}/messages", json={"messages": msgs}), 201)
    return str(sid)


async def forget(c: httpx.AsyncClient) -> None:
    out = await ok(await c.post("/memory/forget", json={"text": SECRET}))
    assert out["dry_run"] is False and "job_id" not in out  # done, not left running


def found_anywhere(db_url: str) -> dict[str, int]:
    """Per table with a `user_id`: the rows whose text (any column) holds the secret."""
    found = {}
    for table in Base.metadata.sorted_tables:
        if "user_id" not in table.columns:
            continue
        rows = run_sql(
            db_url,
            f"SELECT count(*) FROM {table.name} t WHERE CAST(t.* AS text) ILIKE %s",
            f"%{SECRET}%",
        )
        assert rows is not None
        if rows[0][0]:
            found[table.name] = int(rows[0][0])
    return found


async def race(gate: Gate, writer: asyncio.Future[Any], c: httpx.AsyncClient) -> Any:
    """The forget lands while the writer waits on the model; then the model answers."""
    try:
        await gate.wait_asked()
        await forget(c)
    finally:
        gate.go.set()
    return await writer


@pytest.mark.parametrize("attempt", RACES)
async def test_compression_summary_keys_and_breadcrumbs(
    attempt: int, engine: AsyncEngine, race_settings: Settings, ollama: FakeOllama, db_url: str
) -> None:
    async with served(engine, race_settings) as c:
        sid = await session_saying(c, "code")
        gate = Gate()
        ollama.chat_replies = [gate.reply(f"- The vault code is {SECRET}.\nKEYS: {SECRET}, vault")]
        compact = asyncio.ensure_future(c.post(f"/sessions/{sid}/compact"))
        await ok(await race(gate, compact, c))
        assert found_anywhere(db_url) == {}
        summary = (await ok(await c.get(f"/sessions/{sid}/context")))["messages"][0]
        assert summary["is_summary"] and MARKER in summary["content"]
        assert summary["metadata"]["breadcrumbs"] == ["vault"]  # the forgotten key dropped
        chunks = run_sql(
            db_url, "SELECT content, breadcrumbs FROM memory_chunks WHERE session_id = %s", sid
        )
        assert chunks and all("vault" in crumbs for _, crumbs in chunks)


@pytest.mark.parametrize("attempt", RACES)
async def test_rolling_summary(
    attempt: int, engine: AsyncEngine, race_settings: Settings, ollama: FakeOllama, db_url: str
) -> None:
    async with served(engine, race_settings) as c:
        sid = await session_saying(c, "chat", turns=1)
        gate = Gate()
        summary = {
            "key_decisions": [f"Do: keep {SECRET} in the vault"],
            "past_discussions": [f"the vault code {SECRET.lower()}"],
            "current_discussion": "the shed roof",
        }
        ollama.chat_replies = [gate.reply(json.dumps(summary))]
        runtime = Runtime.of(race_settings, session_factory(engine))
        try:
            rolling = asyncio.ensure_future(run_rolling_summaries(runtime))
            report = await race(gate, rolling, c)
        finally:
            await runtime.llm.aclose()
        assert report.chunks == 1
        assert found_anywhere(db_url) == {}
        [(stored,)] = run_sql(
            db_url, "SELECT summary FROM rolling_summaries WHERE session_id = %s", sid
        )
        assert stored["key_decisions"] == [f"Do: keep {MARKER} in the vault"]
        assert stored["past_discussions"] == [f"the vault code {MARKER}"]


@pytest.mark.parametrize("attempt", RACES)
async def test_fact_extraction_and_the_user_summary(
    attempt: int, engine: AsyncEngine, race_settings: Settings, ollama: FakeOllama, db_url: str
) -> None:
    async with served(engine, race_settings) as c:
        sid = await session_saying(c, "default", turns=1)
        run_sql(
            db_url,
            "UPDATE sessions SET last_active = now() - interval '2 hours' WHERE id = %s",
            sid,
        )
        gate = Gate()
        facts = [
            {
                "category": "security",
                "key": "vault_code",
                "value": SECRET,
                "source": "user_explicit",
            },
            {"category": "home", "key": "shed_roof", "value": "shingles", "source": "conversation"},
        ]

        def answer(body: dict[str, Any]) -> str:
            if body["messages"][0]["content"].startswith(EXTRACT_HEAD):
                return json.dumps(facts)
            return f"The user keeps the vault code {SECRET} and likes shingles."

        ollama.chat_replies = [gate.reply(answer), answer]
        runtime = Runtime.of(race_settings, session_factory(engine))
        try:
            extraction = asyncio.ensure_future(run_extraction_pass(runtime))
            result = await race(gate, extraction, c)
        finally:
            await runtime.llm.aclose()
        assert (result.extracted, result.facts_saved) == (1, 1), result  # the vault: not saved
        assert found_anywhere(db_url) == {}
        keys = [k for (k,) in run_sql(db_url, "SELECT key FROM memory_facts") or []]
        assert keys == ["shed_roof"]
        [(content,)] = run_sql(db_url, "SELECT content FROM memory_summary") or []
        assert content == f"The user keeps the vault code {MARKER} and likes shingles."


@pytest.mark.parametrize("attempt", RACES)
async def test_session_name(
    attempt: int, engine: AsyncEngine, race_settings: Settings, ollama: FakeOllama, db_url: str
) -> None:
    named = dataclasses.replace(race_settings, session_auto_name_enabled=True)
    async with served(engine, named) as c:
        gate = Gate()
        ollama.chat_replies = [gate.reply(f"Vault {SECRET} and the shed")]
        sid = (await ok(await c.post("/sessions", json={"profile_id": "default"}), 201))["id"]
        msgs = [
            {"role": "user", "content": f"The vault code is {SECRET}; and the shed?"},
            {"role": "assistant", "content": "Noted; the shed wants a new roof."},
        ]
        await ok(await c.post(f"/sessions/{sid}/messages", json={"messages": msgs}), 201)
        app = c.app  # type: ignore[attr-defined]
        tasks = [t for t in app.state.runtime.jobs.tasks if t.get_name() == "session.auto_name"]
        naming = asyncio.gather(*tasks)
        await race(gate, naming, c)
        name = (await ok(await c.get(f"/sessions/{sid}")))["name"]
        assert name is not None and MARKER in name and SECRET not in name
        assert found_anywhere(db_url) == {}


async def test_an_import_stores_a_forgotten_text_redacted_and_keeps_the_records(
    engine: AsyncEngine, race_settings: Settings, ollama: FakeOllama, db_url: str
) -> None:
    """The importing account's own records (a forget before the import: an account
    whose only rows are records is still empty) and the file's (its `forgotten` record,
    exported first) both apply to what the import stores; the records are restored."""
    async with served(engine, race_settings) as c:
        await forget(c)  # the admin's record (nothing to redact yet)
        await session_saying(c, "default", turns=1)  # said again after it: theirs to say
        records = [json.loads(x) for x in (await c.get("/me/export")).content.splitlines()]
        assert records[1]["type"] == "forgotten"  # first after the header
        [entry] = records[1]["entries"]
        assert set(entry) == {"digest", "bytes", "sum", "at"}
        assert SECRET.lower() not in json.dumps(records[1]).lower()
        r = await c.post("/admin/users", json={"name": "bob", "permissions": []})
        bob_id = (await ok(r, 201))["id"]
        r = await c.post(f"/admin/users/{bob_id}/tokens", json={"name": "test"})
        bob = {"Authorization": f"Bearer {(await ok(r, 201))['token']}"}
        bobs = "Z5-BOBS-9999"
        await ok(await c.post("/memory/forget", json={"text": bobs}, headers=bob))
        for r in records:
            if r["type"] == "message":
                r["content"] = f"{r['content']} {bobs}"
        sid = next(x for x in records if x["type"] == "session")["id"]
        run_sql(db_url, "DELETE FROM sessions WHERE id = %s", sid)  # free its id
        data = b"".join(json.dumps(x).encode() + b"\n" for x in records)
        await ok(await c.post("/me/import", content=data, headers=bob), 201)
        contents = [
            m
            for (m,) in run_sql(
                db_url, "SELECT content FROM session_messages WHERE user_id = %s", bob_id
            )
            or []
        ]
        assert contents and all(SECRET not in m and bobs not in m for m in contents)
        assert any(m.count(MARKER) >= 2 for m in contents)
        assert found_anywhere(db_url) == {}
        again = [
            json.loads(x) for x in (await c.get("/me/export", headers=bob)).content.splitlines()
        ]
        assert again[1]["type"] == "forgotten" and len(again[1]["entries"]) == 2


async def _until_recorded(db_url: str) -> None:
    """Until the forget's record is committed (its batches run on after it)."""
    for _ in range(200):
        rows = run_sql(
            db_url, "SELECT coalesce(sum(jsonb_array_length(entries)), 0) FROM forgotten_texts"
        )
        if rows and rows[0][0]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the forget never recorded the text")


@pytest.mark.parametrize("attempt", RACES)
async def test_the_live_words_pass(
    attempt: int,
    engine: AsyncEngine,
    race_settings: Settings,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pass read a new session's messages, then the forget landed and went through,
    then the pass wrote its chunks (grouped: `index_live_group`): they hold the text
    redacted (`make soak` found one verbatim)."""
    from app.domain.raw_history.live_index import index_live_sessions
    from app.domain.raw_history.live_repository import LiveIndexRepository
    from app.llm.factory import build_gateway

    read = LiveIndexRepository.unindexed
    forgot: list[asyncio.Task[None]] = []

    async def unindexed(self: LiveIndexRepository, claims: Any, limit: int) -> Any:
        rows = await read(self, claims, limit)
        if not forgot and any(SECRET in (r.content or "") for r in rows):
            forgot.append(asyncio.create_task(forget(c)))
            await _until_recorded(db_url)
            # the forget's batches run now: through, when nothing of this pass holds
            # them (a session indexed for the first time: its state row is this pass's,
            # not yet committed, so the forget's lock finds none to wait for)
            await asyncio.wait(forgot, timeout=5)
        return rows

    async with served(engine, race_settings) as c:
        await session_saying(c, "chat", turns=2)
        monkeypatch.setattr(LiveIndexRepository, "unindexed", unindexed)
        llm = build_gateway(race_settings)
        try:
            await index_live_sessions(session_factory(engine), llm, race_settings, embed=False)
        finally:
            await llm.aclose()
        assert forgot, "the pass never read the secret"
        await forgot[0]
        assert found_anywhere(db_url) == {}
        assert run_sql(db_url, "SELECT count(*) FROM memory_chunks")[0][0] > 0  # type: ignore[index]
