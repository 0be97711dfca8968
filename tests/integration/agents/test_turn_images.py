"""Images in a turn: the turn's own pasted images go through the image budget and carry
the notice from the first model call on; `image_view` is priced against the window and
survives a hand-back to the client (``requires_action`` → resume)."""

from __future__ import annotations

import base64

import httpx

from tests.fakes.chat_script import ScriptedReply
from tests.fakes.ollama_server import FakeOllama
from tests.unit.compression.images import png

from .conftest import new_session

# The test profile's window is 4096 tokens: the image budget is 0.8 × 4096 − context.
LARGE = base64.b64encode(png(1024, 1024)).decode()  # 1026 tokens: fits
HUGE = base64.b64encode(png(2048, 2048)).decode()  # 4098 tokens: never fits
THUMB = base64.b64encode(png(512, 512)).decode()  # 258 tokens, but after HUGE
SMALL = base64.b64encode(png(64, 48)).decode()
CLIENT_TOOL = {
    "type": "function",
    "function": {
        "name": "run_shell",
        "description": "run a command on the user's machine",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
}


def _last_user(body: dict) -> dict:  # type: ignore[type-arg]
    return next(m for m in reversed(body["messages"]) if m["role"] == "user")


def _tools(body: dict) -> list[dict]:  # type: ignore[type-arg]
    return [m for m in body["messages"] if m["role"] == "tool"]


async def test_first_round_sends_only_the_admitted_images_and_the_notice(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    sid = await new_session(served)
    ollama.chat_replies.append(ScriptedReply("One picture, and two on disk."))
    body = {"message": {"content": "compare these", "images": [LARGE, HUGE, THUMB]}}
    r = await served.post(f"/sessions/{sid}/turns", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    # the images past the budget are not priced into the pre-turn check either
    assert out["status"] == "completed" and out["rounds"] == 1, out
    (first,) = ollama.requests_for("/api/chat")
    user = _last_user(first)
    assert user["images"] == [LARGE]
    assert user["content"].startswith("compare these\n\n[3 images attached inline — 1 are")
    assert "the rest were not loaded;\nopen them with image_view: " in user["content"]
    assert f"session_files/{sid}/image_2.png, session_files/{sid}/image_3.png]" in user["content"]
    # the display copy is unchanged: all three images, the text as typed
    stored = (await served.get(f"/sessions/{sid}/messages")).json()["messages"][0]
    assert stored["content"] == "compare these" and len(stored["images"]) == 3


async def test_first_round_small_image_rides_whole_with_its_notice(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    sid = await new_session(served)
    ollama.chat_replies.append(ScriptedReply("A small picture."))
    body = {"message": {"content": "what is this?", "images": [SMALL]}}
    r = await served.post(f"/sessions/{sid}/turns", json=body)
    assert r.status_code == 200, r.text
    user = _last_user(ollama.requests_for("/api/chat")[-1])
    assert user["images"] == [SMALL]
    assert "already in your context" in user["content"]
    assert f"On disk: session_files/{sid}/image_1.png]" in user["content"]


async def _stored_images(client: httpx.AsyncClient, sid: str, images: list[str]) -> None:
    msg = {"role": "user", "content": "screenshots", "images": images}
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [msg]})
    assert r.status_code == 201, r.text


async def test_image_view_refuses_an_image_the_window_cannot_take(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    sid = await new_session(served)
    await _stored_images(served, sid, [SMALL, HUGE])
    calls = [
        {"name": "image_view", "arguments": {"path": "image_2.png"}},
        {"name": "image_view", "arguments": {"path": "image_1.png"}},
    ]
    ollama.chat_replies += [ScriptedReply("", tool_calls=calls), ScriptedReply("Seen one.")]
    r = await served.post(f"/sessions/{sid}/turns", json={"message": {"content": "look"}})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed"
    results = [e for e in r.json()["events"] if e["event"] == "tool_result"]
    assert [e["is_error"] for e in results] == [True, False]
    assert "image_2.png" in results[0]["content"]
    assert "4098 tokens" in results[0]["content"] and "not loaded" in results[0]["content"]
    huge, small = _tools(ollama.requests_for("/api/chat")[-1])
    assert not huge.get("images") and small["images"] == [SMALL]


async def test_image_view_survives_a_hand_back_to_the_client(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    sid = await new_session(served)
    await _stored_images(served, sid, [SMALL])
    calls = [
        {"name": "image_view", "arguments": {"path": "image_1.png"}},
        {"name": "run_shell", "arguments": {"cmd": "ls"}},
    ]
    ollama.chat_replies += [ScriptedReply("", tool_calls=calls), ScriptedReply("Both seen.")]
    body = {"message": {"content": "look and list"}, "tools": [CLIENT_TOOL]}
    r = await served.post(f"/sessions/{sid}/turns", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "requires_action"
    [pending] = r.json()["pending"]
    resume = {
        "tool_results": [{"tool_call_id": pending["id"], "content": "a.txt"}],
        "tools": [CLIENT_TOOL],
    }
    r = await served.post(f"/sessions/{sid}/turns", json=resume)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed"
    viewed, shell = _tools(ollama.requests_for("/api/chat")[-1])
    assert viewed["tool_name"] == "image_view" and viewed["images"] == [SMALL]
    assert shell["tool_name"] == "run_shell" and not shell.get("images")
    # once only: the stored history keeps no image on the tool message
    stored = (await served.get(f"/sessions/{sid}/messages")).json()["messages"]
    assert all(not m.get("images") for m in stored if m["role"] == "tool")
