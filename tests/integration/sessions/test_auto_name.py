"""Sessions named after their first exchange: a title from the profile's model in the
background, the first user words when no model answers, never over a user's name."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from app.config import Settings
from app.domain.sessions.naming import name_session
from tests.conftest import ADMIN_TOKEN, new_user, run_sql
from tests.fakes.ollama_server import FakeOllama

EXCHANGE = [
    {"role": "user", "content": "How   do I move\n the garden shed to the north corner?"},
    {"role": "assistant", "content": "Empty it, then lift it on rollers."},
]


@pytest.fixture
async def naming(make_client, settings: Settings) -> AsyncIterator[AsyncTestClient[Any]]:  # type: ignore[no-untyped-def]
    async with make_client(settings, session_auto_name_enabled=True, llm_max_attempts=1) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c


def in_app(c: AsyncTestClient[Any], fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """`fn(*args)` on the app's event loop (the client's portal thread)."""
    return asyncio.to_thread(c.blocking_portal.call, fn, *args)


def naming_tasks(app: Any) -> list[asyncio.Task[Any]]:
    """The naming tasks the requests spawned (not the app's long-lived ones, such as the
    replica watch when a replica is configured: those never end)."""
    return [t for t in app.state.runtime.jobs.tasks if t.get_name() == "session.auto_name"]


async def settle(c: AsyncTestClient[Any]) -> None:
    """The background tasks the requests spawned, awaited (on the app's loop)."""

    async def wait() -> None:
        await asyncio.gather(*naming_tasks(c.app), return_exceptions=True)

    await in_app(c, wait)


async def new_session(c: AsyncTestClient[Any], **body: Any) -> str:
    r = await c.post("/sessions", json={"profile_id": "default", **body})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def name_of(c: AsyncTestClient[Any], sid: str) -> str | None:
    return (await c.get(f"/sessions/{sid}")).json()["name"]  # type: ignore[no-any-return]


async def test_first_exchange_names_the_session_with_the_models_title(
    naming: AsyncTestClient[Any], ollama: FakeOllama
) -> None:
    sid = await new_session(naming)
    r = await naming.post(f"/sessions/{sid}/messages", json={"messages": EXCHANGE[:1]})
    assert r.status_code == 201
    await settle(naming)
    assert await name_of(naming, sid) is None  # a user message alone: no exchange yet
    ollama.chat_replies.append('"Moving the garden shed."\nI chose this because…')
    r = await naming.post(f"/sessions/{sid}/messages", json={"messages": EXCHANGE[1:]})
    assert r.status_code == 201
    await settle(naming)
    assert await name_of(naming, sid) == "Moving the garden shed"
    sent = ollama.requests_for("/api/chat")[-1]
    assert "garden shed" in sent["messages"][-1]["content"]


async def test_no_model_answer_falls_back_to_the_first_user_words(
    naming: AsyncTestClient[Any], ollama: FakeOllama
) -> None:
    sid = await new_session(naming)
    ollama.fail("http500")
    r = await naming.post(f"/sessions/{sid}/messages", json={"messages": EXCHANGE})
    assert r.status_code == 201
    await settle(naming)
    assert await name_of(naming, sid) == "How do I move the garden"


async def test_an_empty_model_reply_falls_back_too(
    naming: AsyncTestClient[Any], ollama: FakeOllama
) -> None:
    sid = await new_session(naming)
    ollama.chat_replies.append('  ""  ')
    await naming.post(f"/sessions/{sid}/messages", json={"messages": EXCHANGE})
    await settle(naming)
    assert await name_of(naming, sid) == "How do I move the garden"


async def test_a_name_the_user_set_is_never_replaced(
    naming: AsyncTestClient[Any], ollama: FakeOllama
) -> None:
    sid = await new_session(naming, name="Shed")
    ollama.chat_replies.append("Other title")
    await naming.post(f"/sessions/{sid}/messages", json={"messages": EXCHANGE})
    await settle(naming)
    assert await name_of(naming, sid) == "Shed"
    assert ollama.requests_for("/api/chat") == []  # not even asked


async def test_a_name_set_while_the_title_is_on_its_way_is_kept(
    naming: AsyncTestClient[Any], ollama: FakeOllama, db_url: str
) -> None:
    sid = await new_session(naming)

    def title(body: dict[str, Any]) -> str:
        # the user names the session while the model writes its title
        run_sql(db_url, "UPDATE sessions SET name = 'Mine' WHERE id = %s", uuid.UUID(sid))
        return "Model title"

    ollama.chat_replies.append(title)
    await naming.post(f"/sessions/{sid}/messages", json={"messages": EXCHANGE})
    await settle(naming)
    assert len(ollama.requests_for("/api/chat")) == 1  # the title was asked for …
    assert await name_of(naming, sid) == "Mine"  # … and did not replace the user's name
    owner = (await naming.get(f"/sessions/{sid}")).json()["user_id"]
    assert (
        await in_app(naming, name_session, naming.app.state.runtime, owner, uuid.UUID(sid)) is None
    )


async def test_switched_off_by_the_setting(
    make_client,  # type: ignore[no-untyped-def]
    settings: Settings,
    ollama: FakeOllama,
) -> None:
    async with make_client(settings, session_auto_name_enabled=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = await new_session(c)
        await c.post(f"/sessions/{sid}/messages", json={"messages": EXCHANGE})
        await settle(c)
        assert await name_of(c, sid) is None


async def test_a_model_past_the_deadline_falls_back(
    make_client,  # type: ignore[no-untyped-def]
    settings: Settings,
    ollama: FakeOllama,
) -> None:
    overrides = {"session_auto_name_enabled": True, "session_auto_name_timeout_seconds": 1.0}
    async with make_client(settings, **overrides) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = await new_session(c)
        ollama.slow_seconds = 3.0
        ollama.fail("slow", paths=["/api/chat"])
        ollama.chat_replies.append("Too late")
        started = time.monotonic()
        await c.post(f"/sessions/{sid}/messages", json={"messages": EXCHANGE})
        await settle(c)
        assert time.monotonic() - started < 2.9
        assert await name_of(c, sid) == "How do I move the garden"


def title_calls(ollama: FakeOllama) -> int:
    """The chat calls the fake saw whose system prompt is the naming prompt."""
    return sum(
        1
        for body in ollama.requests_for("/api/chat")
        if body["messages"][0]["role"] == "system"
        and body["messages"][0]["content"].startswith("Write a title of 2 to 6 words")
    )


async def test_several_assistant_appends_while_unnamed_ask_the_model_once(
    naming: AsyncTestClient[Any], ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fast tool loop in a new session: each assistant append comes while the first
    title is still on its way (a slow model); the naming lease lets one of them ask."""
    sid = await new_session(naming)
    r = await naming.post(f"/sessions/{sid}/messages", json={"messages": EXCHANGE[:1]})
    assert r.status_code == 201
    monkeypatch.setattr(ollama, "slow_seconds", 1.0)
    ollama.fail("slow", times=1, paths=["/api/chat"])
    ollama.chat_replies += ["Moving the shed", "Second title", "Third title", "Fourth title"]
    for i in range(4):
        step = {"role": "assistant", "content": f"step {i}: {EXCHANGE[1]['content']}"}
        r = await naming.post(f"/sessions/{sid}/messages", json={"messages": [step]})
        assert r.status_code == 201, r.text
    await settle(naming)
    assert title_calls(ollama) == 1
    assert await name_of(naming, sid) == "Moving the shed"
    meta = (await naming.get(f"/sessions/{sid}")).json()["session_metadata"]
    assert "auto_naming" not in meta  # the lease is dropped once the name is set


# A first exchange that compaction moves to the archive at once (a 9 KB answer out of the
# LLM context, SESSION_MAX_HISTORY_BYTES=8000), then a second one that stays hot.
ARCHIVED_FIRST = [
    {"role": "user", "content": "Where should the old shed go now?", "is_context": False},
    {"role": "assistant", "content": "Behind the hedge. " * 500, "is_context": False},
    {"role": "user", "content": "Second question about the roof tiles"},
    {"role": "assistant", "content": "Slate ones."},
]


@pytest.fixture
async def compacting(make_client, settings: Settings) -> AsyncIterator[AsyncTestClient[Any]]:  # type: ignore[no-untyped-def]
    overrides = {"session_max_history_bytes": 8000, "llm_max_attempts": 1}
    async with make_client(settings, session_auto_name_enabled=True, **overrides) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c


def archived_seqs(db_url: str, sid: str) -> list[int]:
    rows = run_sql(
        db_url,
        "SELECT sequence_number FROM session_messages_archive WHERE session_id = %s"
        " ORDER BY sequence_number",
        uuid.UUID(sid),
    )
    return [r[0] for r in rows or []]


async def test_a_first_exchange_already_archived_names_the_session(
    compacting: AsyncTestClient[Any], ollama: FakeOllama, db_url: str
) -> None:
    sid = await new_session(compacting)
    # the fallback: the first user words, whichever table holds them
    ollama.fail("http500", times=1, paths=["/api/chat"])
    r = await compacting.post(f"/sessions/{sid}/messages", json={"messages": ARCHIVED_FIRST})
    assert r.status_code == 201, r.text
    assert archived_seqs(db_url, sid) == [0, 1]
    await settle(compacting)
    assert await name_of(compacting, sid) == "Where should the old shed go"


async def test_an_imported_session_is_named_after_its_first_exchange(
    compacting: AsyncTestClient[Any], ollama: FakeOllama, db_url: str
) -> None:
    _, alice = await new_user(compacting, "alice-names")
    r = await compacting.post("/sessions", json={"profile_id": "default"}, headers=alice)
    sid = r.json()["id"]
    ollama.fail("http500", times=1, paths=["/api/chat"])
    r = await compacting.post(
        f"/sessions/{sid}/messages", json={"messages": ARCHIVED_FIRST}, headers=alice
    )
    assert r.status_code == 201, r.text
    await settle(compacting)
    run_sql(db_url, "UPDATE sessions SET name = NULL WHERE id = %s", uuid.UUID(sid))
    body = (await compacting.get("/me/export", headers=alice)).content
    assert b'"archived_message"' in body  # the first exchange travels archived
    r = await compacting.delete(f"/sessions/{sid}", headers=alice)  # its id moves to bob
    assert r.status_code == 204, r.text

    _, bob = await new_user(compacting, "bob-names")
    ollama.chat_replies.append("Where the shed goes")
    r = await compacting.post("/me/import", content=body, headers=bob)
    assert r.status_code == 201, r.text
    await settle(compacting)
    (session,) = (await compacting.get("/sessions", headers=bob)).json()["items"]
    assert session["name"] == "Where the shed goes"
    sent = ollama.requests_for("/api/chat")[-1]["messages"][-1]["content"]
    assert "old shed" in sent and "roof tiles" not in sent  # the archived first exchange


async def test_a_chat_imported_session_keeps_its_title(
    naming: AsyncTestClient[Any], ollama: FakeOllama
) -> None:
    """Issue 47: a chat import names each session by its title (else its first user
    words) and auto-naming never renames it, not even after a new exchange."""
    from tests.chat_exports import tea

    _, h = await new_user(naming, "importer-names")
    untitled = tea("untitled")
    untitled["title"] = None
    r = await naming.post("/me/import/chats", content=json.dumps([tea("t1"), untitled]), headers=h)
    assert r.status_code == 201, r.text
    await settle(naming)
    items = (await naming.get("/sessions", headers=h)).json()["items"]
    names = sorted(s["name"] for s in items)
    assert names == ["How long to steep this sencha?", "Tea"]
    ollama.chat_replies.extend(["Model title", "Model title"])
    for s in items:
        r = await naming.post(
            f"/sessions/{s['id']}/messages", json={"messages": EXCHANGE}, headers=h
        )
        assert r.status_code == 201, r.text
    await settle(naming)
    assert (
        sorted(s["name"] for s in (await naming.get("/sessions", headers=h)).json()["items"])
        == names
    )
    assert title_calls(ollama) == 0  # the model is not even asked
