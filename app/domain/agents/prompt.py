"""Pure helpers of the turn loop: stored messages as the model gets them, the memory
notes around them, the tool calls a turn still waits for."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import ollama

from app.domain.context.system_prompt import SYSTEM_PROMPT_SOURCE
from app.domain.kernel.messages import MessageOut

__all__ = [
    "CARD_KEY",
    "USAGE_KEY",
    "Prompt",
    "call_id",
    "pending_calls",
    "round_results",
    "stored_calls",
    "to_ollama",
]

#: Keys of the metadata of a message the turn loop wrote.
INTERRUPTED_KEY = "interrupted"
USAGE_KEY = "usage"  # an assistant message: its model call's tokens {"in", "out"}
CARD_KEY = "card"  # a content_publish result: the card (type, content_type, size, url, name)


def call_id() -> str:
    """An id for a tool call (Ollama's calls carry none): the client's handle on it."""
    return f"call_{uuid.uuid4().hex[:20]}"


def stored_calls(calls: Sequence[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The assistant message's ``tool_calls`` as stored: each with its id."""
    return [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
        for cid, name, args in calls
    ]


def to_ollama(m: MessageOut) -> dict[str, Any]:
    """A message of the view as an Ollama chat message."""
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.images:  # the client takes its Image type (a bare base64 string is refused)
        out["images"] = [ollama.Image(value=i) for i in m.images]
    if m.tool_calls:
        out["tool_calls"] = [
            {"function": c.get("function") or {"name": c.get("name", ""), "arguments": {}}}
            for c in m.tool_calls
            if isinstance(c, dict)
        ]
    if m.role == "tool" and m.name:
        out["tool_name"] = m.name
    return out


def _is_note(m: MessageOut) -> bool:
    return m.sequence_number < 0  # injected by prepare, not stored


def _system_prompt(view: Sequence[MessageOut]) -> list[dict[str, Any]]:
    """The profile's system prompt that leads a prepared view (none without one)."""
    if view and _is_note(view[0]) and view[0].metadata.get("source") == SYSTEM_PROMPT_SOURCE:
        return [to_ollama(view[0])]
    return []


@dataclass
class Prompt:
    """What a round sends: the memory notes of the pre-turn prepare (ahead of the stored
    context, recall right before the turn's user message) around the stored view."""

    system: list[dict[str, Any]] = field(default_factory=list)  # the profile's prompt
    before: list[dict[str, Any]] = field(default_factory=list)
    recall: list[dict[str, Any]] = field(default_factory=list)
    stored: list[dict[str, Any]] = field(default_factory=list)
    recall_ids: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, view: Sequence[MessageOut]) -> Prompt:
        system = _system_prompt(view)
        lead = len(system)
        start = lead
        while lead < len(view) and _is_note(view[lead]):
            lead += 1
        tail = len(view)
        while tail > lead and _is_note(view[tail - 1]):
            tail -= 1
        recall = list(view[tail:])
        ids = [i for m in recall for i in m.metadata.get("chunk_ids") or []]
        return cls(
            system=system,
            before=[to_ollama(m) for m in view[start:lead]],
            recall=[to_ollama(m) for m in recall],
            stored=[to_ollama(m) for m in view[lead:tail] if not _is_note(m)],
            recall_ids=ids,
        )

    def with_stored(self, view: Sequence[MessageOut]) -> None:
        """A new stored view (after a mid-turn prepare), the memory notes kept, the
        profile's prompt as the view has it now (a profile switch applies at once)."""
        self.system = _system_prompt(view)
        self.stored = [to_ollama(m) for m in view if not _is_note(m)]

    def messages(self) -> list[dict[str, Any]]:
        last_user = next(
            (i for i in range(len(self.stored) - 1, -1, -1) if self.stored[i]["role"] == "user"),
            len(self.stored),
        )
        return [
            *self.system,
            *self.before,
            *self.stored[:last_user],
            *self.recall,
            *self.stored[last_user:],
        ]


def pending_calls(context: Sequence[MessageOut]) -> dict[str, tuple[str, dict[str, Any]]]:
    """The calls of the last assistant message with tool calls that have no result yet:
    id → (name, arguments)."""
    for i in range(len(context) - 1, -1, -1):
        m = context[i]
        if m.role == "user":
            return {}
        if m.role == "assistant" and m.tool_calls:
            answered = {r.tool_call_id for r in context[i + 1 :] if r.role == "tool"}
            out: dict[str, tuple[str, dict[str, Any]]] = {}
            for c in m.tool_calls:
                cid = c.get("id") if isinstance(c, dict) else None
                fn = c.get("function") or {} if isinstance(c, dict) else {}
                if cid and cid not in answered:
                    out[str(cid)] = (str(fn.get("name", "")), dict(fn.get("arguments") or {}))
            return out
    return {}


def round_results(context: Sequence[MessageOut]) -> list[MessageOut]:
    """The tool messages after the last assistant message with tool calls (that round's
    results so far); none when a user message came after it."""
    for i in range(len(context) - 1, -1, -1):
        m = context[i]
        if m.role == "user":
            return []
        if m.role == "assistant" and m.tool_calls:
            return [r for r in context[i + 1 :] if r.role == "tool"]
    return []
