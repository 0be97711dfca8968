"""The gateway's circuit breaker (an absent Ollama costs one failed probe per interval)
and the per-request deadline, against the fake Ollama server; the clock is injected."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs

from app.llm.breaker import CLOSED, HALF_OPEN, OPEN, CircuitBreaker
from app.llm.deadline import llm_deadline, remaining
from app.llm.gateway import LLMUnavailableError
from tests.fakes.ollama_server import FakeOllama

from .conftest import GatewayFactory

USER = [{"role": "user", "content": "hello"}]


@pytest.fixture(autouse=True)
def _info_lines() -> Iterator[None]:
    """The breaker's info lines pass whatever level an earlier test configured."""
    before = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    yield
    structlog.configure(**before)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _events(logs: list[dict], level: str | None = None) -> list[str]:
    return [e["event"] for e in logs if level is None or e["log_level"] == level]


# --------------------------------------------------------------------------- breaker alone
def test_breaker_opens_after_the_threshold_half_opens_and_closes() -> None:
    clock = Clock()
    b = CircuitBreaker("http://h", failures=2, reset_after=30, clock=clock)
    assert b.allow() and b.state == CLOSED
    b.failure()
    assert b.state == CLOSED and b.allow()
    b.failure()
    assert b.state == OPEN and not b.allow()
    clock.now += 29.9
    assert not b.allow()
    clock.now += 0.1
    assert b.allow() and b.state == HALF_OPEN  # this caller is the probe
    assert not b.allow()  # one probe at a time
    b.failure()  # the probe failed: another interval
    assert b.state == OPEN and not b.allow()
    clock.now += 30
    assert b.allow()
    b.success()
    assert b.state == CLOSED and b.allow()


def test_a_success_resets_the_count_and_an_abandoned_probe_reopens() -> None:
    clock = Clock()
    b = CircuitBreaker("http://h", failures=2, reset_after=5, clock=clock)
    b.failure()
    b.success()
    b.failure()
    assert b.state == CLOSED  # not two in a row
    b.failure()
    clock.now += 5
    assert b.allow()
    b.abandon()  # the probe was cancelled (deadline): counted as failed
    assert b.state == OPEN and b.retry_in() == 5


# --------------------------------------------------------------------------- breaker in the gateway
async def test_absent_ollama_costs_one_failed_probe_per_interval(
    make_gateway: GatewayFactory, fake: FakeOllama
) -> None:
    clock = Clock()
    gw = make_gateway(breaker_failures=3, breaker_reset_seconds=30, clock=clock)
    fake.fail("refuse")
    with capture_logs() as logs, pytest.raises(LLMUnavailableError) as first:
        await gw.embed(["x"])
    assert first.value.attempts == 3  # the call that found it gone retried
    assert _events(logs, "warning").count("llm.breaker_open") == 1
    assert "llm.unavailable" not in _events(logs)  # the breaker's line says it
    assert gw.breaker_states() == {"chat": OPEN, "embed": OPEN}  # one host, one breaker

    # Open: every call fails at once, with no attempt and no log line.
    with capture_logs() as logs:
        for call in (gw.embed(["y"]), gw.chat(USER), gw.embed_one("z")):
            started = time.monotonic()
            with pytest.raises(LLMUnavailableError, match="taken as absent") as info:
                await call
            assert time.monotonic() - started < 0.05
            assert info.value.attempts == 0
    assert logs == []

    # Due: one probe, one attempt; it fails, so the breaker stays open another interval.
    clock.now += 30
    with capture_logs() as logs, pytest.raises(LLMUnavailableError) as probe:
        await gw.embed(["p"])
    assert probe.value.attempts == 1
    assert _events(logs) == ["llm.breaker_probe_failed"]
    with pytest.raises(LLMUnavailableError, match="taken as absent"):
        await gw.embed(["q"])

    # Back: the next probe succeeds and closes it; calls go through again.
    fake.recover()
    with pytest.raises(LLMUnavailableError, match="taken as absent"):
        await gw.embed(["still within the interval"])
    clock.now += 30
    with capture_logs() as logs:
        assert len(await gw.embed(["hello"])) == 1
    assert _events(logs) == ["llm.breaker_closed"]
    assert gw.breaker_states()["embed"] == CLOSED
    assert (await gw.chat(USER)).content


async def test_only_the_probe_goes_while_half_open(
    make_gateway: GatewayFactory, fake: FakeOllama
) -> None:
    clock = Clock()
    gw = make_gateway(breaker_failures=1, breaker_reset_seconds=10, clock=clock)
    fake.fail("refuse")
    with pytest.raises(LLMUnavailableError):
        await gw.embed(["x"])
    fake.recover()
    fake.slow_seconds = 0.3
    fake.fail("slow", times=1)
    clock.now += 10
    probe = asyncio.create_task(gw.embed(["probe"]))
    await asyncio.sleep(0.05)
    assert gw.breaker_states()["embed"] == HALF_OPEN
    with pytest.raises(LLMUnavailableError, match="taken as absent"):
        await gw.embed(["meanwhile"])
    assert len(await probe) == 1
    assert gw.breaker_states()["embed"] == CLOSED
    assert fake.count("/api/embed") == 1  # the waiting call sent nothing


async def test_errors_from_a_present_server_do_not_open_it(
    make_gateway: GatewayFactory, fake: FakeOllama
) -> None:
    gw = make_gateway(breaker_failures=1)
    fake.fail("http500")
    with pytest.raises(LLMUnavailableError):
        await gw.embed(["x"])
    assert fake.count("/api/embed") == 3  # retried as before
    assert gw.breaker_states()["embed"] == CLOSED


# --------------------------------------------------------------------------- deadline
async def test_a_slow_model_call_ends_at_the_request_deadline(
    make_gateway: GatewayFactory, fake: FakeOllama
) -> None:
    gw = make_gateway(timeout=30)
    fake.slow_seconds = 5
    fake.fail("slow")
    with llm_deadline(0.5):
        started = time.monotonic()
        with pytest.raises(LLMUnavailableError, match="deadline"):
            await gw.embed(["x"])
        assert 0.45 < time.monotonic() - started < 0.8
        # Spent: the next call of the same request fails at once and sends nothing.
        sent = fake.count("/api/embed")
        started = time.monotonic()
        with pytest.raises(LLMUnavailableError, match="deadline"):
            await gw.chat(USER)
        assert time.monotonic() - started < 0.05
        assert fake.count("/api/chat") == 0 and fake.count("/api/embed") == sent
    assert remaining() is None
    assert gw.breaker_states()["embed"] == CLOSED  # slow is not absent
    fake.recover()
    assert len(await gw.embed(["no deadline outside a request"])) == 1


async def test_the_deadline_also_cuts_retries_short(
    make_gateway: GatewayFactory, fake: FakeOllama
) -> None:
    gw = make_gateway(backoff_initial=2.0, backoff_max=2.0, breaker_failures=100)
    fake.fail("http500")
    with llm_deadline(0.4):
        started = time.monotonic()
        with pytest.raises(LLMUnavailableError, match="deadline"):
            await gw.embed(["x"])
        assert time.monotonic() - started < 0.7
    assert fake.count("/api/embed") == 1  # the backoff sleep was cut by the deadline
