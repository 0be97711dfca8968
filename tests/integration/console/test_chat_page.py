"""`/console/chat/{id}`: the chat page, its turn route (SSE through the console's cookie
and CSRF), its upload and file routes, under the API's ownership rules; and the cards
the history is drawn as."""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from app.config import Settings
from app.domain.compression import reset_registry
from tests.conftest import ADMIN_TOKEN, new_user
from tests.fakes.chat_script import ScriptedReply
from tests.fakes.ollama_server import FakeOllama
from tests.integration.console.support import csrf_of, post_form, sign_in

PROFILES = {"small": {"context_window": 4096, "compression_keep_recent": 4, "model": "fake-small"}}
Headers = dict[str, str]
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
MP4 = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + b"\x00\x00\x00\x08free"


@pytest.fixture
async def cclient(  # type: ignore[no-untyped-def]
    make_client, settings: Settings, tmp_path: Path
) -> AsyncIterator[AsyncTestClient]:
    reset_registry()
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(PROFILES))
    async with make_client(
        settings, profiles_file=str(path), llm_max_attempts=1, llm_backoff_initial=0.0
    ) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c
    reset_registry()


async def _user(client: AsyncTestClient, name: str, perms: list[str] | None = None) -> Headers:
    _, headers = await new_user(client, name, perms)
    return headers


def _token(headers: Headers) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


async def _session(client: AsyncTestClient, headers: Headers) -> str:
    r = await client.post("/sessions", json={"profile_id": "small"}, headers=headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _events(body: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for frame in body.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
        if "event" in lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


async def _turn(client: AsyncTestClient, sid: str, csrf: str | None, content: str) -> Any:
    headers = {"Content-Type": "application/json"}
    if csrf is not None:
        headers["X-Navi-CSRF"] = csrf
    return await client.post(
        f"/console/chat/{sid}/turn", content=json.dumps({"content": content}), headers=headers
    )


async def test_new_chat_and_a_streamed_turn_with_its_cards(
    cclient: AsyncTestClient, ollama: FakeOllama
) -> None:
    ada = await _user(cclient, "ada")
    csrf = await sign_in(cclient, _token(ada))
    page = (await cclient.get("/console")).text
    assert 'id="new-chat"' in page and '<label for="new-chat-profile">' in page
    r = await post_form(cclient, "/console/chat", csrf, profile_id="small")
    assert r.status_code == 303, r.text
    sid = r.headers["location"].rsplit("/", 1)[1]
    uuid.UUID(sid)
    ollama.chat_replies += [
        ScriptedReply(tool_calls=[{"name": "memory", "arguments": {"action": "list"}}]),
        ScriptedReply("Hello from the fake model", prompt_eval_count=321),
    ]
    r = await _turn(cclient, sid, csrf, "hi there")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    events = _events(r.text)
    names = [n for n, _ in events]
    assert "token" in names and "tool_call" in names and "tool_result" in names
    assert events[-1][0] == "done" and events[-1][1]["status"] == "completed"
    page = (await cclient.get(f"/console/chat/{sid}")).text
    assert "Hello from the fake model" in page and "hi there" in page
    assert "Tool call: memory" in page and "Result of memory" in page
    assert "tokens in 321" in page
    # the session's profile and its model: the page names them, the turn asked that model
    assert "Profile small · model fake-small · window 4096 tokens" in page
    assert {b["model"] for b in ollama.requests_for("/api/chat")} == {"fake-small"}
    assert 'src="/console/static/chat.js"' in page and '<label for="chat-input">' in page
    # the sidebar: the caller's chats, pinned first, this one marked
    r = await cclient.post("/sessions", json={"name": "Pinned one"}, headers=ada)
    r = await cclient.patch(f"/sessions/{r.json()['id']}", json={"pinned": True}, headers=ada)
    assert r.status_code == 200, r.text
    page = (await cclient.get(f"/console/chat/{sid}")).text
    side = page[
        page.index('aria-label="Your chats"') : page.index("</nav>", page.index("Your chats"))
    ]
    assert side.index("Pinned one") < side.index(f'/console/chat/{sid}"')
    assert f'href="/console/chat/{sid}" aria-current="page"' in side


async def test_cards_of_plans_service_records_and_hidden_system_messages(
    cclient: AsyncTestClient,
) -> None:
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada)
    msgs = [
        {"role": "user", "content": "plan the trip"},
        {"role": "assistant", "content": "1. book 2. pack", "is_plan": True},
        {
            "role": "system",
            "content": "dispatcher: nightly task",
            "metadata": {"source": "synapse_event"},
        },
        {"role": "system", "content": "an internal note nobody sees"},
        {
            "role": "user",
            "content": "look",
            "images": [base64.b64encode(PNG).decode()],
        },
    ]
    r = await cclient.post(f"/sessions/{sid}/messages", json={"messages": msgs}, headers=ada)
    assert r.status_code == 201, r.text
    await sign_in(cclient, _token(ada))
    page = (await cclient.get(f"/console/chat/{sid}")).text
    assert 'class="chat-card plan-card"' in page and "1. book 2. pack" in page
    assert 'class="chat-card service-card"' in page and "dispatcher: nightly task" in page
    assert "an internal note nobody sees" not in page
    assert 'src="data:image/png;base64,' in page and "tokens</figcaption>" in page


async def test_no_model_reachable_is_said(cclient: AsyncTestClient, ollama: FakeOllama) -> None:
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada)
    csrf = await sign_in(cclient, _token(ada))
    ollama.fail("http500", paths={"/api/chat"})
    r = await _turn(cclient, sid, csrf, "anyone there?")
    if r.status_code == 200:
        kind, data = _events(r.text)[-1]
        assert kind == "error" and data["status"] == 503, r.text
    else:
        assert r.status_code == 503, r.text


