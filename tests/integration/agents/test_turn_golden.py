"""Golden file of a turn's Server-Sent Events, byte for byte.

Why (issue 32): the refactor to one composition root (a typed runtime in place of
Litestar's ``State``) must not change a single event a client reads. The test plays a
fixed script on the fake Ollama: a turn of two rounds (thinking, streamed tokens,
``usage``, two built-in calls each: ``memory`` save and ``scratchpad_write``, then
``memory_search`` and ``scratchpad_read`` with a client tool -> ``requires_action``)
and its resume (the client's result -> thinking, the answer, ``usage``, ``done``). The
raw SSE bodies, with only what varies between runs replaced by placeholders, must
equal ``golden/turn_sse.txt``. After an intended change of the events, rewrite the
golden with ``NAVI_WRITE_GOLDEN=1`` and review its diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.chat_script import ScriptedReply
from tests.fakes.ollama_server import FakeOllama

from .conftest import new_session, parse_sse

GOLDEN = Path(__file__).parent / "golden" / "turn_sse.txt"
SSE = {"Accept": "text/event-stream"}
SHELL = {
    "type": "function",
    "function": {
        "name": "run_shell",
        "description": "run a command on the user's machine",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
}
SCRIPT = [
    ScriptedReply(
        "Noting both.",
        thinking="a preference and a port",
        tool_calls=[
            {
                "name": "memory",
                "arguments": {
                    "action": "save",
                    "category": "preferences",
                    "key": "editor",
                    "value": "vim",
                    "source": "user_explicit",
                    "confidence": 80,
                },
            },
            {"name": "scratchpad_write", "arguments": {"section": "deploy", "value": "port 8080"}},
        ],
        prompt_eval_count=400,
    ),
    ScriptedReply(
        "Checking the machine.",
        tool_calls=[
            {"name": "memory_search", "arguments": {"query": "editor vim", "k": 3}},
            {"name": "scratchpad_read", "arguments": {"section": "deploy"}},
            {"name": "run_shell", "arguments": {"cmd": "ss -ltn"}},
        ],
        prompt_eval_count=500,
    ),
    ScriptedReply(
        "Port 8080 is open and your editor is vim.",
        thinking="all checked",
        prompt_eval_count=600,
    ),
]
# What legitimately differs from run to run. Random ids are numbered by first
# appearance, so "the same id again" stays visible in the golden; times and the
# turn's elapsed seconds become one placeholder each.
IDS = {
    "call": r"call_[0-9a-f]{20}",
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
}
TIME = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?"
ELAPSED = r'"elapsed_seconds":\d+(?:\.\d+)?(?:e-?\d+)?'


def numbered(name: str, pattern: str, text: str) -> str:
    seen: dict[str, str] = {}
    return re.sub(pattern, lambda m: seen.setdefault(m[0], f"<{name}:{len(seen) + 1}>"), text)


def normalize(text: str) -> str:
    for name, pattern in IDS.items():
        text = numbered(name, pattern, text)
    text = re.sub(TIME, "<time>", text)
    return re.sub(ELAPSED, '"elapsed_seconds":<elapsed>', text)


async def post_sse(client: httpx.AsyncClient, sid: str, body: dict[str, Any]) -> bytes:
    r = await client.post(f"/sessions/{sid}/turns", json=body, headers=SSE)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    return r.content


async def test_a_turn_and_its_resume_stream_the_golden_events(
    served: httpx.AsyncClient, ollama: FakeOllama
) -> None:
    sid = await new_session(served)
    ollama.chat_replies += SCRIPT
    message = {"message": {"content": "I use vim; deploy on port 8080."}, "tools": [SHELL]}
    turn = await post_sse(served, sid, message)
    [pending] = parse_sse(turn.decode())[-1][1]["pending"]
    result = {"tool_call_id": pending["id"], "content": "LISTEN 0.0.0.0:8080"}
    resume = await post_sse(served, sid, {"tool_results": [result], "tools": [SHELL]})
    assert not ollama.chat_replies and ollama.count("/api/chat") == len(SCRIPT)

    raw = b"# turn\n" + turn + b"# resume\n" + resume
    got = normalize(raw.decode("utf-8"))
    if os.environ.get("NAVI_WRITE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_bytes(got.encode("utf-8"))
    assert GOLDEN.exists(), f"{GOLDEN} is missing: write it with NAVI_WRITE_GOLDEN=1"
    assert got == GOLDEN.read_bytes().decode("utf-8"), "the turn's SSE bytes changed"
