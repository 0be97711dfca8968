"""Extraction never drops a session silently (issue 45): for each way a model's reply
can be wrong, on a real database and the fake Ollama — the reply is asked again, and
after the last attempt the session is recorded as failed with its reason, counted in
`/metrics`, listed on the console's system page and picked up again by a later pass;
nothing of an unusable reply is stored.

The metrics are the process's registry (every test of the run adds to it): compared
before and after, never as absolute values."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from prometheus_client import REGISTRY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.domain.facts.extraction import get_extraction_state, run_extraction_pass
from app.domain.kernel.runtime import Runtime
from app.llm.factory import build_gateway
from app.llm.gateway import LLMGateway
from tests.conftest import ADMIN_TOKEN, new_user
from tests.fakes.ollama_server import FakeOllama
from tests.integration.console.support import sign_in
from tests.integration.facts.conftest import sql
from tests.integration.facts.test_extraction import (
    CONVERSATION,
    facts_json,
    is_extraction,
    scripted,
    stale_session,
)
from tests.integration.system.test_metrics import sample

GOOD = facts_json(
    ("location", "home_city", "Porto", "user_explicit"),
    ("preferences", "preferred_language", "Rust", "conversation"),
)
PLAIN = [{"role": "user", "content": "What is a monad, in two lines?"}]  # states no fact


def failures(reason: str) -> float:
    return (
        REGISTRY.get_sample_value("navi_memory_extraction_failures_total", {"reason": reason}) or 0
    )


def replies(outcome: str) -> float:
    return (
        REGISTRY.get_sample_value("navi_memory_extraction_replies_total", {"outcome": outcome}) or 0
    )


async def facts_of(client: AsyncTestClient, headers: dict[str, str]) -> dict[str, str]:
    items = (await client.get("/memory/facts", headers=headers)).json()["items"]
    return {f["key"]: f["value"] for f in items}


def extraction_calls(ollama: FakeOllama) -> list[dict[str, Any]]:
    return [b for b in ollama.requests_for("/api/chat") if is_extraction(b)]


async def system_page(client: AsyncTestClient) -> str:
    """The console's system page, as the admin (the client keeps its bearer token)."""
    bearer = client.headers["Authorization"]
    await sign_in(client, ADMIN_TOKEN)
    r = await client.get("/console/admin/system")
    client.headers["Authorization"] = bearer
    assert r.status_code == 200, r.text
    return r.text.split('id="extraction-list"', 1)[1].split("</table>", 1)[0]


async def test_a_reply_without_json_is_asked_again_recorded_counted_shown_and_retried(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
) -> None:
    alice_id, alice = await new_user(client, "alice")
    sid = await stale_session(client, db_url, alice, CONVERSATION)
    scraped = (await client.get("/metrics")).text
    ollama.chat_replies.extend([scripted(["Sure, I will remember that.", "- city: Porto"])] * 2)
    before = failures("not_json")

    result = await run_extraction_pass(Runtime.of(settings, factory, llm))
    assert (result.extracted, result.failed) == (0, 1)
    calls = extraction_calls(ollama)
    assert len(calls) == 2
    # the second call shows the model its answer and what was wrong with it
    assert calls[1]["messages"][2] == {
        "role": "assistant",
        "content": "Sure, I will remember that.",
    }
    assert "held no JSON array" in calls[1]["messages"][3]["content"]
    state = await get_extraction_state(factory, sid, alice_id)
    assert state.attempts == 1 and state.extracted_at is None
    assert state.last_error.startswith("not_json: ReplyFormatError: 2 unusable replies")
    assert "city: Porto" in state.last_error
    assert failures("not_json") == before + 1
    metrics = (await client.get("/metrics")).text
    assert sample(metrics, "navi_memory_extraction_failures_total", reason="not_json") == (
        sample(scraped, "navi_memory_extraction_failures_total", reason="not_json") + 1
    )
    page = await system_page(client)
    assert sid in page and alice_id in page and "failing: tried again by the next pass" in page
    assert "not_json: ReplyFormatError" in page
    assert await facts_of(client, alice) == {}

    # the next pass picks it up again; this time the model answers
    ollama.chat_replies.extend([scripted([GOOD])] * 2)
    result = await run_extraction_pass(Runtime.of(settings, factory, llm))
    assert (result.extracted, result.failed, result.facts_saved) == (1, 0, 2)
    assert await facts_of(client, alice) == {"home_city": "Porto", "preferred_language": "Rust"}
    state = await get_extraction_state(factory, sid, alice_id)
    assert state.attempts == 0 and state.last_error is None
    assert sid not in await system_page(client)


async def test_json_with_prose_around_it_is_read_at_once(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
) -> None:
    _, alice = await new_user(client, "alice")
    await stale_session(client, db_url, alice, CONVERSATION)
    reply = f"Sure! Here is what I found [2 facts]:\n{GOOD}\nLet me know if you need more."
    ollama.chat_replies.extend([scripted([reply])] * 2)
    before = replies("ok")
    result = await run_extraction_pass(Runtime.of(settings, factory, llm))
    assert (result.extracted, result.facts_saved) == (1, 2)
    assert len(extraction_calls(ollama)) == 1
    assert replies("ok") == before + 1
    assert await facts_of(client, alice) == {"home_city": "Porto", "preferred_language": "Rust"}


