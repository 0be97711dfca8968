"""The `memory` tool with `forget` by text: `{"action": "forget", "text": "…"}` redacts the
text everywhere the caller owns (ForgetService); with `key` (and no text) a fact is
deleted as before. Every other action is the facts domain's (facts/tool.py).

The answer never repeats the text: it is stored as the tool's result in the session."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import msgspec

from app.domain.facts.schemas import MemoryToolCall, MemoryToolResult
from app.domain.facts.services import FactService
from app.domain.facts.tool import run_memory_tool
from app.domain.forget.redact import Needle, redact_json, redact_text
from app.domain.forget.schemas import ForgetJobOut
from app.domain.forget.services import ForgetService
from app.domain.kernel.messages import MessageIn


def forgets_text(call: MemoryToolCall) -> bool:
    return call.action == "forget" and bool(call.text and call.text.strip())


async def run_memory_tool_with_forget(
    facts: FactService,
    forget: ForgetService,
    user_id: str,
    call: MemoryToolCall,
    session_id: uuid.UUID | None = None,
) -> MemoryToolResult:
    if not forgets_text(call):
        return await run_memory_tool(facts, user_id, call, session_id)
    assert call.text is not None
    answer = await forget.forget(user_id, call.text, via="tool")
    out = answer.result if isinstance(answer, ForgetJobOut) else answer
    deleted = out.changed["facts"]
    if call.key and call.key.strip():
        deleted += await facts.delete_fact(user_id, call.key, call.category)
    if isinstance(answer, ForgetJobOut):  # a large account: it goes on in the background
        p = answer.progress
        text = (
            f"Forgetting that text continues in the background (job {answer.job_id},"
            f" {p.sessions_done} of {p.sessions_total} session(s) done so far):"
            f" {out.total} record(s) redacted or deleted until now."
        )
    else:
        text = (
            f"Forgot that text everywhere: {out.total} record(s) redacted or deleted"
            f" ({deleted} fact(s) deleted)."
        )
    if out.files:
        text += f" {len(out.files)} session file(s) still hold it (not changed): " + ", ".join(
            f.path for f in out.files
        )
    return MemoryToolResult(
        action="forget",
        ok=True,
        text=text,
        deleted=deleted,
        forgotten=msgspec.to_builtins(answer),
    )


def redact_round(
    message: MessageIn,
    calls: Sequence[tuple[str, str, dict[str, Any]]],
    results: Sequence[MessageIn],
) -> MessageIn:
    """The turn loop's assistant message of a round whose `memory` call forgot a text,
    with that text redacted too: the message (its tool call holds the text) is stored
    after the tools ran, so the forget did not see it."""
    answered = {r.tool_call_id for r in results if not r.metadata.get("is_error")}
    for cid, name, args in calls:
        forgotten = args.get("text") if name == "memory" and cid in answered else None
        if args.get("action") != "forget" or not isinstance(forgotten, str):
            continue
        needle = Needle(forgotten.strip())
        message = msgspec.structs.replace(
            message,
            content=redact_text(needle, message.content) or "",
            thinking=redact_text(needle, message.thinking),
            tool_calls=redact_json(needle, message.tool_calls),
        )
    return message
