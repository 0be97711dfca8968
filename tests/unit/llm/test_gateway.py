"""LLMGateway against the fake Ollama server: happy paths and every failure mode."""

from __future__ import annotations

import time

import ollama
import pytest
from structlog.testing import capture_logs

from app.llm.gateway import (
    ChatResult,
    EmbeddingDimensionError,
    LLMError,
    LLMGateway,
    LLMRequestError,
    LLMUnavailableError,
)
from tests.fakes.ollama_server import FakeOllama, cosine, fake_embedding

from .conftest import CHAT_MODEL, DIM, EMBED_MODEL, GatewayFactory

USER = [{"role": "user", "content": "Summarise our talk about the vector index"}]


# --------------------------------------------------------------------------- embeddings
async def test_embed_dims_batching_and_order(gateway: LLMGateway, fake: FakeOllama) -> None:
    texts = [f"text number {i}" for i in range(10)]
    vectors = await gateway.embed(texts)
    assert len(vectors) == 10
    assert all(len(v) == DIM for v in vectors)
    assert vectors == [fake_embedding(t, DIM) for t in texts]  # order preserved
    assert fake.count("/api/embed") == 3  # batch size 4 -> 4 + 4 + 2
    bodies = fake.requests_for("/api/embed")
    assert [len(b["input"]) for b in bodies] == [4, 4, 2]
    assert all(b["model"] == EMBED_MODEL for b in bodies)


async def test_embed_empty_makes_no_request(gateway: LLMGateway, fake: FakeOllama) -> None:
    assert await gateway.embed([]) == []
    assert fake.count("/api/embed") == 0


async def test_embed_rejects_bare_string(gateway: LLMGateway) -> None:
    with pytest.raises(TypeError):
        await gateway.embed("not a list")  # type: ignore[arg-type]


async def test_embed_one(gateway: LLMGateway, fake: FakeOllama) -> None:
    vec = await gateway.embed_one("hello world")
    assert vec == fake_embedding("hello world", DIM)
    assert fake.count("/api/embed") == 1


async def test_similar_texts_are_closer(make_gateway: GatewayFactory) -> None:
    gw = make_gateway(embed_dim=DIM)
    anchor, similar, unrelated = await gw.embed(
        [
            "the user prefers dark mode in the editor",
            "user prefers the editor in dark mode",
            "quarterly tax filing deadline for the company",
        ]
    )
    assert cosine(anchor, similar) > 0.8
    assert cosine(anchor, similar) > cosine(anchor, unrelated) + 0.3