async def test_another_users_chat_is_not_found(cclient: AsyncTestClient) -> None:
    ada = await _user(cclient, "ada")
    bob = await _user(cclient, "bob")
    sid = await _session(cclient, ada)
    csrf = await sign_in(cclient, _token(bob))
    assert (await cclient.get(f"/console/chat/{sid}")).status_code == 404
    assert (await _turn(cclient, sid, csrf, "hijack")).status_code == 404
    files = {"files": ("a.txt", b"hello", "text/plain")}
    r = await cclient.post(f"/console/chat/{sid}/files", files=files, headers={"X-Navi-CSRF": csrf})
    assert r.status_code == 404
    assert (await cclient.get(f"/console/chat/{sid}/files/a.txt")).status_code == 404
    assert (await cclient.get(f"/console/chat/{uuid.uuid4()}")).status_code == 404


async def test_a_reader_may_read_but_not_post(cclient: AsyncTestClient) -> None:
    ada = await _user(cclient, "ada")
    eve = await _user(cclient, "eve", ["navi.sessions.read_all"])
    sid = await _session(cclient, ada)
    r = await cclient.post(
        f"/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "ada said hello"}]},
        headers=ada,
    )
    assert r.status_code == 201
    csrf = await sign_in(cclient, _token(eve))
    page = await cclient.get(f"/console/chat/{sid}")
    assert page.status_code == 200 and "ada said hello" in page.text
    assert 'id="chat-form"' not in page.text
    assert (await _turn(cclient, sid, csrf, "eve was here")).status_code == 403
    files = {"files": ("a.txt", b"hello", "text/plain")}
    r = await cclient.post(f"/console/chat/{sid}/files", files=files, headers={"X-Navi-CSRF": csrf})
    assert r.status_code == 403
    msgs = (await cclient.get(f"/sessions/{sid}/messages", headers=ada)).json()
    assert all("eve" not in m["content"] for m in msgs["messages"])


async def test_csrf_is_required_on_every_chat_write(cclient: AsyncTestClient) -> None:
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada)
    csrf = await sign_in(cclient, _token(ada))
    assert (await _turn(cclient, sid, None, "no token")).status_code == 403
    assert (await _turn(cclient, sid, "forged", "bad token")).status_code == 403
    files = {"files": ("a.txt", b"hello", "text/plain")}
    r = await cclient.post(f"/console/chat/{sid}/files", files=files)
    assert r.status_code == 403
    r = await cclient.post("/console/chat", data={"profile_id": "small"}, follow_redirects=False)
    assert r.status_code == 403
    r = await cclient.post(f"/console/chat/{sid}/files", files=files, headers={"X-Navi-CSRF": csrf})
    assert r.status_code == 201, r.text
    assert r.json()["files"][0]["name"] == "a.txt"
    msgs = (await cclient.get(f"/sessions/{sid}/messages", headers=ada)).json()["messages"]
    assert msgs == []


