"""A real browser for the page tests: headless Chromium driven over the DevTools protocol,
against the app served by uvicorn (a subprocess) on the test database.

Chromium comes from Debian's `chromium` package (.ci/run installs it). Without it a
browser test is skipped locally and fails in CI (CI=true), so CI can never pass it
silently. Fixtures: `server` (base url, log path), `browser` (a `Browser`).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN
from tests.fakes.ollama_server import FakeOllama

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
]
TIMEOUT = 30.0
SCREENSHOT_DIR = Path(os.environ.get("NAVI_SCREENSHOT_DIR") or ROOT / ".navi-test" / "screenshots")


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path:
        return path
    reason = "Chromium is not installed (apt-get install chromium chromium-driver)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}: CI must run the browser test")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(predicate, what: str, timeout: float = TIMEOUT) -> Any:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as exc:  # not up yet
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def child_pids(parent: int) -> set[int]:
    """The processes whose parent is `parent` (from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            out.add(int(stat.parent.name))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def app_env(db_url: str, ollama: FakeOllama, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of the service run as a subprocess on the test database: auth on
    with ADMIN_TOKEN, the fake Ollama, no periodic extraction, JSON logs; `extra` on top."""
    return {
        **os.environ,
        "DATABASE_URL": db_url,
        "NAVI_DATA_DIR": str(tmp_path / "data"),
        "NAVI_AUTH_ENABLED": "true",
        "NAVI_ADMIN_TOKEN": ADMIN_TOKEN,
        "OLLAMA_HOST": ollama.url,
        "EMBEDDING_OLLAMA_HOST": ollama.url,
        "OLLAMA_TIMEOUT": "2",
        "MEMORY_EXTRACTION_INTERVAL_SECONDS": "0",
        "LOG_JSON": "true",
        "LOG_LEVEL": "info",
        "PYTHONPATH": str(ROOT),
        **extra,
    }


@pytest.fixture
def server_env() -> dict[str, str]:
    """More environment for the `server` fixture's app (a test module may override it)."""
    return {}


@pytest.fixture
def server(
    db_url: str, ollama: FakeOllama, tmp_path: Path, server_env: dict[str, str]
) -> Iterator[tuple[str, Path]]:
    """The app under uvicorn on 127.0.0.1:<free port>; yields (base url, its log file)."""
    port = _free_port()
    env = app_env(db_url, ollama, tmp_path, **server_env)
    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                *("-m", "uvicorn", "--factory", "app.asgi:create_app"),
                *("--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"),
            ],
            cwd=tmp_path,  # no stray .env
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {log_path.read_text()[-2000:]}")
            return httpx.get(f"{base}/health", timeout=2).status_code in (200, 503)

        deadline = time.monotonic() + 60
        while True:
            try:
                if up():
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"server did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        yield base, log_path
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Browser:
    """A minimal Chrome DevTools protocol client over one page target."""

    def __init__(self, ws_url: str) -> None:
        from websockets.sync.client import connect

        self.ws = connect(ws_url, max_size=None, open_timeout=TIMEOUT)
        self.ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            reply = json.loads(self.ws.recv(timeout=TIMEOUT))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
        raise AssertionError(f"{method}: no reply")

    def js(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_js(self, expression: str, what: str) -> Any:
        return _wait(lambda: self.js(expression), what)

    def click(self, selector: str) -> None:
        """A real mouse click at the element's centre (not element.click())."""
        box = self.js(
            f"""(() => {{
                const el = document.querySelector({json.dumps(selector)});
                el.scrollIntoView({{block: "center"}});
                const r = el.getBoundingClientRect();
                return {{x: r.left + r.width / 2, y: r.top + r.height / 2}};
            }})()"""
        )
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                type=kind,
                x=box["x"],
                y=box["y"],
                button="left" if kind != "mouseMoved" else "none",
                clickCount=1 if kind != "mouseMoved" else 0,
            )

    def goto(self, url: str) -> None:
        """Navigate and wait until the document has loaded."""
        self.call("Page.navigate", url=url)
        self.wait_js(
            "document.readyState === 'complete' && !location.href.startsWith('about:')",
            f"{url} to load",
        )

    def wait_load(self) -> None:
        """After a click that submits a form or follows a link: the next document."""
        time.sleep(0.15)
        self.wait_js("document.readyState === 'complete'", "the page to load")

    def type(self, selector: str, text: str) -> None:
        """Focus the field and type into it (as keystrokes insert text), replacing it."""
        self.js(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
            " el.focus(); el.select && el.select(); return true; })()"
        )
        self.call("Input.insertText", text=text)

    def press_enter(self) -> None:
        for kind in ("keyDown", "keyUp"):
            self.call(
                "Input.dispatchKeyEvent",
                type=kind,
                key="Enter",
                code="Enter",
                windowsVirtualKeyCode=13,
                text="\r" if kind == "keyDown" else "",
            )

    def text(self, selector: str) -> str:
        return str(
            self.js(
                f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
                " return el ? el.textContent : ''; })()"
            )
        )

    def screenshot(self, name: str, *, full_page: bool = True) -> Path:
        """A full-page PNG under SCREENSHOT_DIR (NAVI_SCREENSHOT_DIR, default
        .navi-test/screenshots): every page test leaves its pictures there. A full page
        does not paint the frames (PDF, sandboxed SVG) below the first 800 px: scroll
        them into view and take the viewport (`full_page=False`)."""
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=1200,
            height=800,
            deviceScaleFactor=1,
            mobile=False,
        )
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=full_page)
        path = SCREENSHOT_DIR / f"{name}.png"
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        self.ws.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _launch(chromium: str, tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Chromium and its DevTools port. A start that writes no port file in TIMEOUT is
    retried once in a fresh profile (seen once in CI: a headless start that never came
    up, on an idle machine); the second failure fails the test with Chromium's stderr."""
    for attempt in (1, 2):
        profile = tmp_path / f"chromium-profile-{attempt}"
        profile.mkdir()
        with (profile.parent / f"chromium-{attempt}.log").open("wb") as err:
            proc = subprocess.Popen(
                [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        port_file = profile / "DevToolsActivePort"
        try:
            return proc, _wait(
                lambda f=port_file: f.exists() and f.read_text().split("\n")[0].strip(),
                "Chromium's DevTools port",
            )
        except AssertionError as exc:
            _stop(proc)
            if attempt == 2:
                log = (profile.parent / f"chromium-{attempt}.log").read_text(errors="replace")
                raise AssertionError(
                    f"Chromium did not start twice; stderr: {log[-2000:]}"
                ) from exc
    raise AssertionError("unreachable")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    proc, port = _launch(_chromium(), tmp_path)
    try:

        def page_target() -> str | None:
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=2).json()
            pages = [t for t in targets if t.get("type") == "page"]
            return pages[0]["webSocketDebuggerUrl"] if pages else None

        b = Browser(_wait(page_target, "a page target"))
        try:
            b.call("Page.enable")
            b.call("Runtime.enable")
            yield b
        finally:
            b.close()
    finally:
        _stop(proc)


def shown(selector: str) -> str:
    """JS: is the element rendered (not merely lacking a `hidden` attribute)?"""
    return (
        f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
        " return !!el && getComputedStyle(el).display !== 'none'"
        " && el.getClientRects().length > 0; })()"
    )