async def test_a_reply_cut_off_mid_object_stores_nothing_and_is_asked_again(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
) -> None:
    """The complete first object of a cut-off array is not kept (the old parser stored
    it and asked nothing more): all of a reply's facts, or none."""
    alice_id, alice = await new_user(client, "alice")
    sid = await stale_session(client, db_url, alice, CONVERSATION)
    cut = GOOD[: GOOD.index('"key": "preferred_language"') + 20]
    ollama.chat_replies.extend([scripted([cut, cut])] * 2)
    before = failures("cut_off")
    result = await run_extraction_pass(Runtime.of(settings, factory, llm))
    assert (result.extracted, result.failed) == (0, 1)
    assert await facts_of(client, alice) == {}
    assert sql(db_url, "SELECT count(*) FROM fact_versions") == [(0,)]
    state = await get_extraction_state(factory, sid, alice_id)
    assert state.attempts == 1 and state.last_error.startswith("cut_off: ")
    assert failures("cut_off") == before + 1
    assert "cut off" in extraction_calls(ollama)[1]["messages"][3]["content"]

    # cut off once, whole the second time: every fact of the whole reply
    ollama.chat_replies.extend([scripted([cut, GOOD])] * 2)
    result = await run_extraction_pass(Runtime.of(settings, factory, llm))
    assert (result.extracted, result.facts_saved) == (1, 2)
    assert await facts_of(client, alice) == {"home_city": "Porto", "preferred_language": "Rust"}


async def test_numbers_and_lists_as_values_are_stored_as_text(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
) -> None:
    _, alice = await new_user(client, "alice")
    await stale_session(client, db_url, alice, CONVERSATION)
    reply = json.dumps(
        [
            {"category": "personal", "key": "age", "value": 41},
            {"category": "skills", "key": "languages", "value": ["Rust", "Go"]},
        ]
    )
    ollama.chat_replies.extend([scripted([reply])] * 2)
    result = await run_extraction_pass(Runtime.of(settings, factory, llm))
    assert (result.extracted, result.facts_saved) == (1, 2)
    assert len(extraction_calls(ollama)) == 1
    assert await facts_of(client, alice) == {"age": "41", "languages": "Rust, Go"}


BAD_ITEMS = {
    "a value that is an object": {"category": "personal", "key": "pets", "value": {"cat": 1}},
    "a missing key": {"category": "personal", "value": "two cats"},
    "an item that is not an object": "the user has two cats",
}


@pytest.mark.parametrize("bad", BAD_ITEMS.values(), ids=BAD_ITEMS.keys())
async def test_a_reply_with_an_item_of_the_wrong_type_is_taken_whole_or_not_at_all(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
    bad: Any,
) -> None:
    """Two good facts and one that cannot be stored: none is stored (the old parser
    stored the two and dropped the third with a log line), the reply is asked again."""
    alice_id, alice = await new_user(client, "alice")
    sid = await stale_session(client, db_url, alice, CONVERSATION)
    mixed = json.dumps([*json.loads(GOOD), bad])
    ollama.chat_replies.extend([scripted([mixed, mixed])] * 2)
    before = failures("invalid_item")
    result = await run_extraction_pass(Runtime.of(settings, factory, llm))
    assert (result.extracted, result.failed) == (0, 1)
    assert await facts_of(client, alice) == {}
    state = await get_extraction_state(factory, sid, alice_id)
    assert state.last_error.startswith("invalid_item: ") and "item 2" in state.last_error
    assert failures("invalid_item") == before + 1
    note = extraction_calls(ollama)[1]["messages"][3]["content"]
    assert "cannot be stored (item 2: " in note

    # a corrected answer on the second call: all of it
    ollama.chat_replies.extend([scripted([mixed, GOOD])] * 2)
    assert (await run_extraction_pass(Runtime.of(settings, factory, llm))).facts_saved == 2


@pytest.mark.parametrize("reply", ['{"facts": "none"}', '{"facts": {"home_city": "Porto"}}'])
async def test_facts_that_are_not_a_list_fail_the_session(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
    reply: str,
) -> None:
    alice_id, alice = await new_user(client, "alice")
    sid = await stale_session(client, db_url, alice, CONVERSATION)
    ollama.chat_replies.extend([scripted([reply, reply])] * 2)
    result = await run_extraction_pass(Runtime.of(settings, factory, llm))
    assert (result.extracted, result.failed) == (0, 1)
    state = await get_extraction_state(factory, sid, alice_id)
    assert state.attempts == 1 and state.last_error.startswith("not_json: ")
    assert await facts_of(client, alice) == {}


