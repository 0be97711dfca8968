"""A `Session` of the OpenAI Agents SDK (`openai-agents`) backed by a Navi session.

    from agents import Agent, Runner
    from navi_client import AsyncNavi
    from navi_client.integrations.openai_agents import NaviSession

    navi = AsyncNavi(url, token)
    session = await NaviSession.open(navi)            # or NaviSession(navi, "<session id>")
    result = await Runner.run(agent, "Hi!", session=session)

- `add_items` appends each item as a Navi message: messages as user / assistant / system
  text, a function call as an assistant message with its tool call, a function call's
  output as a tool message; every item also rides in the message's metadata
  (`openai_item`), so `get_items` gives back exactly what was added.
- `get_items` is the session's context through `prepare`: Navi compresses it first when
  it no longer fits the profile's window (its summary then leads the items), so the
  history the agent sends stays inside the model's window — and nothing is lost: the
  demoted messages stay in Navi's history and `memory_search`. The notes Navi adds to a
  prompt (the user's facts, excerpts it recalled) come as system items.
- System and developer items are stored as system notes (`source` `task_note`): Navi
  sends those to the model, unlike its own bookkeeping rows.
- `pop_item` removes the newest item from what `get_items` returns: Navi's history is
  append-only, so a marker (a hidden `task_note` naming the removed message) is
  appended and `get_items` leaves both out. `clear_session` is Navi's reset (the
  conversation starts over; the memory stays).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agents.memory.session import SessionABC

from navi_client._async import AsyncNavi
from navi_client._models import Message

__all__ = ["NaviSession", "item_to_message", "message_to_item"]

ITEM_KEY = "openai_item"  # the item as added, in the message's metadata
POPPED_KEY = "openai_popped"  # a marker message: the sequence number it removes
NOTE_SOURCE = "task_note"  # a system message Navi passes on to the model
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _text(content: Any) -> str:
    """A message item's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text") or part.get("refusal") or part.get("transcript")
                if isinstance(text, str):
                    parts.append(text)
        return "\n".join(parts)
    return ""


def item_to_message(item: Mapping[str, Any]) -> Message:
    """The Navi message that stores one Agents SDK input item."""
    meta: dict[str, Any] = {ITEM_KEY: dict(item)}
    kind = item.get("type", "message")
    if kind == "message" or ("role" in item and "type" not in item):
        role = _ROLES.get(str(item.get("role")), "user")
        if role == "system":
            meta["source"] = NOTE_SOURCE
        return Message(role, _text(item.get("content")), metadata=meta)  # type: ignore[arg-type]
    if kind == "function_call":
        name, args = str(item.get("name", "")), str(item.get("arguments", ""))
        call = {"id": item.get("call_id"), "function": {"name": name, "arguments": args}}
        return Message("assistant", f"{name}({args})", tool_calls=[call], metadata=meta)
    if kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else json.dumps(output)
        return Message(
            "tool", text, tool_call_id=str(item.get("call_id", "")), name=None, metadata=meta
        )
    # reasoning, hosted tool calls, …: kept whole, shown to nobody
    return Message("assistant", _text(item.get("content")), is_display=False, metadata=meta)


def message_to_item(message: Any) -> dict[str, Any]:
    """An Agents SDK input item from a stored Navi message (the item it was added as,
    else a message item: a compression summary, a note Navi injected)."""
    meta = getattr(message, "metadata", None) or {}
    stored = meta.get(ITEM_KEY)
    if isinstance(stored, Mapping):
        return dict(stored)
    if message.role == "tool":
        return {
            "type": "function_call_output",
            "call_id": message.tool_call_id or "",
            "output": message.content,
        }
    role = message.role if message.role in ("user", "assistant", "system") else "user"
    return {"role": role, "content": message.content}


class NaviSession(SessionABC):
    """A Navi session as the Agents SDK's conversation memory."""

    def __init__(self, client: AsyncNavi, session_id: str, *, model: str | None = None) -> None:
        self.client = client
        self.session_id = session_id
        self.model = model  # the model whose window `prepare` prices against (profile's if None)

    @classmethod
    async def open(
        cls,
        client: AsyncNavi,
        *,
        profile_id: str = "default",
        name: str | None = None,
        model: str | None = None,
    ) -> NaviSession:
        """A new Navi session for a new conversation."""
        session = await client.create_session(profile_id, name)
        return cls(client, session.id, model=model)

    async def _context(self) -> list[Any]:
        prepared = await self.client.prepare(self.session_id, model=self.model)
        popped = {
            m.metadata[POPPED_KEY]
            for m in prepared.context
            if isinstance(getattr(m, "metadata", None), Mapping) and POPPED_KEY in m.metadata
        }
        return [
            m
            for m in prepared.context
            if m.sequence_number not in popped and POPPED_KEY not in (m.metadata or {})
        ]

    async def get_items(self, limit: int | None = None) -> list[Any]:
        items = [message_to_item(m) for m in await self._context()]
        return items[-limit:] if limit else items

    async def add_items(self, items: list[Any]) -> None:
        if items:
            await self.client.append_messages(self.session_id, [item_to_message(i) for i in items])

    async def pop_item(self) -> Any | None:
        context = await self._context()
        stored = [m for m in context if m.sequence_number >= 0]  # not a note Navi injected
        if not stored:
            return None
        last = stored[-1]
        marker = Message(
            "system",
            f"(message {last.sequence_number} was withdrawn)",
            is_display=False,
            metadata={"source": NOTE_SOURCE, POPPED_KEY: last.sequence_number},
        )
        await self.client.append_messages(self.session_id, [marker])
        return message_to_item(last)

    async def clear_session(self) -> None:
        await self.client.reset_session(self.session_id)
