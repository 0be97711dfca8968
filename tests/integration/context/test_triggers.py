"""The HTTP triggers: prepare (pre/mid-turn), usage (post-turn), compact; errors."""

from __future__ import annotations

import base64
import random

from litestar.testing import AsyncTestClient

from tests.conftest import new_user
from tests.fakes.ollama_server import FakeOllama
from tests.unit.compression.images import png

from .conftest import LIMIT, MODEL, WINDOW, append, context, fill, new_session, real_tokens, turn


async def test_long_session_stays_under_the_window(
    cclient: AsyncTestClient, ollama: FakeOllama
) -> None:
    """An agent loop of 200 turns: prepare → 'LLM' → append with usage.

    The prompt never passes the window minus the reply reserve (3,072 of 4,096 tokens).
    """
    rng = random.Random(7)
    sid = await new_session(cclient)
    compressions = preturn = postturn = 0
    biggest = 0
    last_compressed = True
    i = 0
    # 200 turns, then on until one ends without a compression: a compression drops the
    # session's baseline (the next honest count sets it again), and whether the last of
    # the 200 compresses depends on the recall the live index makes (its timing)
    while i < 200 or last_compressed:
        assert i < 220, "twenty turns past the 200th, each one compressing"
        i += 1
        last_compressed = False
        user = {"role": "user", "content": f"q{i} " + "lorem ipsum " * rng.randint(5, 60)}
        r = await cclient.post(f"/sessions/{sid}/prepare", json={"message": user})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["window"] == WINDOW and out["tokens"] <= WINDOW
        for ev in out["events"]:
            if ev["type"] == "ContextCompressed":
                compressions += 1
                preturn += 1
        sent = [{"role": m["role"], "content": m["content"]} for m in out["context"]] + [user]
        real = real_tokens(sent)
        biggest = max(biggest, real)
        assert real <= LIMIT, f"turn {i}: the prompt ({real} tokens) is over {LIMIT}"
        reply = {"role": "assistant", "content": f"a{i} " + "dolor sit amet " * rng.randint(5, 50)}
        res = await append(
            cclient, sid, [user, reply], usage={"model": MODEL, "prompt_eval_count": real}
        )
        for ev in res["events"]:
            if ev["type"] == "ContextCompressed":
                compressions += 1
                postturn += 1
                last_compressed = True
    assert compressions >= 10 and biggest > 0.7 * WINDOW
    assert preturn + postturn == compressions
    ctx = await context(cclient, sid)
    assert sum(m["is_summary"] for m in ctx) == 1 and ctx[0]["is_summary"]
    s = (await cclient.get(f"/sessions/{sid}")).json()
    assert s["session_metadata"]["baseline"]["model"] == MODEL
    assert s["context_token_count"] < WINDOW


async def test_prepare_below_threshold_returns_the_view(cclient: AsyncTestClient) -> None:
    sid = await new_session(cclient)
    big = "x" * 20_000  # over the per-message view budget (window // 6 tokens)
    await append(
        cclient,
        sid,
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "cat"}}]},
            {"role": "tool", "content": big, "name": "cat"},
            {"role": "system", "content": "debug", "metadata": {"source": "debug"}},
        ],
    )
    r = await cclient.post(f"/sessions/{sid}/prepare", json={"message": {"content": "next"}})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["events"] == [] and [m["role"] for m in out["context"]] == [
        "user",
        "assistant",
        "tool",
    ]
    tool = out["context"][2]
    assert len(tool["content"]) < len(big) and "chars omitted" in tool["content"]
    assert tool["metadata"]["view_truncated_from"] == len(big)
    assert out["tokens"] < WINDOW * 0.9
    # the stored message is untouched
    ctx = await context(cclient, sid)
    assert ctx[2]["content"] == big


async def test_prepare_compresses_when_over_the_threshold(cclient: AsyncTestClient) -> None:
    sid = await new_session(cclient)
    await fill(cclient, sid, 14, size=600)  # ~ 14 × 1200 chars ≈ 9300 tokens at chars/1.8
    r = await cclient.post(f"/sessions/{sid}/prepare", json={"message": {"content": "go on"}})
    assert r.status_code == 200, r.text
    out = r.json()
    started, done = out["events"]
    assert started["type"] == "CompressionStarted" and started["context_tokens"] >= 0.9 * WINDOW
    assert done["type"] == "ContextCompressed" and done["reason"] == "preturn"
    assert done["context_tokens"] <= 0.65 * WINDOW
    assert out["context"][0]["is_summary"] and out["tokens"] < 0.9 * WINDOW
    # the incoming message is not stored, nor returned
    assert all(m["content"] != "go on" for m in out["context"])