async def test_an_empty_list_where_the_user_states_a_fact_is_asked_again(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
) -> None:
    """The transcript says "I moved to Porto": an empty list is asked again with a note
    (the old code accepted it at once); the second answer has the facts."""
    _, alice = await new_user(client, "alice")
    await stale_session(client, db_url, alice, CONVERSATION)
    ollama.chat_replies.extend([scripted(["[]", GOOD])] * 2)
    before = replies("empty_retried")
    result = await run_extraction_pass(Runtime.of(settings, factory, llm))
    assert (result.extracted, result.facts_saved) == (1, 2)
    calls = extraction_calls(ollama)
    assert len(calls) == 2 and "'i moved to'" in calls[1]["messages"][3]["content"]
    assert replies("empty_retried") == before + 1


async def test_an_empty_list_twice_is_accepted_but_counted_and_noted(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
) -> None:
    alice_id, alice = await new_user(client, "alice")
    sid = await stale_session(client, db_url, alice, CONVERSATION)
    plain = await stale_session(client, db_url, alice, PLAIN)
    ollama.chat_replies.extend([scripted(["[]"] * 3)] * 3)
    before = replies("empty_accepted"), replies("empty")
    result = await run_extraction_pass(Runtime.of(settings, factory, llm))
    assert (result.extracted, result.failed, result.facts_saved) == (2, 0, 0)
    assert len(extraction_calls(ollama)) == 3  # twice for the first, once for the plain one
    assert (replies("empty_accepted"), replies("empty")) == (before[0] + 1, before[1] + 1)
    state = await get_extraction_state(factory, sid, alice_id)
    assert state.extracted_at is not None and state.attempts == 0
    assert state.last_error.startswith("empty_accepted: no fact although the user said")
    quiet = await get_extraction_state(factory, plain, alice_id)
    assert quiet.extracted_at is not None and quiet.last_error is None
    page = await system_page(client)
    assert sid in page and "extracted, with a note" in page and plain not in page


async def test_a_model_call_that_times_out_counts_against_the_session(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    fast_settings: Settings,
    settings: Settings,
) -> None:
    """A reply that does not come within OLLAMA_TIMEOUT: counted (`timeout`) against the
    session, which the old code never did (an unreachable model does not count: a
    session whose reply always times out was tried at the head of every pass, forever)."""
    alice_id, alice = await new_user(client, "alice")
    sid = await stale_session(client, db_url, alice, CONVERSATION)
    capped = dataclasses.replace(settings, extraction_max_attempts=2)
    gateway = build_gateway(dataclasses.replace(fast_settings, ollama_timeout=0.3))
    ollama.slow_seconds = 3
    before = failures("timeout"), failures("unavailable")
    try:
        runtime = Runtime.of(capped, factory, gateway)
        for attempt in (1, 2):
            ollama.fail("slow", paths={"/api/chat"})
            result = await run_extraction_pass(runtime)
            assert (result.extracted, result.failed, result.stopped_early) == (0, 1, True)
            state = await get_extraction_state(factory, sid, alice_id)
            assert state.attempts == attempt and state.last_error.startswith("timeout: ")
        assert failures("timeout") == before[0] + 2
        # parked after the second: the session waits for its next message
        assert sql(db_url, "SELECT memory_pending FROM sessions WHERE id = %s", sid) == [(False,)]
        assert "parked: waits for its next message" in await system_page(client)

        # an unreachable model is not the session's fault: not counted
        await client.post(
            f"/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "I use helix now"}]},
            headers=alice,
        )
        sql(
            db_url, "UPDATE sessions SET last_active = now() - interval '1 hour' WHERE id = %s", sid
        )
        ollama.fail("refuse")
        result = await run_extraction_pass(runtime)
        assert (result.failed, result.stopped_early) == (1, True)
        state = await get_extraction_state(factory, sid, alice_id)
        assert state.attempts == 0 and state.last_error.startswith("unavailable: ")
        assert failures("unavailable") == before[1] + 1
    finally:
        ollama.recover()
        await gateway.aclose()
    assert await facts_of(client, alice) == {}


async def test_a_reply_body_broken_off_mid_json_counts_against_the_session(
    client: AsyncTestClient,
    db_url: str,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
) -> None:
    """The server's answer itself ends mid-JSON (HTTP 200, a cut body; the gateway
    retries it, then gives up): `model_error`, counted against the session (the old
    code took it for an unreachable model), nothing stored, the pass ended."""
    alice_id, alice = await new_user(client, "alice")
    sid = await stale_session(client, db_url, alice, CONVERSATION)
    ollama.fail("malformed", paths={"/api/chat"})
    before = failures("model_error")
    result = await run_extraction_pass(Runtime.of(settings, factory, llm))
    assert (result.extracted, result.failed, result.stopped_early) == (0, 1, True)
    state = await get_extraction_state(factory, sid, alice_id)
    assert state.attempts == 1 and state.last_error.startswith("model_error: ")
    assert failures("model_error") == before + 1
    ollama.recover()
    assert await facts_of(client, alice) == {}
