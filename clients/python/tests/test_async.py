"""`AsyncNavi` against the live service: the same answers as `Navi`."""

from __future__ import annotations

from typing import Any

import pytest

from navi_client import (
    AsyncNavi,
    Message,
    Navi,
    NotFound,
    Session,
    ToolOutput,
)

from conftest import Live
from test_turns import RUN_SHELL, _builtin_round, check_builtin_round_trip
from tests.fakes.chat_script import ScriptedReply


@pytest.fixture
async def anavi(live: Live, user: tuple[str, str]) -> Any:
    async with AsyncNavi(live.base_url, user[1]) as client:
        yield client


async def test_async_sessions_and_messages(anavi: AsyncNavi, navi: Navi) -> None:
    session = await anavi.create_session(name="async")
    assert isinstance(session, Session) and session.name == "async"
    await anavi.append_messages(session.id, [Message("user", "one"), Message("assistant", "two")])
    # the same answer through either client
    assert await anavi.get_session(session.id) == navi.get_session(session.id)
    assert await anavi.list_messages(session.id) == navi.list_messages(session.id)
    page = await anavi.list_sessions(limit=1)
    assert page.items[0].id == session.id and page.total == 1
    with pytest.raises(NotFound):
        await anavi.get_session("00000000-0000-0000-0000-000000000000")
    await anavi.delete_session(session.id)
    with pytest.raises(NotFound):
        navi.get_session(session.id)


async def test_async_streamed_turn(anavi: AsyncNavi, ollama: Any) -> None:
    _builtin_round(ollama)
    session = await anavi.create_session("small")
    async with await anavi.stream_turn(session.id, "What about the deploy?") as events:
        seen = [event async for event in events]
    check_builtin_round_trip(seen)
    assert events.done is seen[-1]


async def test_async_requires_action_round_trip(anavi: AsyncNavi, ollama: Any) -> None:
    ollama.chat_replies.extend(
        [
            ScriptedReply(tool_calls=[{"name": "run_shell", "arguments": {"cmd": "ls"}}]),
            ScriptedReply("Two files."),
        ]
    )
    session = await anavi.create_session("small")
    result = await anavi.turn(session.id, "list files", tools=[RUN_SHELL])
    assert result.requires_action
    outputs = [ToolOutput(call.id, "a b") for call in result.pending]
    done = await anavi.turn(session.id, tool_results=outputs, tools=[RUN_SHELL])
    assert (done.status, done.content) == ("completed", "Two files.")


async def test_async_export_and_import(live: Live, anavi: AsyncNavi) -> None:
    session = await anavi.create_session(name="moving")
    await anavi.append_messages(session.id, [Message("user", "remember the blue door")])
    await anavi.save_fact("places", "door", "blue")
    async with await anavi.export_account() as export:
        records = [r async for r in export]
    assert records[0]["type"] == "header" and records[-1]["type"] == "end"
    assert {"session", "message", "fact"} <= {r["type"] for r in records}

    await anavi.delete_session(session.id)  # a session id may live on one account only
    data = b"".join(_line(r) for r in records)
    _, token = live.new_user()
    async with AsyncNavi(live.base_url, token) as other:
        report = await other.import_account(data)
        assert report.records["fact"] == 1 and report.records["session"] == 1
        assert (await other.get_session(session.id)).name == "moving"


def _line(record: dict[str, Any]) -> bytes:
    import json

    return json.dumps(record).encode() + b"\n"