async def test_mid_turn_keeps_the_request_and_newest_messages(cclient: AsyncTestClient) -> None:
    sid = await new_session(cclient)
    await fill(cclient, sid, 1, size=60)
    loop = [{"role": "user", "content": "build the project"}]
    for i in range(40):
        loop.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "sh", "arguments": {"i": i}}}],
            }
        )
        loop.append({"role": "tool", "content": f"output {i} " + "y" * 300, "name": "sh"})
    await append(cclient, sid, loop)
    r = await cclient.post(f"/sessions/{sid}/prepare", json={"mid_turn": True})
    assert r.status_code == 200, r.text
    out = r.json()
    done = out["events"][-1]
    assert done["type"] == "ContextCompressed" and done["reason"] == "midturn"
    ctx = out["context"]
    assert ctx[0]["is_summary"] and ctx[1]["content"] == "build the project"
    assert ctx[-1]["content"].startswith("output 39")
    assert 2 <= len(ctx) - 2 <= 12


async def test_summarizer_failing_twice_hard_truncates(
    cclient: AsyncTestClient, ollama: FakeOllama
) -> None:
    sid = await new_session(cclient)
    await fill(cclient, sid, 14, size=600)
    ollama.fail("http500", times=2, paths={"/api/chat"})
    r = await cclient.post(f"/sessions/{sid}/prepare", json={"message": {"content": "next"}})
    assert r.status_code == 200, r.text
    assert ollama.count("/api/chat") == 2  # one retry (the wider plan), then no LLM at all
    done = r.json()["events"][-1]
    assert done["method"] == "truncate" and done["summary"] == ""
    assert done["context_tokens"] <= 0.5 * WINDOW
    ctx = await context(cclient, sid)
    assert not any(m["is_summary"] for m in ctx)
    assert ctx[-1]["content"].startswith("answer 13")
    markers = [
        m
        for m in (await cclient.get(f"/sessions/{sid}/messages?limit=200")).json()["messages"]
        if m["is_compression"]
    ]
    assert markers[0]["metadata"]["method"] == "truncate"


async def test_malformed_summaries_then_success_on_retry(
    cclient: AsyncTestClient, ollama: FakeOllama
) -> None:
    sid = await new_session(cclient)
    await fill(cclient, sid, 8, size=60)
    ollama.chat_replies = ["KEYS: only keys", "- recovered\nKEYS: k1"]
    r = await cclient.post(f"/sessions/{sid}/compact")
    assert r.status_code == 200, r.text
    done = r.json()["events"][-1]
    assert done["method"] == "summary" and done["summary"] == "- recovered"
    # the retry used the wider keep window (8 turns kept instead of 4)
    assert done["messages_after"] < done["messages_before"]


async def _sent_tokens(client: AsyncTestClient, sid: str, message: dict | None) -> int:  # type: ignore[type-arg]
    """Navi's own size of the prompt a runtime would send next: an honest count."""
    r = await client.post(f"/sessions/{sid}/prepare", json={"message": message} if message else {})
    assert r.status_code == 200, r.text
    return int(r.json()["tokens"])


async def test_truncated_prompt_forces_post_turn_compression(cclient: AsyncTestClient) -> None:
    sid = await new_session(cclient)
    await fill(cclient, sid, 6)
    real = await _sent_tokens(cclient, sid, turn(6)[0])
    honest = await append(cclient, sid, turn(6), usage={"model": MODEL, "prompt_eval_count": real})
    assert honest["events"] == []  # well under the threshold
    s = (await cclient.get(f"/sessions/{sid}")).json()
    assert s["session_metadata"]["baseline"] == {"tokens": real, "count": 13, "model": MODEL}
    # the server evaluated far less than was sent, about a cut prompt's size (over a
    # quarter of the window): truncated
    cut = WINDOW // 4 + 10
    res = await append(cclient, sid, turn(7), usage={"model": MODEL, "prompt_eval_count": cut})
    assert [e["type"] for e in res["events"]] == ["CompressionStarted", "ContextCompressed"]
    assert res["events"][1]["reason"] == "postturn"
    s = (await cclient.get(f"/sessions/{sid}")).json()
    assert "context_truncated" not in s["session_metadata"]  # consumed by the compression
    assert "baseline" not in s["session_metadata"]  # cleared: the context shrank


