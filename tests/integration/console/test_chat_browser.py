"""The console's chat in a real browser (tests/browser.py): a person starts a new chat,
talks to the (fake) model through the page — a streamed answer, a built-in tool call
folded in, an uploaded and a pasted image shown and priced, two `content_publish`ed
files (PDF, SVG) shown inline, a compression card once the window fills, a notice when
no model is reachable — and sees the plan and service cards; another user's chat is
404. The screenshots `console-chat` and `console-chat-viewers` are docs/console.md's."""

from __future__ import annotations

import base64
import json
import struct
import time
import zlib
from pathlib import Path

import httpx
import pytest

from tests.browser import Browser, shown
from tests.conftest import ADMIN_TOKEN
from tests.fakes.chat_script import ScriptedReply
from tests.fakes.ollama_server import FakeOllama

PROFILES = {"small": {"context_window": 4096, "compression_keep_recent": 2, "model": "fake-chat"}}
PDF = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
    b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 300 144]/Contents 4 0 R"
    b"/Resources<</Font<</F1 5 0 R>>>>>>endobj\n"
    b"4 0 obj<</Length 44>>stream\nBT /F1 24 Tf 40 70 Td (Lisbon itinerary) Tj ET\n"
    b"endstream endobj\n5 0 obj<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>endobj\n"
    b"trailer<</Root 1 0 R>>\n%%EOF\n"
)
SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="200" height="80">'
    b'<rect width="200" height="80" fill="#2456c8"/>'
    b'<text x="20" y="50" fill="#fff" font-size="24">route map</text></svg>'
)


