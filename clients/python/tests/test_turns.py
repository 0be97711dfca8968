"""A scripted agent round trip through `POST /sessions/{id}/turns` against the live
service, whose model is the fake Ollama playing `ScriptedReply`s."""

from __future__ import annotations

from typing import Any

import pytest

from navi_client import (
    DoneEvent,
    ErrorEvent,
    Navi,
    TokenEvent,
    ToolCallEvent,
    ToolOutput,
    ToolResultEvent,
    TurnEvent,
    Unavailable,
    UsageEvent,
)

from tests.fakes.chat_script import ScriptedReply

RUN_SHELL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "run_shell",
        "description": "run a command",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
}


def _builtin_round(ollama: Any) -> None:
    """Round 1 calls the built-in memory_search, round 2 answers."""
    ollama.chat_replies.extend(
        [
            ScriptedReply(
                "Let me check.",
                tool_calls=[{"name": "memory_search", "arguments": {"query": "deploy"}}],
            ),
            ScriptedReply("We deploy from staging."),
        ]
    )


def check_builtin_round_trip(events: list[TurnEvent]) -> None:
    """The grammar of docs/agents.md: round := token* usage tool_call* tool_result*,
    then the answer's round, then done."""
    kinds = [type(e) for e in events]
    usage = [i for i, k in enumerate(kinds) if k is UsageEvent]
    assert len(usage) == 2, kinds
    first, second = usage
    assert all(k is TokenEvent for k in kinds[:first])
    call, result = events[first + 1], events[first + 2]
    assert isinstance(call, ToolCallEvent) and isinstance(result, ToolResultEvent)
    assert (call.name, call.arguments, call.builtin) == ("memory_search", {"query": "deploy"}, True)
    assert result.id == call.id and result.name == "memory_search" and not result.is_error
    assert "memory_search" in result.content
    assert all(k is TokenEvent for k in kinds[first + 3 : second])
    round1 = "".join(e.text for e in events[:first] if isinstance(e, TokenEvent))
    round2 = "".join(e.text for e in events[first + 3 : second] if isinstance(e, TokenEvent))
    assert (round1, round2) == ("Let me check.", "We deploy from staging.")
    assert [e.round for e in events if isinstance(e, UsageEvent)] == [1, 2]
    done = events[-1]
    assert isinstance(done, DoneEvent), kinds
    assert done.status == "completed" and done.content == "We deploy from staging."
    assert (done.rounds, done.tool_call_count, done.pending) == (2, 1, [])


def test_streamed_turn_with_a_builtin_tool(navi: Navi, ollama: Any) -> None:
    _builtin_round(ollama)
    session = navi.create_session("small")
    with navi.stream_turn(session.id, "What did we decide about the deploy?") as events:
        seen = list(events)
    check_builtin_round_trip(seen)
    assert events.done is seen[-1] and events.error is None and not events.requires_action

    # stored, step by step: the user's message, the round with its tool result, the answer
    history = navi.list_messages(session.id)
    roles = [(m.role, m.content) for m in history.messages]
    assert roles[0] == ("user", "What did we decide about the deploy?")
    assert [r for r, _ in roles] == ["user", "assistant", "tool", "assistant"]
    assert history.messages[1].tool_calls and history.messages[2].name == "memory_search"
    assert roles[-1] == ("assistant", "We deploy from staging.")


def test_client_tool_requires_action_then_resumes(navi: Navi, ollama: Any) -> None:
    ollama.chat_replies.extend(
        [
            ScriptedReply(
                "Let me look.", tool_calls=[{"name": "run_shell", "arguments": {"cmd": "ls"}}]
            ),
            ScriptedReply("You have two files: a.txt and b.txt."),
        ]
    )
    session = navi.create_session("small")
    result = navi.turn(session.id, "list my files", tools=[RUN_SHELL])
    assert result.requires_action and result.content == "Let me look."
    [pending] = result.pending
    assert (pending.name, pending.arguments) == ("run_shell", {"cmd": "ls"})
    calls = [e for e in result.events if isinstance(e, ToolCallEvent)]
    assert [(c.id, c.builtin) for c in calls] == [(pending.id, False)]
    assert isinstance(result.events[-1], DoneEvent)
    assert not any(isinstance(e, TokenEvent) for e in result.events)  # joined into content

    outputs = [ToolOutput(pending.id, "a.txt b.txt")]
    done = navi.turn(session.id, tool_results=outputs, tools=[RUN_SHELL])
    assert done.status == "completed" and not done.requires_action
    assert done.content == "You have two files: a.txt and b.txt."
    # the model's second call saw the client's result
    chats = [body for p, body in ollama.requests if p == "/api/chat"]
    tool_messages = [m for m in chats[-1]["messages"] if m.get("role") == "tool"]
    assert tool_messages[-1]["content"] == "a.txt b.txt"


def test_streamed_requires_action_and_streamed_resume(navi: Navi, ollama: Any) -> None:
    ollama.chat_replies.extend(
        [
            ScriptedReply(tool_calls=[{"name": "run_shell", "arguments": {"cmd": "pwd"}}]),
            ScriptedReply("You are in /srv."),
        ]
    )
    session = navi.create_session("small")
    with navi.stream_turn(session.id, "where am I?", tools=[RUN_SHELL]) as events:
        calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert events.requires_action and events.done is not None
    [pending] = events.done.pending
    assert calls[0].id == pending.id and calls[0].builtin is False
    resumed = navi.stream_turn(
        session.id,
        tool_results=[{"tool_call_id": pending.id, "content": "/srv"}],
        tools=[RUN_SHELL],
    )
    text = "".join(e.text for e in resumed if isinstance(e, TokenEvent))
    assert text == "You are in /srv." and resumed.done and resumed.done.status == "completed"


def test_a_model_failure(navi: Navi, ollama: Any) -> None:
    session = navi.create_session("small")
    ollama.chat_replies.append(ScriptedReply(status=500))
    with navi.stream_turn(session.id, "hello?") as events:
        seen = list(events)
    assert isinstance(seen[-1], ErrorEvent) and events.error is seen[-1]
    assert events.error.error == "llm_unavailable" and events.error.status == 503

    # as one answer: 503 llm_unavailable, without Retry-After: not sent again (the
    # user's message is stored already)
    before = ollama.count("/api/chat")
    ollama.chat_replies.append(ScriptedReply(status=500))
    with pytest.raises(Unavailable) as info:
        navi.turn(session.id, "hello again?")
    assert info.value.error == "llm_unavailable" and info.value.retry_after is None
    assert ollama.count("/api/chat") == before + 1
    users = [m.content for m in navi.list_messages(session.id).messages if m.role == "user"]
    assert users == ["hello?", "hello again?"]
