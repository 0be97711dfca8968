"""A live Navi for the client's tests: the service of this repository (../../app) under
uvicorn on 127.0.0.1, in a thread of its own, on a fresh database of the embedded
PostgreSQL (or TEST_DATABASE_URL's server), with the suite's fake Ollama
(tests/fakes) as its model server. Started once per run (a few seconds: the
migrations); every test gets a user of its own.

Unit tests (httpx.MockTransport) need none of this: the fixtures are lazy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]  # the repository: app/ and tests/fakes
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from navi_client import Navi  # noqa: E402

ADMIN_TOKEN = "navi_client_test_admin_token_0123456789abcdefghij"
CHAT_MODEL = "fake-chat"
PROFILES = {
    # a small window, as the service's own turn tests use
    "small": {"context_window": 4096, "compression_keep_recent": 2, "model": CHAT_MODEL},
}


@dataclasses.dataclass
class Live:
    base_url: str
    admin_token: str
    ollama: Any  # tests.fakes.ollama_server.FakeOllama

    def admin(self) -> Navi:
        return Navi(self.base_url, self.admin_token)

    def new_user(self, name: str | None = None) -> tuple[str, str]:
        """A fresh user and a token of theirs: (user id, token)."""
        with self.admin() as admin:
            user = admin.admin_create_user(name or f"u-{uuid.uuid4().hex[:10]}")
            return user.id, admin.admin_issue_token(user.id, "test").token


class _Server:
    """The app under uvicorn, in a thread running its own event loop (so the tests may
    use the sync client, and the async one in theirs)."""

    def __init__(self, settings: Any, db_url: str) -> None:
        self.settings = settings
        self.db_url = db_url
        self.base_url = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="navi-live", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # start-up failed: the fixture raises it
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        from app.asgi import create_app
        from app.db.engine import create_engine
        from tests.fakes.served import serve

        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        engine = create_engine(self.db_url)
        try:
            app = create_app(self.settings, engine=engine, background_jobs=True)
            async with serve(app) as base_url:
                self.base_url = base_url
                self._ready.set()
                await self._stop.wait()
        finally:
            await engine.dispose()

    def start(self) -> str:
        self._thread.start()
        if not self._ready.wait(90):
            raise TimeoutError("the live service did not start within 90 s")
        if self._error is not None:
            raise RuntimeError("the live service failed to start") from self._error
        return self.base_url

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


def _server_url() -> str:
    from app.db.engine import normalize_url, start_embedded

    url = os.environ.get("TEST_DATABASE_URL")
    return normalize_url(url) if url else start_embedded(ROOT / ".navi-test")


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    import psycopg
    from sqlalchemy.engine import make_url

    from app.config import Settings
    from app.db import migrate
    from tests.fakes.ollama_server import FakeOllama

    server_url = _server_url()
    name = f"navi_client_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin_dsn = (
        make_url(server_url)
        .set(database="postgres")
        .render_as_string(hide_password=False)
        .replace("postgresql+psycopg://", "postgresql://", 1)
    )
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    db_url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    ollama = FakeOllama()
    ollama.start()
    server: _Server | None = None
    try:
        migrate.upgrade(db_url)
        tmp = tmp_path_factory.mktemp("navi-live")
        profiles = tmp / "profiles.json"
        profiles.write_text(json.dumps(PROFILES))
        settings = Settings(
            auth_enabled=True,
            admin_token=ADMIN_TOKEN,
            ollama_host=ollama.url,
            ollama_model=CHAT_MODEL,
            ollama_timeout=5.0,
            data_dir=str(tmp / "data"),
            profiles_file=str(profiles),
            log_json=False,
            log_level="warning",
            # the adapters' tests compare the prepared context with the conversation: the
            # default memory guidance block (a system item for profiles without a system
            # prompt of their own, tests/integration/agents/test_memory_guidance.py) off
            memory_guidance_enabled=False,
            # the jobs of a live service, less those that would take the scripted
            # model replies of a turn (titles, extraction, rolling summaries) or
            # that have nothing to do here; the live indexer stays (memory search)
            session_auto_name_enabled=False,
            extraction_interval_seconds=0,
            rolling_summary_interval_seconds=0,
            raw_index_idle_interval_seconds=0,
            error_memory_purge_seconds=0,
            session_files_cleanup_seconds=0,
            llm_max_attempts=1,
            llm_backoff_initial=0.0,
            llm_breaker_failures=100,
            turn_max_rounds=4,
        )
        server = _Server(settings, db_url)
        base_url = server.start()
        yield Live(base_url, ADMIN_TOKEN, ollama)
    finally:
        if server is not None:
            server.stop()
        ollama.stop()
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def ollama(live: Live) -> Iterator[Any]:
    """The fake model server, without scripted replies before and after the test."""
    live.ollama.reset()
    yield live.ollama
    live.ollama.reset()


@pytest.fixture
def user(live: Live) -> tuple[str, str]:
    """A user of this test: (user id, token)."""
    return live.new_user()


@pytest.fixture
def navi(live: Live, user: tuple[str, str]) -> Iterator[Navi]:
    """A sync client as this test's user."""
    with Navi(live.base_url, user[1]) as client:
        yield client


@pytest.fixture
def admin(live: Live) -> Iterator[Navi]:
    with live.admin() as client:
        yield client