async def test_separate_embed_host_with_api_key(
    make_gateway: GatewayFactory, fake: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    secret = "sk-test-secret-123"
    with FakeOllama(dim=DIM) as embed_server:
        gw = make_gateway(embed_host=embed_server.url, embed_api_key=secret)
        await gw.embed(["a"])
        await gw.chat(USER)
        assert embed_server.count("/api/embed") == 1 and fake.count("/api/embed") == 0
        assert fake.count("/api/chat") == 1 and embed_server.count("/api/chat") == 0
        (_, embed_headers), *_ = embed_server.request_headers
        assert embed_headers["authorization"] == f"Bearer {secret}"
        (_, chat_headers), *_ = fake.request_headers
        assert "authorization" not in chat_headers
        assert secret not in repr(gw)

        # the key never shows up in retry / failure logs
        embed_server.fail("http500")
        with capture_logs() as logs, pytest.raises(LLMUnavailableError):
            await gw.embed(["a"])
        assert [e["event"] for e in logs].count("llm.retry") == 2
        assert secret not in repr(logs)


# --------------------------------------------------------------------------- chat
async def test_chat_returns_scripted_reply(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.chat_replies = ["- point one\nKEYS: NONE"]
    result = await gateway.chat(USER, temperature=0.1, max_tokens=50)
    assert isinstance(result, ChatResult)
    assert result.content == "- point one\nKEYS: NONE"
    assert result.prompt_eval_count == 7  # word tokens of the prompt, per the fake
    assert result.eval_count == 4
    assert result.model == CHAT_MODEL
    assert result.done_reason == "stop"
    (body,) = fake.requests_for("/api/chat")
    assert body["stream"] is False
    assert body["think"] is False
    assert body["options"] == {"temperature": 0.1, "num_predict": 50}
    assert body["messages"] == USER


async def test_chat_model_override_options_and_callable_reply(
    gateway: LLMGateway, fake: FakeOllama
) -> None:
    fake.chat_replies = [lambda req: f"model={req['model']} n={len(req['messages'])}"]
    messages = [{"role": "system", "content": "be brief"}, *USER]
    result = await gateway.chat(
        messages, model="other-model", think=None, options={"num_ctx": 4096}
    )
    assert result.content == "model=other-model n=2"
    assert result.model == "other-model"
    (body,) = fake.requests_for("/api/chat")
    assert "think" not in body
    assert body["options"] == {"num_ctx": 4096}


async def test_chat_default_reply_when_queue_empty(gateway: LLMGateway) -> None:
    result = await gateway.chat(USER)
    assert result.content.endswith("KEYS: NONE")


async def test_chat_invalid_message_is_request_error_without_io(
    gateway: LLMGateway, fake: FakeOllama
) -> None:
    with pytest.raises(LLMRequestError):
        await gateway.chat([{"content": "no role"}])
    assert fake.count("/api/chat") == 0


# --------------------------------------------------------------------------- failure modes
async def test_refused_then_recovers(make_gateway: GatewayFactory, fake: FakeOllama) -> None:
    """Retries, and recovery at once (the circuit breaker, which would hold calls back
    for an interval, is tested in test_breaker_and_deadline.py)."""
    gateway = make_gateway(breaker_failures=100)
    fake.fail("refuse")
    with capture_logs() as logs, pytest.raises(LLMUnavailableError) as info:
        await gateway.embed(["x"])
    err = info.value
    assert isinstance(err, LLMError)
    assert err.attempts == 3
    assert isinstance(err.cause, ConnectionError)
    assert err.__cause__ is err.cause
    retries = [e for e in logs if e["event"] == "llm.retry"]
    assert [e["attempt"] for e in retries] == [1, 2]
    assert {e["error_kind"] for e in retries} == {"connect"}

    with pytest.raises(LLMUnavailableError):
        await gateway.chat(USER)

    fake.recover()
    assert len(await gateway.embed(["x"])) == 1
    assert (await gateway.chat(USER)).content


async def test_slow_beyond_timeout_is_unavailable(
    make_gateway: GatewayFactory, fake: FakeOllama
) -> None:
    gw = make_gateway(timeout=0.2)
    fake.slow_seconds = 2.0
    fake.fail("slow")
    started = time.monotonic()
    with capture_logs() as logs, pytest.raises(LLMUnavailableError) as info:
        await gw.chat(USER)
    assert time.monotonic() - started < 1.5
    assert info.value.attempts == 3
    assert fake.count("/api/chat") == 3
    assert {e["error_kind"] for e in logs if e["event"] == "llm.retry"} == {"timeout"}


async def test_http500_twice_then_ok(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.fail("http500", times=2)
    vectors = await gateway.embed(["retry me"])
    assert len(vectors[0]) == DIM
    assert fake.count("/api/embed") == 3


async def test_http500_twice_then_ok_chat(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.chat_replies = ["finally"]
    fake.fail("http500", times=2)
    assert (await gateway.chat(USER)).content == "finally"
    assert fake.count("/api/chat") == 3


async def test_http500_always_is_unavailable(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.fail("http500")
    with capture_logs() as logs, pytest.raises(LLMUnavailableError) as info:
        await gateway.chat(USER)
    assert fake.count("/api/chat") == 3
    assert isinstance(info.value.cause, ollama.ResponseError)
    assert info.value.cause.status_code == 500
    assert {e["error_kind"] for e in logs if e["event"] == "llm.retry"} == {"http500"}


async def test_malformed_is_retried_then_unavailable(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.fail("malformed")
    with capture_logs() as logs, pytest.raises(LLMUnavailableError) as info:
        await gateway.embed(["x"])
    assert fake.count("/api/embed") == 3
    assert isinstance(info.value.cause, ValueError)
    assert {e["error_kind"] for e in logs if e["event"] == "llm.retry"} == {"malformed"}


async def test_malformed_once_then_ok(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.fail("malformed", times=1)
    assert (await gateway.chat(USER)).content
    assert fake.count("/api/chat") == 2


@pytest.mark.parametrize(("mode", "status"), [("http404", 404), ("http400", 400)])
async def test_4xx_is_request_error_without_retry(
    gateway: LLMGateway, fake: FakeOllama, mode: str, status: int
) -> None:
    fake.fail(mode)
    with capture_logs() as logs, pytest.raises(LLMRequestError) as info:
        await gateway.embed(["x"])
    assert fake.count("/api/embed") == 1
    assert info.value.status_code == status
    assert not [e for e in logs if e["event"] == "llm.retry"]

    with pytest.raises(LLMRequestError):
        await gateway.chat(USER)
    assert fake.count("/api/chat") == 1


async def test_http404_message(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.fail("http404")
    with pytest.raises(LLMRequestError, match=f"model '{CHAT_MODEL}' not found"):
        await gateway.chat(USER)


async def test_wrong_dim_raises_dimension_error_without_retry(
    gateway: LLMGateway, fake: FakeOllama
) -> None:
    fake.fail("wrong_dim")
    with pytest.raises(EmbeddingDimensionError) as info:
        await gateway.embed(["x", "y"])
    assert (info.value.expected, info.value.got, info.value.model) == (
        DIM,
        fake.wrong_dim,
        EMBED_MODEL,
    )
    assert fake.count("/api/embed") == 1


async def test_single_attempt_means_no_retry(
    make_gateway: GatewayFactory, fake: FakeOllama
) -> None:
    gw = make_gateway(max_attempts=1)
    fake.fail("http500")
    with pytest.raises(LLMUnavailableError) as info:
        await gw.embed(["x"])
    assert info.value.attempts == 1
    assert fake.count("/api/embed") == 1


# --------------------------------------------------------------------------- health
async def test_ping_ok(gateway: LLMGateway, fake: FakeOllama) -> None:
    assert await gateway.ping() is True
    assert fake.count("/api/version") == 1


async def test_ping_false_within_timeout_when_slow(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.slow_seconds = 3.0
    fake.fail("slow")
    started = time.monotonic()
    assert await gateway.ping(timeout=1.0) is False
    assert time.monotonic() - started < 1.3


async def test_ping_false_quickly_when_refused(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.fail("refuse")
    started = time.monotonic()
    assert await gateway.ping(timeout=1.0) is False
    assert time.monotonic() - started < 1.0
    fake.recover()
    assert await gateway.ping() is True


async def test_check_embedding_ok(gateway: LLMGateway) -> None:
    health = await gateway.check_embedding(timeout=1.0)
    assert health.reachable and health.ok
    assert (health.dim, health.expected_dim, health.error) == (DIM, DIM, None)


async def test_check_embedding_wrong_dim(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.fail("wrong_dim")
    health = await gateway.check_embedding(timeout=1.0)
    assert health.reachable and not health.ok
    assert health.dim == fake.wrong_dim
    assert health.error is not None and "dimension" in health.error


async def test_check_embedding_unknown_model(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.fail("http404")
    health = await gateway.check_embedding(timeout=1.0)
    assert health.reachable and not health.ok
    assert health.error is not None and "not found" in health.error
    assert fake.count("/api/embed") == 1  # no retries in health checks


async def test_check_embedding_unreachable(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.fail("refuse")
    health = await gateway.check_embedding(timeout=1.0)
    assert not health.reachable and not health.ok
    assert health.error


async def test_check_embedding_slow(gateway: LLMGateway, fake: FakeOllama) -> None:
    fake.fail("slow")
    started = time.monotonic()
    health = await gateway.check_embedding(timeout=0.3)
    assert time.monotonic() - started < 1.0
    assert not health.reachable and health.error is not None and "timed out" in health.error


async def test_aclose_is_idempotent(make_gateway: GatewayFactory) -> None:
    gw = make_gateway()
    await gw.aclose()
    await gw.aclose()
    async with make_gateway() as gw2:
        assert await gw2.ping()
