"""The benches that drive the real app in-process as an agent runtime would (LoCoMo,
breadcrumbs, context modes): the app on a bench database with the fake Ollama server,
its settings and profiles, and the prepare → append turn with the 422 fallback.

Import it after `_embedder.select_embedder` (it imports the app)."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from _app import FakeOllama, Settings, create_app, create_engine, get_settings
from _common import Target

ADMIN_TOKEN = "bench-admin-token-0123456789abcdef0123456789"


def ok(r: Any, what: str, status: int = 200) -> dict[str, Any]:
    """The JSON body of a response with the expected status, else an error saying why."""
    if r.status_code != status:
        raise RuntimeError(f"{what}: {r.status_code} {r.text[:400]}")
    return dict(r.json())


def compressions(body: dict[str, Any]) -> int:
    """ContextCompressed events in a prepare or append response."""
    return sum(e["type"] == "ContextCompressed" for e in body.get("events", []))


async def prepare(
    client: Any, sid: str, prepare_body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[Any, bool]:
    """`POST /sessions/{sid}/prepare`; a 422 `context_too_large` is answered as an agent
    runtime does: a forced `/compact`, then the prepare again. (response, forced)."""
    kw: dict[str, Any] = {"headers": headers} if headers else {}
    r = await client.post(f"/sessions/{sid}/prepare", json=prepare_body, **kw)
    if r.status_code == 422 and "context_too_large" in r.text:
        await client.post(f"/sessions/{sid}/compact", json={}, **kw)
        return await client.post(f"/sessions/{sid}/prepare", json=prepare_body, **kw), True
    return r, False


# the app quiet and without its periodic work: the benches run what they measure
QUIET: dict[str, Any] = {
    "log_level": "warning",
    "log_json": False,
    "extraction_interval_seconds": 0,
}


def app_files(profiles: dict[str, Any], prefix: str = "navi-bench-") -> dict[str, str]:
    """Settings of a temporary folder: its profiles.json and the app's data_dir."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    (tmp / "profiles.json").write_text(json.dumps(profiles))
    return {"data_dir": str(tmp / "data"), "profiles_file": str(tmp / "profiles.json")}


def agent_settings(fake_url: str, profiles: dict[str, Any], embedder: str) -> Settings:
    """The environment's settings, auth on with ADMIN_TOKEN, the fake Ollama as the LLM
    (and as the embedder unless `embedder` is "local"), no background work, no recall."""
    return dataclasses.replace(
        get_settings(),
        auth_enabled=True,
        admin_token=ADMIN_TOKEN,
        ollama_host=fake_url,
        ollama_model="fake-chat:latest",
        embedding_provider="local" if embedder == "local" else "ollama",
        ollama_timeout=30.0,
        memory_recall_enabled=False,  # prepare's recall is not what is measured here
        **app_files(profiles),
        **QUIET,
    )


@dataclasses.dataclass
class Api:
    client: Any  # litestar.testing.AsyncTestClient
    app: Any
    fake: FakeOllama
    settings: Settings


@asynccontextmanager
async def in_process_api(
    target: Target,
    make_settings: Callable[[str], Settings],
    fake: FakeOllama | None = None,
    token: str | None = ADMIN_TOKEN,
    background_jobs: bool = False,
) -> AsyncIterator[Api]:
    """The app (create_app, no background jobs unless asked) on `target` with the fake
    Ollama server started; `make_settings(fake_url)` gives its settings; requests carry
    `token`."""
    from litestar.testing import AsyncTestClient

    fake = fake or FakeOllama(dim=get_settings().vector_dim)
    engine = create_engine(target.url)
    fake.start()
    try:
        settings = make_settings(fake.url)
        app = create_app(settings, engine=engine, background_jobs=background_jobs)
        async with AsyncTestClient(app, raise_server_exceptions=True, timeout=120) as client:
            if token:
                client.headers["Authorization"] = f"Bearer {token}"
            yield Api(client, app, fake, settings)
    finally:
        fake.stop()
        await engine.dispose()


def agent_api(
    target: Target, profiles: dict[str, Any], embedder: str, *, live_index: bool = False
) -> Any:
    """`in_process_api` with `agent_settings` (auth on, requests as the admin); with
    `live_index`, the app's background jobs run with the live indexer among them (the
    idle-session job off, so it indexes nothing behind the live one's back)."""

    def settings(url: str) -> Settings:
        base = agent_settings(url, profiles, embedder)
        if not live_index:
            return base
        return dataclasses.replace(
            base, raw_index_idle_enabled=False, rolling_summary_interval_seconds=0
        )

    return in_process_api(target, settings, background_jobs=live_index)
