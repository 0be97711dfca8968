"""Fixtures for the LLM gateway tests: a fake Ollama server and gateways pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from app.llm.gateway import LLMGateway
from tests.fakes.ollama_server import FakeOllama

DIM = 64
EMBED_MODEL = "fake-embed"
CHAT_MODEL = "fake-chat"


@pytest.fixture(scope="module")
def _server() -> Iterator[FakeOllama]:
    with FakeOllama(dim=DIM, slow_seconds=2.0) as fake:
        yield fake


@pytest.fixture
def fake(_server: FakeOllama) -> Iterator[FakeOllama]:
    """A running fake server, reset (no failure mode, no recorded requests) for each test."""
    _server.reset()
    _server.slow_seconds = 2.0
    yield _server
    _server.reset()


GatewayFactory = Callable[..., LLMGateway]


@pytest.fixture
async def make_gateway(fake: FakeOllama) -> AsyncIterator[GatewayFactory]:
    """Build gateways against the fake with fast test defaults; all are closed afterwards."""
    made: list[LLMGateway] = []

    def factory(**overrides: Any) -> LLMGateway:
        params: dict[str, Any] = {
            "chat_host": fake.url,
            "embed_host": None,
            "embed_api_key": None,
            "embed_model": EMBED_MODEL,
            "embed_dim": DIM,
            "chat_model": CHAT_MODEL,
            "timeout": 2.0,
            "embed_batch_size": 4,
            "max_attempts": 3,
            "backoff_initial": 0.01,
            "backoff_max": 0.05,
        }
        params.update(overrides)
        gw = LLMGateway(**params)
        made.append(gw)
        return gw

    yield factory
    for gw in made:
        await gw.aclose()


@pytest.fixture
async def gateway(make_gateway: GatewayFactory) -> LLMGateway:
    return make_gateway()