async def test_upload_refusals_are_the_apis(cclient: AsyncTestClient) -> None:
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada)
    csrf = await sign_in(cclient, _token(ada))
    files = {"files": ("run.exe", b"MZ\x90\x00rest", "application/octet-stream")}
    r = await cclient.post(f"/console/chat/{sid}/files", files=files, headers={"X-Navi-CSRF": csrf})
    assert r.status_code == 415, r.text
    r = await cclient.get(f"/console/chat/{sid}")
    assert csrf_of(r.text) == csrf


async def test_published_files_are_served_for_the_viewers(cclient: AsyncTestClient) -> None:
    """The chat's viewers read a session's files through the console (the cookie): an
    SVG or HTML file without script, framable by the chat only."""
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada)
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><rect width="9" height="9"/></svg>'
    files = {"files": ("map.svg", svg, "image/svg+xml")}
    r = await cclient.post(f"/sessions/{sid}/files", files=files, headers=ada)
    assert r.status_code == 201, r.text
    await sign_in(cclient, _token(ada))
    r = await cclient.get(f"/console/chat/{sid}/files/map.svg")
    assert r.status_code == 200 and r.content == svg
    csp = r.headers["content-security-policy"]
    assert "sandbox" in csp and "frame-ancestors 'self'" in csp and "script-src" not in csp
    assert r.headers["content-type"].startswith("image/svg+xml")
    assert r.headers["content-disposition"].startswith("inline")


async def test_requires_action_is_shown_as_what_the_agent_waits_for(
    cclient: AsyncTestClient, ollama: FakeOllama
) -> None:
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada)
    csrf = await sign_in(cclient, _token(ada))
    call = {"name": "book_flight", "arguments": {"to": "LIS"}}
    ollama.chat_replies.append(ScriptedReply(tool_calls=[call]))
    r = await _turn(cclient, sid, csrf, "book it")
    kind, done = _events(r.text)[-1]
    assert kind == "done" and done["status"] == "requires_action", r.text
    page = (await cclient.get(f"/console/chat/{sid}")).text
    assert "The agent is waiting for:</strong> book_flight" in page


async def test_pasted_images_take_the_append_paths_limits(
    cclient: AsyncTestClient, ollama: FakeOllama
) -> None:
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada)
    csrf = await sign_in(cclient, _token(ada))
    headers = {"Content-Type": "application/json", "X-Navi-CSRF": csrf}
    bad = json.dumps({"content": "look", "images": [base64.b64encode(b"not an image").decode()]})
    r = await cclient.post(f"/console/chat/{sid}/turn", content=bad, headers=headers)
    assert r.status_code == 415, r.text
    ollama.chat_replies.append(ScriptedReply("A tiny picture."))
    good = json.dumps({"content": "look", "images": [base64.b64encode(PNG).decode()]})
    r = await cclient.post(f"/console/chat/{sid}/turn", content=good, headers=headers)
    assert r.status_code == 200 and _events(r.text)[-1][0] == "done", r.text
    page = (await cclient.get(f"/console/chat/{sid}")).text
    assert page.count('src="data:image/png;base64,') == 1 and "A tiny picture." in page
    r = await cclient.post(f"/console/chat/{sid}/turn", content='{"content": 5}', headers=headers)
    assert r.status_code == 422