async def test_a_count_far_below_a_cut_prompt_is_ignored(cclient: AsyncTestClient) -> None:
    """A handful of tokens for a prompt of thousands is a partial count (an Ollama that
    leaves cached tokens out, a proxy), not a cut: nothing recorded, nothing compressed."""
    sid = await new_session(cclient)
    await fill(cclient, sid, 6)
    real = await _sent_tokens(cclient, sid, turn(6)[0])
    await append(cclient, sid, turn(6), usage={"model": MODEL, "prompt_eval_count": real})
    before = (await cclient.get(f"/sessions/{sid}")).json()["session_metadata"]["baseline"]
    res = await append(cclient, sid, turn(7), usage={"model": MODEL, "prompt_eval_count": 50})
    assert res["events"] == []
    meta = (await cclient.get(f"/sessions/{sid}")).json()["session_metadata"]
    assert "context_truncated" not in meta and meta["baseline"] == before


async def test_truncated_flag_stays_when_nothing_can_be_compressed(
    cclient: AsyncTestClient,
) -> None:
    sid = await new_session(cclient)
    # the runtime says what it sent; the model evaluated about a cut prompt's size of it
    usage = {"model": MODEL, "prompt_eval_count": WINDOW // 4 + 10, "sent_tokens": 3000}
    res = await append(cclient, sid, turn(0, 600), usage=usage)
    assert res["events"] == []
    meta = (await cclient.get(f"/sessions/{sid}")).json()["session_metadata"]
    assert meta["context_truncated"] is True and "baseline" not in meta
    # an honest measurement later clears it
    await append(cclient, sid, turn(1, 60), usage={"model": MODEL, "prompt_eval_count": 700})
    meta = (await cclient.get(f"/sessions/{sid}")).json()["session_metadata"]
    assert "context_truncated" not in meta and meta["baseline"]["tokens"] == 700


async def test_compact_409_when_nothing_to_compact(cclient: AsyncTestClient) -> None:
    sid = await new_session(cclient)
    r = await cclient.post(f"/sessions/{sid}/compact")
    assert r.status_code == 409 and "nothing to compact" in r.json()["detail"]
    await append(cclient, sid, turn(0, 60))
    r = await cclient.post(f"/sessions/{sid}/compact", json={})
    assert r.status_code == 409 and "nothing to compact" in r.json()["detail"]


async def test_too_large_context_is_422_and_keeps_the_compression(
    cclient: AsyncTestClient,
) -> None:
    sid = await new_session(cclient)
    await fill(cclient, sid, 14, size=600)
    image = base64.b64encode(png(2048, 2048)).decode()  # ~4098 tokens on its own
    r = await cclient.post(
        f"/sessions/{sid}/prepare",
        json={"message": {"content": "what is this?", "images": [image]}},
    )
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "context_too_large"
    assert "accepts at most" in body["detail"] and body["tokens"] > body["limit"]
    ctx = await context(cclient, sid)  # compression ran first and was committed
    assert ctx[0]["is_summary"]


async def test_bad_prepare_input_is_422(cclient: AsyncTestClient) -> None:
    sid = await new_session(cclient)
    r = await cclient.post(
        f"/sessions/{sid}/prepare", json={"message": {"content": "x", "images": ["%%%"]}}
    )
    assert r.status_code == 422 and "message.images[0]" in r.json()["detail"]
    r = await cclient.post(f"/sessions/{sid}/prepare", json={"mid_turn": "maybe"})
    assert r.status_code == 422 and "mid_turn" in r.json()["detail"]
    r = await cclient.post(
        f"/sessions/{sid}/messages",
        json={"messages": [{"role": "user"}], "usage": {"model": MODEL, "prompt_eval_count": -1}},
    )
    assert r.status_code == 422 and "prompt_eval_count" in r.json()["detail"]


async def test_other_users_get_404(cclient: AsyncTestClient) -> None:
    sid = await new_session(cclient)
    await fill(cclient, sid, 8, size=60)
    _, headers = await new_user(cclient, "mallory")
    r = await cclient.post(f"/sessions/{sid}/prepare", json={}, headers=headers)
    assert r.status_code == 404
    r = await cclient.post(f"/sessions/{sid}/compact", headers=headers)
    assert r.status_code == 404
    r = await cclient.post(
        f"/sessions/{sid}/messages",
        json={
            "messages": [{"role": "assistant", "content": "x"}],
            "usage": {"model": MODEL, "prompt_eval_count": 10},
        },
        headers=headers,
    )
    assert r.status_code == 404
    ctx = await context(cclient, sid)
    assert len(ctx) == 16 and not any(m["is_summary"] for m in ctx)


async def test_append_without_usage_is_unchanged(cclient: AsyncTestClient) -> None:
    sid = await new_session(cclient)
    res = await append(cclient, sid, turn(0, 60))
    assert res["events"] == [] and [m["sequence_number"] for m in res["messages"]] == [0, 1]
    assert (await cclient.get(f"/sessions/{sid}")).json()["session_metadata"] == {}
