"""The console in a real browser (tests/browser.py: headless Chromium over the DevTools
protocol, the app under uvicorn): a person signs in, finds a session, sees its
compression, edits a fact, undoes a merge, searches, forgets a text, signs out; another
user's session is refused. Every page's screenshot is saved (NAVI_SCREENSHOT_DIR,
default .navi-test/screenshots; docs/console.md shows them)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.browser import Browser, shown
from tests.conftest import ADMIN_TOKEN
from tests.fakes.ollama_server import FakeOllama

PROFILES = {"small": {"context_window": 4096, "compression_keep_recent": 4, "model": "fake-chat"}}
SECRET = "the wifi password is tangerine-42"


@pytest.fixture
def server_env(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(PROFILES))
    return {"NAVI_PROFILES_FILE": str(path), "RAW_INDEX_LIVE_INTERVAL_SECONDS": "0.2"}


def _user(api: httpx.Client, name: str) -> str:
    r = api.post("/admin/users", json={"name": name})
    assert r.status_code == 201, r.text
    r = api.post(f"/admin/users/{r.json()['id']}/tokens", json={"name": "browser"})
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


def _turns(n: int) -> list[dict[str, str]]:
    out = []
    for i in range(n):
        words = " ".join(f"w{i}x{j}" for j in range(10))
        out.append({"role": "user", "content": f"question {i} about the proxy: {words}"})
        out.append({"role": "assistant", "content": f"answer {i}: {words}"})
    return out


def _submit(browser: Browser, selector: str) -> None:
    """Click a submit button for real and wait for the next page."""
    browser.js("window.__left = true")
    browser.click(selector)
    browser.wait_js("window.__left === undefined && document.readyState === 'complete'", selector)


def test_a_person_reviews_and_corrects_memory(
    browser: Browser, server: tuple[str, Path], ollama: FakeOllama
) -> None:
    base, log_path = server
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    ada = _user(api, "ada")
    mallory = _user(api, "mallory")
    as_ada = {"Authorization": f"Bearer {ada}"}
    # ada's data: a compressed session, another session, merged facts
    sid = api.post(
        "/sessions", json={"profile_id": "small", "name": "Proxy trouble"}, headers=as_ada
    ).json()["id"]
    r = api.post(f"/sessions/{sid}/messages", json={"messages": _turns(10)}, headers=as_ada)
    assert r.status_code == 201, r.text
    ollama.chat_replies = ["- ada debugged the proxy for ten turns\nKEYS: nginx.conf, TICKET-9"]
    r = api.post(f"/sessions/{sid}/compact", headers=as_ada)
    assert r.status_code == 200, r.text
    api.post(
        f"/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": f"remember: {SECRET}"}]},
        headers=as_ada,
    )
    api.post("/sessions", json={"name": "Holiday plans"}, headers=as_ada)
    old = api.post(
        "/memory/facts",
        json={"category": "preferences", "key": "language", "value": "Python"},
        headers=as_ada,
    ).json()
    new = api.post(
        "/memory/facts",
        json={
            "category": "preferences",
            "key": "preferred_language",
            "value": "Rust",
            "dedupe": True,
        },
        headers=as_ada,
    ).json()
    assert new["merged"] == [old["id"]]
    editor = api.post(
        "/memory/facts", json={"category": "tools", "key": "editor", "value": "vim"}, headers=as_ada
    ).json()
    mallory_sid = api.post(
        "/sessions", json={"name": "mallory's"}, headers={"Authorization": f"Bearer {mallory}"}
    ).json()["id"]

    # --- sign in: a page that is not signed in goes to the login page
    browser.goto(f"{base}/console")
    browser.wait_js("location.pathname === '/console/login'", "the login page")
    assert (
        browser.js("document.querySelector('label[for=token]').textContent").strip() == "Navi token"
    )
    browser.screenshot("console-login")
    browser.type("#token", ada)
    _submit(browser, "#signin")
    assert browser.js("location.pathname") == "/console"
    assert browser.js("document.cookie") == ""  # HttpOnly: no script can read it
    browser.screenshot("console-sessions")

    # --- find a session by its name
    browser.type("#q", "proxy")
    browser.press_enter()
    browser.wait_js("location.search.includes('q=proxy')", "the search")
    browser.wait_js("document.readyState === 'complete'", "the results")
    links = browser.js(
        "[...document.querySelectorAll('#sessions tbody a')].map(a => a.textContent)"
    )
    assert links == ["Proxy trouble"]
    _submit(browser, "#sessions tbody a")

    # --- its timeline: the compression block, the messages it replaced, the chart
    assert browser.js("location.pathname") == f"/console/sessions/{sid}"
    assert browser.js(shown(".summary")) is True
    summary = browser.text(".summary")
    assert "ada debugged the proxy" in summary and "nginx.conf" in summary
    assert browser.js("document.querySelectorAll('.msg.compressed').length") > 0
    assert browser.js("document.querySelector('#tokens-chart').dataset.marks") == "1"
    browser.screenshot("console-session")

    # --- memory: edit a fact, undo a merge
    browser.goto(f"{base}/console/memory")
    browser.screenshot("console-memory")
    browser.click(f"#fact-{editor['id']} details summary")  # "Edit" opens the form
    browser.wait_js(f"document.querySelector('#fact-{editor['id']} details').open", "the form")
    browser.type(f"#value-{editor['id']}", "helix")
    _submit(browser, f"#edit-fact-{editor['id']} button[type=submit]")
    assert "helix" in browser.text(f"#fact-{editor['id']}")
    facts = api.get("/memory/facts", params={"category": "tools"}, headers=as_ada).json()["items"]
    assert [f["value"] for f in facts] == ["helix"]
    assert browser.js(f"!!document.querySelector('#unmerge-fact-{old['id']}')") is True
    _submit(browser, f"#unmerge-fact-{old['id']} button")
    assert browser.js(f"!!document.querySelector('#unmerge-fact-{old['id']}')") is False
    restored = api.get("/memory/facts", params={"key": "language"}, headers=as_ada).json()["items"]
    assert [f["value"] for f in restored] == ["Python"]

    # --- search: the hit an agent would get, with its provenance
    browser.goto(f"{base}/console/search")
    browser.type("#q", "tangerine")
    _submit(browser, "#search-submit")
    browser.screenshot("console-search")
    kinds = browser.js("[...document.querySelectorAll('#hits .hit')].map(h => h.dataset.kind)")
    assert kinds, browser.text("main")
    assert "tangerine" in browser.text("#hits")

    # --- forget the text: the dry run's count first, then for real
    browser.type("#forget-text", "tangerine-42")
    _submit(browser, "#forget-preview-submit")
    count = int(browser.text("#forget-count"))
    assert count >= 1
    browser.screenshot("console-forget")
    browser.js("window.confirm = (m) => { window.__asked = m; return true; }")
    browser.js("window.__left = true")
    browser.click("#forget-confirm")
    browser.wait_js("window.__left === undefined && document.readyState === 'complete'", "forget")
    assert "tangerine" not in json.dumps(
        api.get(f"/sessions/{sid}/messages", headers=as_ada).json()
    )

    # --- another user's session: 404, as in the API
    browser.goto(f"{base}/console/sessions/{mallory_sid}")
    assert "404" in browser.text("h1")
    assert "mallory's" not in browser.text("main")

    # --- the admin console (screenshots for the docs)
    browser.goto(f"{base}/console/memory")
    _submit(browser, "#signout")
    assert browser.js("location.pathname") == "/console/login"
    browser.goto(f"{base}/console/memory")
    assert browser.js("location.pathname") == "/console/login"  # the session is gone
    browser.type("#token", ADMIN_TOKEN)
    _submit(browser, "#signin")
    browser.goto(f"{base}/console/admin")
    browser.screenshot("console-admin")
    browser.goto(f"{base}/console/admin/system")
    browser.screenshot("console-admin-system")
    _submit(browser, "#signout")

    # no token reached the log
    logs = log_path.read_text()
    assert ada not in logs and ADMIN_TOKEN not in logs