async def test_published_files_get_a_viewer_by_their_type(
    cclient: AsyncTestClient, ollama: FakeOllama
) -> None:
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada)
    files = [
        ("files", ("query.sql", b"select 42\n  from dual;\n", "text/plain")),
        ("files", ("page.html", b"<!doctype html><p>hello<script>alert(1)</script>", "text/html")),
        ("files", ("part.stl", b"solid part\nendsolid part\n", "model/stl")),
        ("files", ("beep.wav", b"RIFF\x24\x00\x00\x00WAVEfmt ", "audio/wav")),
        ("files", ("dot.png", PNG, "image/png")),
        ("files", ("clip.mp4", MP4, "video/mp4")),
    ]
    r = await cclient.post(f"/sessions/{sid}/files", files=files, headers=ada)
    assert r.status_code == 201, r.text
    csrf = await sign_in(cclient, _token(ada))
    names = ["query.sql", "page.html", "part.stl", "beep.wav", "dot.png", "clip.mp4"]
    calls = [{"name": "content_publish", "arguments": {"filename": n}} for n in names]
    ollama.chat_replies += [ScriptedReply(tool_calls=calls), ScriptedReply("Published.")]
    r = await _turn(cclient, sid, csrf, "publish them")
    assert _events(r.text)[-1][1]["status"] == "completed", r.text
    page = (await cclient.get(f"/console/chat/{sid}")).text
    base = f"/console/chat/{sid}/files"
    assert '<pre class="numbered"' in page
    assert '<span class="line">select 42</span>' in page
    assert '<span class="line">  from dual;</span>' in page
    assert f'<iframe sandbox src="{base}/page.html"' in page
    assert f'<audio controls src="{base}/beep.wav"' in page
    assert f'<img src="{base}/dot.png" alt="dot.png">' in page
    assert f'<video controls src="{base}/clip.mp4"' in page
    assert f'href="{base}/part.stl" download="part.stl"' in page
    assert "no viewer for model files here" in page
    r = await cclient.get(f"{base}/part.stl")
    assert r.status_code == 200 and r.headers["content-disposition"].startswith("attachment")
    r = await cclient.get(f"{base}/page.html")
    assert "sandbox" in r.headers["content-security-policy"]


async def test_older_messages_are_paged_as_the_owner_scrolls(cclient: AsyncTestClient) -> None:
    """The newest page first, "← Older messages" to the page before it, "Newest" back."""
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada)
    msgs = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message number {i:02d}"}
        for i in range(7)
    ]
    r = await cclient.post(f"/sessions/{sid}/messages", json={"messages": msgs}, headers=ada)
    assert r.status_code == 201, r.text
    await sign_in(cclient, _token(ada))
    page = (await cclient.get(f"/console/chat/{sid}", params={"limit": 3})).text
    assert all(f"message number {i:02d}" in page for i in (4, 5, 6))
    assert all(f"message number {i:02d}" not in page for i in range(4))
    assert 'class="newest"' not in page
    older = page.split('class="older" href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    page = (await cclient.get(older)).text
    assert all(f"message number {i:02d}" in page for i in (1, 2, 3))
    assert all(f"message number {i:02d}" not in page for i in (0, 4, 5, 6))
    assert f'class="newest" href="/console/chat/{sid}"' in page


async def test_the_page_loads_nothing_from_elsewhere(cclient: AsyncTestClient) -> None:
    """Server-rendered, the console's script and one small script of the chat's own,
    every asset from this origin."""
    ada = await _user(cclient, "ada")
    sid = await _session(cclient, ada)
    await sign_in(cclient, _token(ada))
    r = await cclient.get(f"/console/chat/{sid}")
    assert r.status_code == 200
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self';" in csp
    assert "frame-src 'self'" in csp and "media-src 'self'" in csp
    assert "http:" not in csp and "https:" not in csp
    srcs = re.findall(r'(?:src|href)="([^"]*)"', r.text)
    assert srcs and all(s.startswith(("/", "#", "data:")) for s in srcs), srcs
    scripts = re.findall(r"<script\b[^>]*>", r.text)
    own = ['<script src="/console/static/console.js" defer>']  # every page's
    assert scripts == [*own, '<script src="/console/static/chat.js" defer>'], scripts
    js = await cclient.get("/console/static/chat.js")
    assert js.status_code == 200 and js.text.count("\n") < 200


async def test_uploads_past_the_quota_are_the_apis_413(
    make_client,  # type: ignore[no-untyped-def]
    settings: Settings,
) -> None:
    async with make_client(settings, files_max_bytes_per_user=100) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        ada = await _user(c, "ada")
        r = await c.post("/sessions", json={}, headers=ada)
        sid = r.json()["id"]
        csrf = await sign_in(c, _token(ada))
        files = {"files": ("big.txt", b"x" * 500, "text/plain")}
        api = await c.post(f"/sessions/{sid}/files", files=files, headers=ada)
        assert api.status_code == 413, api.text
        r = await c.post(f"/console/chat/{sid}/files", files=files, headers={"X-Navi-CSRF": csrf})
        assert r.status_code == 413, r.text
        small = {"files": ("small.txt", b"x" * 50, "text/plain")}
        r = await c.post(f"/console/chat/{sid}/files", files=small, headers={"X-Navi-CSRF": csrf})
        assert r.status_code == 201, r.text
