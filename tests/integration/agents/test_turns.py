"""POST /sessions/{id}/turns against the fake Ollama's scripted streaming replies."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from tests.conftest import ADMIN_TOKEN, new_user
from tests.fakes.chat_script import ScriptedReply
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.served import serve

from .conftest import MODEL, messages, new_session, parse_sse

SSE = {"Accept": "text/event-stream"}
CLIENT_TOOL = {
    "type": "function",
    "function": {
        "name": "run_shell",
        "description": "run a command on the user's machine",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
}


def words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


async def test_json_turn_stores_the_answer_with_thinking(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    sid = await new_session(served)
    ollama.chat_replies.append(
        ScriptedReply("Paris is the capital.", thinking="easy one", prompt_eval_count=321)
    )
    r = await served.post(f"/sessions/{sid}/turns", json={"message": {"content": "capital?"}})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["status"] == "completed" and out["content"] == "Paris is the capital."
    assert out["thinking"] == "easy one" and out["rounds"] == 1
    assert [e["event"] for e in out["events"]] == ["usage", "done"]
    assert out["events"][0]["prompt_eval_count"] == 321
    stored = await messages(served, sid)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "capital?"),
        ("assistant", "Paris is the capital."),
    ]
    assert stored[1]["thinking"] == "easy one" and stored[1]["tool_call_count"] == 0
    assert stored[1]["elapsed_seconds"] is not None
    # the post-turn check recorded the real prompt size as the session's baseline
    s = (await served.get(f"/sessions/{sid}")).json()
    assert s["session_metadata"]["baseline"]["tokens"] == 321
    sent = ollama.requests_for("/api/chat")[-1]
    assert sent["stream"] is True and sent["options"]["num_ctx"] == 4096
    assert {t["function"]["name"] for t in sent["tools"]} >= {"memory_search"}


async def test_two_tool_rounds_force_a_mid_turn_compression(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    """History near the threshold; the first round's long reply (with a tool call) pushes
    the context over it, so the check between the rounds compresses."""
    sid = await new_session(served)
    history = [
        {"role": role, "content": f"{role} {i}: {words(46, f't{i}w')}"}
        for i in range(8)
        for role in ("user", "assistant")
    ]
    r = await served.post(f"/sessions/{sid}/messages", json={"messages": history})
    assert r.status_code == 201, r.text
    search = {"name": "memory_search", "arguments": {"query": "deploy"}}
    ollama.chat_replies += [
        ScriptedReply(words(250, "plan"), tool_calls=[search]),
        "- summary of the old turns\nKEYS: deploy",  # the mid-turn summary call
        ScriptedReply("checking once more", tool_calls=[search]),
        ScriptedReply("Done: deployed.", prompt_eval_count=900),
    ]
    r = await served.post(
        f"/sessions/{sid}/turns", json={"message": {"content": "deploy it"}}, headers=SSE
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(r.text)
    names = [name for name, _ in events]
    assert names[-1] == "done" and events[-1][1]["status"] == "completed"
    assert names.count("tool_call") == 2 and names.count("tool_result") == 2
    compressions = [d for n, d in events if n == "compression"]
    assert [(c["phase"], c["reason"]) for c in compressions][:2] == [
        ("started", "midturn"),
        ("done", "midturn"),
    ]
    # grammar: a round's tokens, its usage, its calls, their results, then the check
    assert names.index("token") < names.index("usage") < names.index("tool_call")
    assert names.index("tool_call") < names.index("tool_result") < names.index("compression")
    assert events[-1][1]["tool_call_count"] == 2 and events[-1][1]["rounds"] == 3
    stored = await messages(served, sid)
    tools = [m for m in stored if m["role"] == "tool"]
    assert len(tools) == 2 and all(m["tool_call_id"].startswith("call_") for m in tools)
    answer = [m for m in stored if m["role"] == "assistant"][-1]
    assert answer["content"] == "Done: deployed." and answer["tool_call_count"] == 2
    ctx = (await served.get(f"/sessions/{sid}/context")).json()["messages"]
    assert ctx[0]["is_summary"]
    # the round after the compression was sent the compressed context
    last = ollama.requests_for("/api/chat")[-1]
    assert "summary of the old turns" in str(last["messages"])


async def test_a_turn_ending_on_max_rounds_still_runs_the_post_turn_check(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    """TURN_MAX_ROUNDS (4 here) ends the turn after a tool round: the last reply's real
    prompt size is still recorded, against the messages that prompt held (the context
    before that reply, not its tool results)."""
    sid = await new_session(served)
    search = {"name": "memory_search", "arguments": {"query": "deploy"}}
    ollama.chat_replies += [
        ScriptedReply(f"round {i}", tool_calls=[search], prompt_eval_count=2000 + i)
        for i in range(4)
    ]
    r = await served.post(f"/sessions/{sid}/turns", json={"message": {"content": "loop"}})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "max_rounds" and r.json()["rounds"] == 4
    ctx = (await served.get(f"/sessions/{sid}/context")).json()["messages"]
    assert [m["role"] for m in ctx] == ["user", *["assistant", "tool"] * 4]
    baseline = (await served.get(f"/sessions/{sid}")).json()["session_metadata"]["baseline"]
    assert baseline["tokens"] == 2003 and baseline["count"] == len(ctx) - 2


async def test_client_tool_round_trip(served: httpx.AsyncClient, ollama: FakeOllama) -> None:
    sid = await new_session(served)
    shell = {"name": "run_shell", "arguments": {"cmd": "ls"}}
    ollama.chat_replies += [
        ScriptedReply("Let me look.", tool_calls=[shell]),
        ScriptedReply("You have two files.", prompt_eval_count=200),
    ]
    body = {"message": {"content": "what is here?"}, "tools": [CLIENT_TOOL]}
    r = await served.post(f"/sessions/{sid}/turns", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["status"] == "requires_action"
    [call] = out["pending"]
    assert call["name"] == "run_shell" and call["arguments"] == {"cmd": "ls"}
    assert any(
        t["function"]["name"] == "run_shell" for t in ollama.requests_for("/api/chat")[-1]["tools"]
    )
    # a result for an id it did not ask for is refused, naming the id it waits for
    bad = {"tool_results": [{"tool_call_id": "call_nope", "content": "x"}], "tools": [CLIENT_TOOL]}
    r = await served.post(f"/sessions/{sid}/turns", json=bad)
    assert r.status_code == 422 and call["id"] in r.json()["detail"]
    good = {"tool_results": [{"tool_call_id": call["id"], "content": "a.txt b.txt"}]}
    r = await served.post(f"/sessions/{sid}/turns", json={**good, "tools": [CLIENT_TOOL]})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed" and r.json()["content"] == "You have two files."
    sent = ollama.requests_for("/api/chat")[-1]["messages"]
    assert sent[-1] == {"role": "tool", "content": "a.txt b.txt", "tool_name": "run_shell"}
    stored = await messages(served, sid)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1]["tool_calls"][0]["id"] == call["id"]
    # nothing waits any more
    r = await served.post(f"/sessions/{sid}/turns", json=good)
    assert r.status_code == 409


async def test_disconnect_mid_stream_saves_what_came_marked_interrupted(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    sid = await new_session(served)
    ollama.chat_replies.append(ScriptedReply(words(200, "slow"), token_delay=0.02))
    got = []
    async with served.stream(
        "POST", f"/sessions/{sid}/turns", json={"message": {"content": "talk"}}, headers=SSE
    ) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.startswith("event: token"):
                got.append(line)
            if len(got) >= 5:
                break  # the client goes away
    for _ in range(100):  # the server notices, cuts the model call, saves
        stored = await messages(served, sid)
        if len(stored) == 2:
            break
        await asyncio.sleep(0.05)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    partial = stored[1]
    assert partial["metadata"]["interrupted"] is True
    assert partial["content"].startswith("slow0 slow1 slow2 slow3 slow4")
    assert len(partial["content"].split()) < 200


async def test_model_error_keeps_the_user_message_and_writes_nothing_half(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    sid = await new_session(served)
    search = {"name": "memory_search", "arguments": {"query": "x"}}
    ollama.chat_replies += [
        ScriptedReply("first round", tool_calls=[search]),
        ScriptedReply(words(50, "lost"), break_after=10),  # dies mid-stream
    ]
    r = await served.post(
        f"/sessions/{sid}/turns", json={"message": {"content": "go"}}, headers=SSE
    )
    assert r.status_code == 200
    events = parse_sse(r.text)
    name, err = events[-1]
    assert name == "error" and err["error"] == "llm_unavailable" and err["status"] == 503
    assert "done" not in [n for n, _ in events]
    stored = await messages(served, sid)
    # the user's message and the complete first round; nothing of the broken one
    assert [m["role"] for m in stored] == ["user", "assistant", "tool"]
    assert not any("lost" in m["content"] for m in stored)
    # the JSON answer names the failure with its status
    ollama.chat_replies.append(ScriptedReply(status=500))
    r = await served.post(f"/sessions/{sid}/turns", json={"message": {"content": "again"}})
    assert r.status_code == 503, r.text
    assert r.json()["error"] == "llm_unavailable"
    assert (await messages(served, sid))[-1]["content"] == "again"


async def test_bad_input_and_another_users_session(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    sid = await new_session(served)
    r = await served.post(f"/sessions/{sid}/turns", json={})
    assert r.status_code == 422 and "message" in r.json()["detail"]
    r = await served.post(f"/sessions/{sid}/turns", json={"message": {"content": "x" * 2_000_001}})
    assert r.status_code in (413, 422)
    bad_tool = {"message": {"content": "hi"}, "tools": [{"type": "function"}]}
    r = await served.post(f"/sessions/{sid}/turns", json=bad_tool)
    assert r.status_code == 422 and "tools[0]" in r.json()["detail"]
    _, bob = await new_user(served, "bob")  # type: ignore[arg-type]
    r = await served.post(
        f"/sessions/{sid}/turns", json={"message": {"content": "hi"}}, headers=bob
    )
    assert r.status_code == 404
    assert ollama.count("/api/chat") == 0
    assert await messages(served, sid) == []


async def test_the_turn_budget_covers_the_pre_turn_compression(
    engine: AsyncEngine, turn_settings: Settings, ollama: FakeOllama
) -> None:
    """TURN_DEADLINE_SECONDS counts from the turn's start: a slow pre-turn summary leaves
    the model call only what is left of it (it used to get the request's budget, then a
    fresh turn budget), and the failure names the turn's setting."""
    from app.asgi import create_app

    settings = dataclasses.replace(turn_settings, turn_deadline_seconds=2.0)
    app = create_app(settings, engine=engine, background_jobs=False)
    async with serve(app) as base:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
            sid = await new_session(client)
            history = [
                {"role": role, "content": f"{role} {i}: {words(60, f't{i}w')}"}
                for i in range(24)
                for role in ("user", "assistant")
            ]
            r = await client.post(f"/sessions/{sid}/messages", json={"messages": history})
            assert r.status_code == 201, r.text
            ollama.slow_seconds = 1.2  # under the tests' OLLAMA_TIMEOUT (2 s)
            ollama.fail("slow", paths={"/api/chat"})  # the summary 1.2 s, the model 1.2 s
            started = time.monotonic()
            r = await client.post(f"/sessions/{sid}/turns", json={"message": {"content": "go"}})
            elapsed = time.monotonic() - started
            ollama.recover()
            context = (await client.get(f"/sessions/{sid}/context")).json()["messages"]
    assert r.status_code == 503, r.text
    assert r.json()["error"] == "llm_unavailable"
    assert "TURN_DEADLINE_SECONDS" in r.json()["detail"], r.text
    assert elapsed < 2.0 + 1.0, elapsed  # not 1.2 s of summary plus a fresh 2 s budget
    assert len(context) < len(history)  # the pre-turn compression is kept


