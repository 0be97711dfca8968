"""The share page in a real browser (tests/browser.py: Chromium over the DevTools
protocol, the app under uvicorn)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.browser import Browser, shown
from tests.conftest import ADMIN_TOKEN

MESSAGES_JS = "[...document.querySelectorAll('#messages > li')]"


def test_share_page_reads_pages_back_and_dies_with_the_session(
    browser: Browser, server: tuple[str, Path]
) -> None:
    # (browser first: without Chromium the test stops before starting the server)
    base, log_path = server
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    sid = api.post("/sessions", json={"name": "Rocket <b>science</b>"}).json()["id"]
    first = [
        {"role": "user", "content": "How do rockets work?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "search", "arguments": {"q": "thrust"}}}],
        },
        {"role": "tool", "name": "search", "content": "Newton's third law"},
        {"role": "assistant", "content": "Step 1: read", "is_plan": True, "is_context": False},
        {"role": "system", "content": "older turns summarised", "is_compression": True},
        {"role": "user", "content": '<img src=x onerror="window.__pwned=1"><b>bold</b>'},
    ]
    later = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
        for i in range(56)
    ]
    for batch in (first, later):
        r = api.post(f"/sessions/{sid}/messages", json={"messages": batch})
        assert r.status_code == 201, r.text
    r = api.post(f"/sessions/{sid}/share")
    assert r.status_code == 200, r.text
    token, url = r.json()["token"], r.json()["url"]

    # --- open the link: the newest page (50 messages) and an "older messages" button
    browser.call("Page.navigate", url=base + url)
    browser.wait_js(f"{MESSAGES_JS}.length === 50", "the newest page")
    assert browser.js("document.getElementById('title').textContent") == "Rocket <b>science</b>"
    assert browser.js(f"{MESSAGES_JS}.at(-1).textContent").endswith("message 55")
    assert browser.js(shown("#older")) is True
    assert browser.js("document.querySelector('textarea, input, form')") is None  # no reply box
    assert browser.js("location.hash") == f"#share={token}"

    # --- really click "older messages": the first six records come in on top
    browser.click("#older")
    browser.wait_js(f"{MESSAGES_JS}.length === 62", "the older page")
    assert browser.js(shown("#older")) is False
    texts = browser.js(f"{MESSAGES_JS}.map(li => li.textContent)")
    assert "How do rockets work?" in texts[0]
    classes = browser.js(f"{MESSAGES_JS}.map(li => li.className)")
    assert "plan" in classes[3] and "compression" in classes[4]
    # tool calls and results are collapsed
    closed = browser.js(
        "[...document.querySelectorAll('#messages details')].filter(d => !d.open).length"
    )
    assert closed >= 3
    assert "search" in texts[1] and "Newton" in texts[2]
    # message text is text, never markup
    assert "<b>bold</b>" in texts[5]
    assert browser.js("document.querySelectorAll('#messages b, #messages img').length") == 0
    assert browser.js("window.__pwned === undefined") is True

    # --- delete the session, reload: the link is dead
    assert api.delete(f"/sessions/{sid}").status_code == 204
    browser.call("Page.reload", ignoreCache=True)
    browser.wait_js(
        "document.getElementById('status').className === 'dead'", "the dead-link message"
    )
    assert "does not work" in browser.js("document.getElementById('status').textContent")
    assert browser.js(f"{MESSAGES_JS}.length") == 0
    assert browser.js(shown("#status")) is True
    assert browser.js(shown("#older")) is False and browser.js(shown("#header")) is False

    # the token reached the server only in /shared/<token> paths, which are logged redacted
    logs = log_path.read_text()
    assert "/shared/[redacted]" in logs
    assert token not in logs
