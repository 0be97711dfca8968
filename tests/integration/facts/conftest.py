"""Facts fixtures: clients and a gateway with test-sized LLM retries, a session factory."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import session_factory
from app.llm.gateway import LLMGateway
from tests.conftest import ADMIN_TOKEN

FAST_RETRIES = {"llm_max_attempts": 2, "llm_backoff_initial": 0.01}


def sql(db_url: str, statement: str, *params: Any) -> list[tuple[Any, ...]] | None:
    with psycopg.connect(
        db_url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True
    ) as conn:
        cur = conn.execute(statement, params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else None


@pytest.fixture
def fast_settings(settings: Settings) -> Settings:
    return dataclasses.replace(settings, **FAST_RETRIES)


@pytest.fixture
async def llm(fast_settings: Settings) -> AsyncIterator[LLMGateway]:
    """The gateway the app builds, with 2 attempts and ~10 ms backoff."""
    from app.llm.factory import build_gateway

    gw = build_gateway(fast_settings)
    yield gw
    await gw.aclose()


@pytest.fixture
def factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return session_factory(engine)


@pytest.fixture
def make_fast_client(make_client):  # type: ignore[no-untyped-def]
    """make_client with test-sized LLM retries."""

    def build(s: Settings, **overrides: Any) -> AsyncTestClient:
        return make_client(s, **{**FAST_RETRIES, **overrides})

    return build


@pytest.fixture
async def client(make_fast_client, settings: Settings) -> AsyncIterator[AsyncTestClient]:  # type: ignore[no-untyped-def]
    """The admin client of tests/conftest.py, with fast LLM retries. POST /sessions does
    not start extraction here: tests run their passes themselves."""
    async with make_fast_client(settings, extraction_enabled=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c
