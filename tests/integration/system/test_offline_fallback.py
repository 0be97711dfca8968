"""`serve` without EMBEDDING_PROVIDER and without Ollama: the offline `local` embedder,
only where it cannot strand stored vectors (app/llm/fallback.py)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from app.cli import _offline_fallback
from app.config import Settings, get_settings
from app.llm.fallback import FALLBACK_ENV, fallback_reason, offline_reason
from tests.fakes.ollama_server import FakeOllama

NO_DOTENV = Path("/nonexistent/.env")


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def absent() -> Settings:
    return Settings(ollama_host=_closed_port_url())


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("EMBEDDING_PROVIDER", "EMBEDDING_DIM", FALLBACK_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(Path(__file__).parent)  # no .env here
    yield
    for name in ("EMBEDDING_PROVIDER", FALLBACK_ENV):  # set by apply_offline_fallback
        os.environ.pop(name, None)
    get_settings.cache_clear()


def test_only_when_nothing_chose_and_ollama_is_absent_from_a_new_database(
    absent: Settings, ollama: FakeOllama, tmp_path: Path
) -> None:
    assert offline_reason(absent, set(), environ={}, dotenv=NO_DOTENV) is not None
    assert "did not answer" in str(offline_reason(absent, set(), environ={}, dotenv=NO_DOTENV))
    # chosen explicitly, in the environment or in .env
    for env in ({"EMBEDDING_PROVIDER": "ollama"}, {"EMBEDDING_DIM": "768"}):
        assert offline_reason(absent, set(), environ=env, dotenv=NO_DOTENV) is None
    dotenv = tmp_path / ".env"
    dotenv.write_text("EMBEDDING_PROVIDER=ollama\n")
    assert offline_reason(absent, set(), environ={}, dotenv=dotenv) is None
    # Ollama answers
    present = replace(absent, ollama_host=ollama.url)
    assert offline_reason(present, set(), environ={}, dotenv=NO_DOTENV) is None


def test_the_database_decides_once_it_has_vectors(absent: Settings, ollama: FakeOllama) -> None:
    with capture_logs() as logs:
        assert offline_reason(absent, {768}, environ={}, dotenv=NO_DOTENV) is None
    assert [e["event"] for e in logs] == ["embedding.ollama_unreachable"]
    # a database the local model made stays on it, Ollama present or not
    present = replace(absent, ollama_host=ollama.url)
    for s in (absent, present):
        assert "384" in str(offline_reason(s, {384}, environ={}, dotenv=NO_DOTENV))


def test_serve_switches_a_new_database_to_local_and_says_so(  # type: ignore[no-untyped-def]
    absent: Settings, clean_env, empty_db_url: str
) -> None:
    with capture_logs() as logs:
        chosen = _offline_fallback(absent, empty_db_url)
    assert chosen.embedding_provider == "local" and chosen.vector_dim == 384
    assert os.environ["EMBEDDING_PROVIDER"] == "local"  # the worker processes too
    assert fallback_reason() and "did not answer" in str(fallback_reason())
    assert [e["event"] for e in logs] == ["embedding.offline_fallback"]


def test_serve_keeps_ollama_for_a_database_with_its_vectors(  # type: ignore[no-untyped-def]
    absent: Settings, clean_env, db_url: str
) -> None:
    chosen = _offline_fallback(absent, db_url)  # migrated: vector(768) columns
    assert chosen.embedding_provider == "ollama"
    assert "EMBEDDING_PROVIDER" not in os.environ and fallback_reason() is None


async def test_health_names_the_provider_and_the_fallback(  # type: ignore[no-untyped-def]
    client, monkeypatch: pytest.MonkeyPatch
) -> None:
    health = (await client.get("/health")).json()
    assert health["embedding_provider"] == "ollama" and health["embedding_fallback"] is None
    monkeypatch.setenv(FALLBACK_ENV, "Ollama at http://x did not answer at start-up")
    health = (await client.get("/health")).json()
    assert health["embedding_fallback"] == "Ollama at http://x did not answer at start-up"
