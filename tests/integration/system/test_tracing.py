"""OTEL_EXPORTER_OTLP_ENDPOINT set: requests are traced and exported over OTLP/HTTP (to a
collector stand-in here); unset: no OpenTelemetry SDK is even imported."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.config import Settings


class _Collector(BaseHTTPRequestHandler):
    posts: list[tuple[str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        _Collector.posts.append((self.path, body))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[str]:
    _Collector.posts = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_requests_are_exported_as_spans(
    make_client, settings: Settings, collector: str
) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, otel_endpoint=collector) as client:
        r = await client.get("/me", headers={"Authorization": f"Bearer {settings.admin_token}"})
        assert r.status_code == 200
    # leaving the client shut the app down: the provider flushed its batch
    paths = [path for path, _ in _Collector.posts]
    assert "/v1/traces" in paths
    body = b"".join(b for p, b in _Collector.posts if p == "/v1/traces")
    assert b"navi" in body and b"/me" in body  # the service's name, the route


def test_without_the_setting_nothing_of_opentelemetry_is_imported() -> None:
    code = (
        "import sys\n"
        "from app.asgi import create_app\n"
        "from app.config import Settings\n"
        "create_app(Settings(auth_enabled=False))\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk'))\n"
        "assert not loaded, loaded\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
