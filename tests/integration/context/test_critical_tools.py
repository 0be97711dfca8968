"""A profile's `critical_tools`: their results reach the summarizer as critical ones
(verbatim up to 4000 characters) instead of the 800-character preview."""

from __future__ import annotations

import json
from pathlib import Path

from app.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.fakes.ollama_server import FakeOllama

from .conftest import MODEL, WINDOW, append, new_session, turn

PROFILES = {
    "plain": {"context_window": WINDOW, "compression_keep_recent": 1, "model": MODEL},
    "critical": {
        "context_window": WINDOW,
        "compression_keep_recent": 1,
        "model": MODEL,
        "critical_tools": ["build_log"],
    },
}


def _history(tail: str) -> list[dict]:  # type: ignore[type-arg]
    call = {"id": "c1", "function": {"name": "build_log", "arguments": {}}}
    result = "build output " + "x" * 2000 + tail
    return [
        {"role": "user", "content": "build it"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": result, "tool_call_id": "c1", "name": "build_log"},
        {"role": "assistant", "content": "built"},
        *turn(2),
    ]


async def test_a_critical_tool_result_is_kept_verbatim_for_the_summarizer(
    make_client, settings: Settings, tmp_path: Path, ollama: FakeOllama
) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(PROFILES))
    overrides = {"profiles_file": str(path), "llm_max_attempts": 1}
    async with make_client(settings, **overrides) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sent = {}
        for profile in ("plain", "critical"):
            sid = await new_session(c, profile)
            await append(c, sid, _history(f"THE-END-{profile}"))
            ollama.chat_replies.append("- built the project\nKEYS: build")
            r = await c.post(f"/sessions/{sid}/compact")
            assert r.status_code == 200, r.text
            summary_call = ollama.requests_for("/api/chat")[-1]
            sent[profile] = summary_call["messages"][-1]["content"]
    assert "THE-END-plain" not in sent["plain"] and "[+" in sent["plain"]
    assert "THE-END-critical" in sent["critical"]