async def test_memory_forget_by_text_in_a_turn_leaves_no_trace(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    """The forget runs before the round's assistant message (whose tool call holds the
    text) is stored: that message is redacted too."""
    sid = await new_session(served)
    said = [{"role": "user", "content": "my passport is Z7-QQ-88"}]
    assert (await served.post(f"/sessions/{sid}/messages", json={"messages": said})).is_success
    forget = {"name": "memory", "arguments": {"action": "forget", "text": "z7-qq-88"}}
    ollama.chat_replies += [
        ScriptedReply("Forgetting Z7-QQ-88.", tool_calls=[forget]),
        ScriptedReply("Done: it is forgotten."),
    ]
    r = await served.post(
        f"/sessions/{sid}/turns", json={"message": {"content": "forget Z7-QQ-88 please"}}
    )
    assert r.status_code == 200, r.text
    stored = await messages(served, sid)
    assert "z7-qq-88" not in str(stored).lower()
    assert [m["content"] for m in stored[:3]] == [
        "my passport is [forgotten]",
        "forget [forgotten] please",
        "Forgetting [forgotten].",
    ]
    assert stored[2]["tool_calls"][0]["function"]["arguments"]["text"] == "[forgotten]"
    assert "Forgot that text everywhere" in stored[3]["content"]


async def test_a_context_the_window_cannot_take_is_a_422_never_a_reply(
    engine: AsyncEngine, turn_settings: Settings, tmp_path: Path, ollama: FakeOllama
) -> None:
    """check_context_size's message goes to the caller as 422 context_too_large (its
    docstring, issue 43): no model call, no assistant message made of it. The context: a
    system prompt of ~12,000 characters in a 4,096-token window, which no compression can
    shrink (and which is priced whole, not cut to a stored message's view budget)."""
    from app.asgi import create_app

    profiles = tmp_path / "big.json"
    big = {"context_window": 4096, "model": MODEL, "system_prompt": words(2000, "r")}
    profiles.write_text(json.dumps({"big": big}))
    s = dataclasses.replace(turn_settings, profiles_file=str(profiles))
    app = create_app(s, engine=engine, background_jobs=False)
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with serve(app) as base, httpx.AsyncClient(base_url=base, headers=headers) as client:
        sid = await new_session(client, "big")
        r = await client.post(f"/sessions/{sid}/turns", json={"message": {"content": "hi"}})
        assert r.status_code == 422, r.text
        body = r.json()
        assert body["error"] == "context_too_large" and body["tokens"] > body["limit"]
        assert "/compact" in body["detail"]
        assert ollama.requests_for("/api/chat") == []
        assert all(m["role"] != "assistant" for m in await messages(client, sid))
