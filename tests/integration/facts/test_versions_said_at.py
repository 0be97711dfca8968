"""A version is valid from the time of the message the fact came from (issue 46): the
facts of an imported conversation of 2023 were true in 2023, not on import day, and a
later conversation that changes the value ends the old one at its own message's time."""

from __future__ import annotations

import json
from typing import Any

from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.domain.facts.extraction import run_extraction_pass
from app.domain.kernel.runtime import Runtime
from app.llm.gateway import LLMGateway
from tests.conftest import new_user
from tests.fakes.ollama_server import FakeOllama
from tests.integration.facts.test_extraction import scripted

MAY = "2023-05-01T10:00:00+00:00"
SEPTEMBER = "2023-09-01T18:30:00+00:00"


def line(conv: str, role: str, content: str, at: str, n: int) -> dict[str, Any]:
    """A message `n` seconds after `at` (which ends in :00 seconds)."""
    second = at.replace(":00+00:00", f":{n:02d}+00:00")
    return {"conversation_id": conv, "role": role, "content": content, "created_at": second}


def city(body: dict[str, Any]) -> str:
    """The extraction's reply: the city the transcript names, quoted from its user line."""
    transcript = body["messages"][1]["content"]
    name = "Berlin" if "Berlin" in transcript else "Lisbon"
    quote = next(ln for ln in transcript.splitlines() if name in ln and ln.startswith("User:"))
    item = {
        "category": "location",
        "key": "home_city",
        "value": name,
        "source": "user_explicit",
        "source_context": quote,
    }
    return json.dumps([item])


async def test_versions_start_when_the_imported_messages_said_them(
    client: AsyncTestClient,
    ollama: FakeOllama,
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    settings: Settings,
) -> None:
    _, h = await new_user(client, "mover")
    lines = [
        line("may", "user", "Planning my week.", MAY, 0),
        line("may", "assistant", "Sure, tell me more.", MAY, 1),
        line("may", "user", "I live in Lisbon, near the river.", MAY, 2),
        line("may", "assistant", "Lovely city.", MAY, 3),
        line("sep", "user", "Big news: I moved to Berlin last week.", SEPTEMBER, 0),
        line("sep", "assistant", "Congratulations!", SEPTEMBER, 1),
    ]
    body = "\n".join(json.dumps(x) for x in lines).encode()
    r = await client.post("/me/import/chats", content=body, headers=h)
    assert r.status_code == 201, r.text
    ollama.chat_replies.extend([scripted([city, city])] * 4)
    runtime = Runtime.of(settings, factory, llm)
    extracted = 0
    for _ in range(3):  # the pass takes the imported sessions oldest first
        extracted += (await run_extraction_pass(runtime)).extracted
    assert extracted == 2

    [fact] = (await client.get("/memory/facts", headers=h)).json()["items"]
    assert fact["value"] == "Berlin"
    r = await client.get(f"/memory/facts/{fact['id']}/history", headers=h)
    assert r.status_code == 200, r.text
    versions = r.json()["items"]
    assert [(v["value"], v["valid_from"], v["valid_to"], v["message_seq"]) for v in versions] == [
        ("Berlin", "2023-09-01T18:30:00Z", None, 0),
        ("Lisbon", "2023-05-01T10:00:02Z", "2023-09-01T18:30:00Z", 2),
    ]
    for when, value in (("2023-06-15T00:00:00Z", "Lisbon"), ("2023-10-01T00:00:00Z", "Berlin")):
        r = await client.get("/memory/facts", params={"as_of": when}, headers=h)
        assert [f["value"] for f in r.json()["items"]] == [value], (when, r.text)
    r = await client.get("/memory/facts", params={"as_of": "2023-04-01T00:00:00Z"}, headers=h)
    assert r.json()["items"] == []
