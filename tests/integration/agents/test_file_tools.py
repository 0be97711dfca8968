"""The session-file tools in a turn: image_view attaches a session image to the next
model call; share_file and content_publish answer as their HTTP endpoints do."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.domain.files import image_view as image_view_module
from app.domain.files.image_view import read_session_image
from app.lib.errors import PayloadTooLarge, Unprocessable
from tests.conftest import ADMIN_TOKEN
from tests.fakes.chat_script import ScriptedReply
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.served import serve
from tests.unit.compression.images import png

from .conftest import messages, new_session

PNG = png(64, 48)
B64 = base64.b64encode(PNG).decode()


@pytest.fixture
def shared_dir(tmp_path: Path) -> Path:
    d = tmp_path / "shared"
    d.mkdir()
    (d / "report.txt").write_text("quarterly numbers\n")
    return d


@pytest.fixture
async def served(
    engine: AsyncEngine, turn_settings: Settings, shared_dir: Path
) -> AsyncIterator[httpx.AsyncClient]:
    from app.asgi import create_app

    settings = dataclasses.replace(turn_settings, share_file_roots=str(shared_dir))
    app = create_app(settings, engine=engine, background_jobs=False)
    async with serve(app) as base:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
            yield client


async def _session_with_image(client: httpx.AsyncClient) -> str:
    sid = await new_session(client)
    msg = {"role": "user", "content": "a screenshot", "images": [B64]}
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [msg]})
    assert r.status_code == 201, r.text
    return sid


def _tool_messages(body: dict) -> list[dict]:  # type: ignore[type-arg]
    return [m for m in body["messages"] if m["role"] == "tool"]


async def test_image_view_attaches_the_image_to_the_next_model_call(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    sid = await _session_with_image(served)
    path = f"session_files/{sid}/image_1.png"
    ollama.chat_replies += [
        ScriptedReply(
            "let me look", tool_calls=[{"name": "image_view", "arguments": {"path": path}}]
        ),
        ScriptedReply("A small picture.", tool_calls=[]),
    ]
    r = await served.post(f"/sessions/{sid}/turns", json={"message": {"content": "look at it"}})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["status"] == "completed" and out["content"] == "A small picture."
    result = next(e for e in out["events"] if e["event"] == "tool_result")
    assert not result["is_error"] and path in result["content"]
    first, second = ollama.requests_for("/api/chat")[-2:]
    assert "image_view" in {t["function"]["name"] for t in first["tools"]}
    (tool,) = _tool_messages(second)
    assert tool["images"] == [B64] and "attached" in tool["content"]
    # stored as text only: the image is the next call's, not the history's
    stored = [m for m in await messages(served, sid) if m["role"] == "tool"]
    assert stored[0]["images"] in (None, [])


async def test_image_view_unknown_or_another_sessions_image_is_a_tool_error(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    other = await _session_with_image(served)
    sid = await new_session(served)
    calls = [
        {"name": "image_view", "arguments": {"path": "image_9.png"}},
        {"name": "image_view", "arguments": {"path": f"session_files/{other}/image_1.png"}},
        {"name": "image_view", "arguments": {"path": "../" + other + "/image_1.png"}},
    ]
    ollama.chat_replies += [ScriptedReply("", tool_calls=calls), ScriptedReply("No image.")]
    r = await served.post(f"/sessions/{sid}/turns", json={"message": {"content": "look"}})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed"
    results = [e for e in r.json()["events"] if e["event"] == "tool_result"]
    assert [e["is_error"] for e in results] == [True, True, True]
    assert "no image 'image_9.png'" in results[0]["content"]
    assert "in this session's files" in results[1]["content"]
    last = ollama.requests_for("/api/chat")[-1]
    assert all(not m.get("images") for m in last["messages"])


def test_image_view_size_bound(settings: Settings, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import uuid

    from app.domain.files.storage import session_dir

    sid = uuid.uuid4()
    d = session_dir(settings, sid)
    d.mkdir(parents=True)
    (d / "image_1.png").write_bytes(PNG)
    (d / "notes.txt").write_text("not an image")
    assert read_session_image(settings, sid, "image_1.png").media_type == "image/png"
    with pytest.raises(Unprocessable, match="notes.txt is not an image"):
        read_session_image(settings, sid, "notes.txt")
    monkeypatch.setattr(image_view_module, "IMAGE_VIEW_MAX_BYTES", len(PNG) - 1)
    with pytest.raises(PayloadTooLarge, match="more than image_view loads"):
        read_session_image(settings, sid, f"session_files/{sid}/image_1.png")


async def test_share_file_and_content_publish_in_a_turn(
    served: httpx.AsyncClient, ollama: FakeOllama, shared_dir: Path
) -> None:
    sid = await new_session(served)
    ollama.chat_replies += [
        ScriptedReply(
            "",
            tool_calls=[
                {"name": "share_file", "arguments": {"path": str(shared_dir / "report.txt")}},
                {"name": "share_file", "arguments": {"path": "/etc/hostname"}},
            ],
        ),
        ScriptedReply(
            "", tool_calls=[{"name": "content_publish", "arguments": {"filename": "report.txt"}}]
        ),
        ScriptedReply("Here is your report."),
    ]
    r = await served.post(f"/sessions/{sid}/turns", json={"message": {"content": "share it"}})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed"
    results = [e for e in r.json()["events"] if e["event"] == "tool_result"]
    assert [(e["name"], e["is_error"]) for e in results] == [
        ("share_file", False),
        ("share_file", True),
        ("content_publish", False),
    ]
    assert f"session_files/{sid}/report.txt" in results[0]["content"]
    assert "outside SHARE_FILE_ROOTS" in results[1]["content"]
    assert f"/sessions/{sid}/files/report.txt" in results[2]["content"]
    assert "text card" in results[2]["content"]
    r = await served.get(f"/sessions/{sid}/files/report.txt")
    assert r.status_code == 200 and r.text == "quarterly numbers\n"


async def test_a_turn_with_a_pasted_image_sends_it_to_the_model(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    """The turn's own message with an image: the client's Image type, not a 502."""
    sid = await new_session(served)
    ollama.chat_replies.append(ScriptedReply("A picture."))
    body = {"message": {"content": "what is this?", "images": [B64]}}
    r = await served.post(f"/sessions/{sid}/turns", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed"
    sent = ollama.requests_for("/api/chat")[-1]["messages"]
    assert sent[-1]["role"] == "user" and sent[-1]["images"] == [B64]
