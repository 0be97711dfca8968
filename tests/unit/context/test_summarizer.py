"""The summary call against the fake Ollama HTTP server (no database)."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import AsyncIterator

import pytest

from app.config import Settings
from app.domain.compression import Msg
from app.domain.context.summarizer import LLMSummarizer, SummaryError, merge_keys
from app.domain.kernel.profiles import Profile, load_profiles
from app.llm.gateway import LLMGateway, LLMUnavailableError
from tests.fakes.ollama_server import FakeOllama
from tests.unit.compression.images import png


@pytest.fixture
async def gateway(ollama: FakeOllama) -> AsyncIterator[LLMGateway]:
    gw = LLMGateway(
        chat_host=ollama.url,
        embed_host=None,
        embed_api_key=None,
        embed_model="fake-embed",
        embed_dim=768,
        chat_model="fake-chat",
        timeout=2.0,
        max_attempts=2,
        backoff_initial=0.01,
        backoff_max=0.02,
    )
    yield gw
    await gw.aclose()


SETTINGS = Settings(context_summary_temperature=0.25, ollama_model="fake-chat")


def _profile(**kw: object) -> Profile:
    return dataclasses.replace(load_profiles(SETTINGS).get("default"), **kw)  # type: ignore[arg-type]


def _chat_requests(fake: FakeOllama) -> list[dict]:
    return [body for path, body in fake.requests if path == "/api/chat"]


async def test_summary_request_and_keys(gateway: LLMGateway, ollama: FakeOllama) -> None:
    ollama.chat_replies = ["- user set up nginx\n- port 8080 chosen\n**KEYS:** nginx, port 8080"]
    msgs = [Msg("user", "please configure nginx on 8080"), Msg("assistant", "done")]
    out = await LLMSummarizer(gateway, SETTINGS)(
        msgs, profile=_profile(summary_max_tokens=321), window=8192
    )
    assert out.text == "- user set up nginx\n- port 8080 chosen"
    assert out.keys == ["nginx", "port 8080"]
    (req,) = _chat_requests(ollama)
    assert req["think"] is False and req["model"] == "fake-chat"
    assert req["options"] == {"temperature": 0.25, "num_predict": 321}
    system, user = req["messages"]
    assert system["role"] == "system" and "KEYS:" in system["content"]
    assert "User: please configure nginx on 8080" in user["content"]
    assert "Assistant: done" in user["content"]
    assert not user.get("images")


async def test_images_only_for_vision_profiles(gateway: LLMGateway, ollama: FakeOllama) -> None:
    img = png(64, 64)
    msgs = [Msg("user", "look", images=[img]), Msg("assistant", "a cat")]
    s = LLMSummarizer(gateway, SETTINGS)
    out = await s(msgs, profile=_profile(vision=True), window=8192)
    assert out.images_sent == 1
    out = await s(msgs, profile=_profile(vision=False), window=8192)
    assert out.images_sent == 0 and out.images_omitted == 1
    first, second = _chat_requests(ollama)
    assert first["messages"][1]["images"] == [base64.b64encode(img).decode()]
    assert not second["messages"][1].get("images")
    assert "[+ 1 image(s)]" in second["messages"][1]["content"]


async def test_custom_prompt_is_the_system_message(gateway: LLMGateway, ollama: FakeOllama) -> None:
    await LLMSummarizer(gateway, SETTINGS)(
        [Msg("user", "x")], profile=_profile(summary_prompt="PIRATE PROMPT"), window=4096
    )
    assert _chat_requests(ollama)[0]["messages"][0]["content"] == "PIRATE PROMPT"


async def test_old_summary_keys_are_shown_to_the_summarizer(
    gateway: LLMGateway, ollama: FakeOllama
) -> None:
    old = Msg("user", "- earlier work", is_summary=True, metadata={"breadcrumbs": ["TICKET-7"]})
    await LLMSummarizer(gateway, SETTINGS)(
        [old, Msg("user", "next")], profile=_profile(), window=4096
    )
    content = _chat_requests(ollama)[0]["messages"][1]["content"]
    assert "Earlier summary:\n- earlier work\nKEYS: TICKET-7" in content


async def test_meta_summary_runs_first(gateway: LLMGateway, ollama: FakeOllama) -> None:
    ollama.chat_replies = ["- merged history\nKEYS: merged-key", "- final\nKEYS: final-key"]
    olds = [
        Msg("user", "a" * 6000, is_summary=True, metadata={"breadcrumbs": ["A1"]}),
        Msg("user", "b" * 6000, is_summary=True, metadata={"breadcrumbs": ["B1"]}),
    ]
    out = await LLMSummarizer(gateway, SETTINGS)(
        [*olds, Msg("user", "new question"), Msg("assistant", "new answer")],
        profile=_profile(),
        window=32768,
    )
    assert out.text == "- final" and out.keys == ["final-key"]
    meta, final = _chat_requests(ollama)
    assert "Several summaries" in meta["messages"][0]["content"]
    assert "Summary 1:" in meta["messages"][1]["content"]
    assert "Summary 2:" in meta["messages"][1]["content"]
    body = final["messages"][1]["content"]
    assert "Earlier summary:\n- merged history" in body
    assert "KEYS: merged-key, A1, B1" in body
    assert "a" * 100 not in body  # the old summaries are replaced by the merged one


async def test_empty_reply_is_a_summary_error(gateway: LLMGateway, ollama: FakeOllama) -> None:
    ollama.chat_replies = ["KEYS: a, b"]
    with pytest.raises(SummaryError):
        await LLMSummarizer(gateway, SETTINGS)([Msg("user", "x")], profile=_profile(), window=4096)


async def test_transport_failure_is_an_llm_error(gateway: LLMGateway, ollama: FakeOllama) -> None:
    ollama.fail("http500")
    with pytest.raises(LLMUnavailableError):
        await LLMSummarizer(gateway, SETTINGS)([Msg("user", "x")], profile=_profile(), window=4096)


def test_merge_keys() -> None:
    assert merge_keys(["a", "B"], ["b", "c"], limit=3) == ["a", "B", "c"]
    assert merge_keys(["x"] * 5, [str(i) for i in range(40)]) == ["x", *map(str, range(29))]
