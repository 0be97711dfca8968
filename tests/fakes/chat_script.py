"""Scripted chat replies of the fake Ollama server: tokens, thinking, tool calls.

A :class:`ScriptedReply` in ``FakeOllama.chat_replies`` answers one ``/api/chat`` call::

    fake.chat_replies.append(ScriptedReply("Hello there", thinking="greet",
                                           prompt_eval_count=900))
    fake.chat_replies.append(ScriptedReply(tool_calls=[{"name": "memory",
                                                        "arguments": {"action": "list"}}]))

Streamed (``stream: true``), the content goes out word by word (``token_delay`` seconds
apart), thinking first, the tool calls in one piece, then the final ``done`` piece with
``prompt_eval_count``. ``break_after=N`` drops the connection after N pieces (a model
that dies mid-stream); ``status`` answers that HTTP status with an error body instead.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["ScriptedReply", "stream_pieces"]


class _Writable(Protocol):
    def write(self, data: bytes, /) -> int: ...
    def flush(self) -> None: ...


@dataclass
class ScriptedReply:
    content: str = ""
    thinking: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_eval_count: int | None = None  # None: the fake's word count of the prompt
    token_delay: float = 0.0
    break_after: int | None = None
    status: int | None = None

    def message(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.thinking:
            out["thinking"] = self.thinking
        if self.tool_calls:
            out["tool_calls"] = [{"function": c} for c in self.tool_calls]
        return out


def stream_pieces(reply: ScriptedReply) -> list[dict[str, Any]]:
    """The ``message`` of each streamed piece before the final one."""
    pieces: list[dict[str, Any]] = []
    for word in re.findall(r"\S+\s*|\s+", reply.thinking):
        pieces.append({"role": "assistant", "content": "", "thinking": word})
    for word in re.findall(r"\S+\s*|\s+", reply.content):
        pieces.append({"role": "assistant", "content": word})
    if reply.tool_calls:
        calls = [{"function": c} for c in reply.tool_calls]
        pieces.append({"role": "assistant", "content": "", "tool_calls": calls})
    return pieces


def write_stream(
    out: _Writable, reply: ScriptedReply, model: str, stamp: str, final: dict[str, Any]
) -> bool:
    """Write the pieces, then ``final``; False when the script broke the stream."""
    for i, message in enumerate(stream_pieces(reply)):
        if reply.break_after is not None and i >= reply.break_after:
            return False
        if reply.token_delay and i:
            time.sleep(reply.token_delay)
        chunk = {"model": model, "created_at": stamp, "message": message, "done": False}
        out.write(json.dumps(chunk).encode() + b"\n")
        out.flush()
    final = {**final, "message": {"role": "assistant", "content": ""}}
    out.write(json.dumps(final).encode() + b"\n")
    out.flush()
    return True