def _png(size: int = 64) -> bytes:
    """A small opaque PNG (a gradient), made here: no binary fixture."""
    rows = b"".join(
        b"\x00" + bytes(c for x in range(size) for c in (x * 4 % 256, y * 4 % 256, 160))
        for y in range(size)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@pytest.fixture
def server_env(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(PROFILES))
    return {"NAVI_PROFILES_FILE": str(path)}


def _user(api: httpx.Client, name: str) -> str:
    r = api.post("/admin/users", json={"name": name})
    assert r.status_code == 201, r.text
    r = api.post(f"/admin/users/{r.json()['id']}/tokens", json={"name": "browser"})
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


def _submit(browser: Browser, selector: str) -> None:
    browser.js("window.__left = true")
    browser.click(selector)
    browser.wait_js("window.__left === undefined && document.readyState === 'complete'", selector)


def _send(browser: Browser, text: str) -> None:
    browser.type("#chat-input", text)
    browser.click("#chat-send")


def _turn_ended(browser: Browser) -> None:
    """The turn's stream ended and the history was redrawn from the server."""
    browser.wait_js("!document.querySelector('#chat .live')", "the history redrawn")


def test_a_person_chats_through_the_console(
    browser: Browser, server: tuple[str, Path], ollama: FakeOllama, tmp_path: Path
) -> None:
    base, _ = server
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    ada = _user(api, "ada")
    mallory = _user(api, "mallory")
    as_ada = {"Authorization": f"Bearer {ada}"}
    theirs = api.post(
        "/sessions", json={"name": "mallory's"}, headers={"Authorization": f"Bearer {mallory}"}
    ).json()["id"]

    # --- sign in, "New chat" on the sessions list
    browser.goto(f"{base}/console/login")
    browser.type("#token", ada)
    _submit(browser, "#signin")
    browser.type("#new-chat-name", "Trip to Lisbon")
    browser.js("document.querySelector('#new-chat-profile').value = 'small'")
    _submit(browser, "#new-chat")
    path = browser.js("location.pathname")
    assert path.startswith("/console/chat/"), path
    sid = path.rsplit("/", 1)[1]

    # what the session already holds: earlier turns, a plan, a service record, two files
    earlier = []
    for i in range(4):
        words = " ".join(f"w{i}x{j}" for j in range(12))
        earlier += [
            {"role": "user", "content": f"earlier question {i}: {words}"},
            {"role": "assistant", "content": f"earlier answer {i}: {words}"},
        ]
    earlier += [
        {"role": "assistant", "content": "1. flights\n2. hotel near Alfama", "is_plan": True},
        {
            "role": "system",
            "content": "Synapse: the nightly price check found cheaper flights",
            "metadata": {"source": "synapse_event"},
        },
        {"role": "system", "content": "internal bookkeeping note"},
    ]
    r = api.post(f"/sessions/{sid}/messages", json={"messages": earlier}, headers=as_ada)
    assert r.status_code == 201, r.text
    files = [
        ("files", ("itinerary.pdf", PDF, "application/pdf")),
        ("files", ("map.svg", SVG, "image/svg+xml")),
    ]
    r = api.post(f"/sessions/{sid}/files", files=files, headers=as_ada)
    assert r.status_code == 201, r.text
    browser.goto(f"{base}/console/chat/{sid}")
    assert browser.js(shown(".plan-card")) is True
    assert "hotel near Alfama" in browser.text(".plan-card")
    assert "cheaper flights" in browser.text(".service-card")
    assert "internal bookkeeping" not in browser.text("#chat")

    # --- a turn: a built-in tool call, then the answer streamed word by word
    ollama.chat_replies += [
        ScriptedReply(tool_calls=[{"name": "memory", "arguments": {"action": "list"}}]),
        ScriptedReply(
            "I remember nothing yet, but I can plan the Lisbon trip with you step by step.",
            token_delay=0.15,
        ),
    ]
    _send(browser, "What do you remember about me?")
    browser.wait_js(
        "(document.querySelector('#chat .live .text') || {}).textContent?.includes('remember')",
        "the answer's first tokens",
    )
    assert "step by step" not in browser.text("#chat .live .text")  # still streaming
    _turn_ended(browser)
    last = "#chat > li:last-child"
    assert "plan the Lisbon trip with you step by step" in browser.text(last)
    assert "Tool call: memory" in browser.text("#chat .tool-call summary")
    assert browser.js("document.querySelector('#chat .tool-call').open") is False  # folded
    assert "tokens in" in browser.text(f"{last} .usage")

    # --- an uploaded image, then the model publishes the PDF and the SVG; the answer's
    # prompt fills the window: the context is compressed after the turn
    png = tmp_path / "harbour.png"
    png.write_bytes(_png())
    doc = browser.call("DOM.getDocument")
    node = browser.call("DOM.querySelector", nodeId=doc["root"]["nodeId"], selector="#chat-file")
    browser.call("DOM.setFileInputFiles", files=[str(png)], nodeId=node["nodeId"])
    browser.wait_js(
        "document.querySelector('#chat-attached').textContent.includes('harbour.png')", "the upload"
    )
    # a pasted image goes with the same message (as the turn's `images`)
    pasted = base64.b64encode(_png(32)).decode()
    browser.js(
        f"""(() => {{
            const bytes = Uint8Array.from(atob({json.dumps(pasted)}), c => c.charCodeAt(0));
            const dt = new DataTransfer();
            dt.items.add(new File([bytes], "clip.png", {{type: "image/png"}}));
            document.querySelector('#chat-input').dispatchEvent(
                new ClipboardEvent("paste", {{clipboardData: dt, bubbles: true}}));
            return true;
        }})()"""
    )
    browser.wait_js(
        "document.querySelector('#chat-attached').textContent.includes('pasted image')",
        "the pasted image",
    )
    ollama.chat_replies += [
        ScriptedReply(
            tool_calls=[
                {"name": "content_publish", "arguments": {"filename": "itinerary.pdf"}},
                {"name": "content_publish", "arguments": {"filename": "map.svg"}},
            ]
        ),
        ScriptedReply("Here are the itinerary and the map.", prompt_eval_count=3990),
        "- ada is planning a trip to Lisbon\nKEYS: Lisbon, Alfama",
    ]
    _send(browser, "Here is the harbour; show me the itinerary and the map")
    _turn_ended(browser)
    assert browser.js("document.querySelectorAll('#chat figure.attached img').length") == 2
    assert "tokens" in browser.text("#chat figure.attached figcaption")
    assert "harbour.png" in browser.text("#chat")  # the upload's block in the message
    pdf = browser.js("document.querySelector('.viewer-pdf iframe').getAttribute('src')")
    svg_frame = "document.querySelector('.viewer-svg iframe')"
    assert browser.js(f"{svg_frame}.hasAttribute('sandbox')") is True
    assert browser.js(f"{svg_frame}.getAttribute('sandbox')") == ""
    assert browser.js(f"{svg_frame}.getAttribute('src')") == f"/console/chat/{sid}/files/map.svg"
    assert pdf == f"/console/chat/{sid}/files/itinerary.pdf"
    fetched = browser.js(
        f"fetch({json.dumps(pdf)}).then(r => [r.status, r.headers.get('content-type')])"
    )
    assert fetched == [200, "application/pdf"]
    card = browser.text(".compression-card .card-title")
    assert card.startswith("Context compressed:") and "→" in card and "messages" in card
    assert browser.js("document.querySelector('.compression-card details').open") is False
    assert "trip to Lisbon" in browser.text(".compression-card details")
    browser.js("document.querySelector('.compression-card details').open = true")
    browser.js("window.scrollTo(0, 0)")
    browser.screenshot("console-chat")
    # the viewers: frames are painted in the viewport only (Browser.screenshot)
    browser.js("document.querySelector('.viewer-pdf').scrollIntoView()")
    time.sleep(1)  # the frames' paint after the scroll (their content is not readable)
    browser.screenshot("console-chat-viewers", full_page=False)

    # --- no model reachable: the page says so, the message is kept (sent with Enter:
    # a mouse click at the button's centre could land on the PDF viewer's frame after
    # the scroll above; the keyboard sends to the focused field)
    ollama.fail("http500", paths={"/api/chat"})
    browser.js("window.scrollTo(0, 0)")
    browser.type("#chat-input", "Are you there?")
    browser.press_enter()
    browser.wait_js(
        "(document.querySelector('#chat .turn-error') || {}).textContent?.includes("
        "'No model is reachable')",
        "the no-model notice",
    )
    ollama.recover()
    r = api.get(f"/sessions/{sid}/messages", params={"limit": 5}, headers=as_ada)
    assert any(m["content"] == "Are you there?" for m in r.json()["messages"]), r.text

    # --- another user's chat: 404, its turn route too
    status = browser.js(f"fetch('/console/chat/{theirs}').then(r => r.status)")
    assert status == 404
    status = browser.js(
        f"""fetch('/console/chat/{theirs}/turn', {{
            method: 'POST', body: JSON.stringify({{content: 'hello?'}}),
            headers: {{'Content-Type': 'application/json',
                       'X-Navi-CSRF': document.querySelector('#chat-form').dataset.csrf}},
        }}).then(r => r.status)"""
    )
    assert status == 404
