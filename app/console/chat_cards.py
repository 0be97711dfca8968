"""The chat page's history as cards (seed 003, "sessions and compression"): what each
stored message is drawn as. Pure, over the messages and the session's compressions.

- a plan (`is_plan`): a plan card;
- a compression marker: "Context compressed: N → M messages", its summary behind a
  toggle (`session_page.compressions_of` reads the marker and its summary row);
- a service record (a system message whose `metadata.source` is `synapse_event`): its
  own card; every other stored system message is not shown;
- a tool result: folded under its call; a `content_publish` result is also an inline
  viewer by the detected type of the file (its `metadata.card`, agents/toolbox.py);
- an assistant answer: its text, its tool calls folded, the model call's tokens in and
  out and the context's size after it (`metadata.usage`, agents/turns.py).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from app.console.session_page import Compression, Shown, capped
from app.domain.agents.prompt import CARD_KEY, USAGE_KEY
from app.domain.compression import image_tokens
from app.domain.kernel.messages import MessageOut

SERVICE_SOURCES = frozenset({"synapse_event"})
# What a viewer shows inline; a kind not here (model, binary) is a download link.
INLINE_KINDS = frozenset({"image", "audio", "video", "pdf", "svg", "html", "text"})
IMAGE_MAGIC = {
    "iVBORw0KGgo": "image/png",
    "/9j/": "image/jpeg",
    "R0lGOD": "image/gif",
    "UklGR": "image/webp",
}


@dataclass(frozen=True)
class Inline:
    """A `content_publish`ed file as the page shows it."""

    kind: str
    name: str
    content_type: str
    size: int
    url: str  # the console's own route to the file (the API's needs a bearer token)
    lines: list[str] | None = None  # a text file's lines (read by the page)

    @property
    def inline(self) -> bool:
        return self.kind in INLINE_KINDS


@dataclass(frozen=True)
class Usage:
    tokens_in: int
    tokens_out: int

    @property
    def context_after(self) -> int:
        return self.tokens_in + self.tokens_out


@dataclass
class Card:
    """One entry of the chat's history."""

    kind: str  # user | assistant | plan | compression | service | tool
    msg: MessageOut
    text: Shown
    compression: Compression | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments JSON)
    viewer: Inline | None = None
    usage: Usage | None = None
    waiting: list[str] = field(default_factory=list)  # calls the turn ended waiting for
    # (data: URL, tokens the model is charged for it) of each recognised image
    images: list[tuple[str, int]] = field(default_factory=list)


def image_url(b64: str) -> str | None:
    """A data: URL of a fixed type for bytes we recognise; None for anything else."""
    for magic, media in IMAGE_MAGIC.items():
        if b64.startswith(magic):
            return f"data:{media};base64,{b64}"
    return None


def priced_images(images: Sequence[str] | None) -> list[tuple[str, int]]:
    out = []
    for b64 in images or []:
        url = image_url(b64)
        if url is None:
            continue
        try:
            data = base64.b64decode(b64, validate=False)
        except (binascii.Error, ValueError):
            continue
        out.append((url, image_tokens(data)))
    return out


def file_route(session_id: str, name: str) -> str:
    return f"/console/chat/{session_id}/files/{quote(name, safe='')}"


def viewer_of(session_id: str, meta: dict[str, Any]) -> Inline | None:
    card = meta.get(CARD_KEY)
    if not isinstance(card, dict) or not isinstance(card.get("name"), str):
        return None
    size = card.get("size")
    return Inline(
        kind=str(card.get("type") or "binary"),
        name=card["name"],
        content_type=str(card.get("content_type") or ""),
        size=size if isinstance(size, int) else 0,
        url=file_route(session_id, card["name"]),
    )


def usage_of(meta: dict[str, Any]) -> Usage | None:
    raw = meta.get(USAGE_KEY)
    if not isinstance(raw, dict):
        return None
    tin, tout = raw.get("in"), raw.get("out")
    if not isinstance(tin, int) or not isinstance(tout, int):
        return None
    return Usage(tin, tout)


def _calls(m: MessageOut) -> list[tuple[str, str]]:
    out = []
    for call in m.tool_calls or []:
        fn = call.get("function") if isinstance(call, dict) else None
        fn = fn if isinstance(fn, dict) else {}
        args = fn.get("arguments")
        text = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
        out.append((str(fn.get("name") or "tool"), capped(text, 4000).shown))
    return out


def card_of(m: MessageOut, session_id: str, markers: dict[int, Compression]) -> Card | None:
    """The card of one displayed message; None for a message the chat does not show."""
    meta = m.metadata or {}
    if m.is_compression:
        c = markers.get(m.sequence_number)
        return Card("compression", m, capped(c.summary if c else m.content), compression=c)
    if m.role == "system":
        if meta.get("source") in SERVICE_SOURCES:
            return Card("service", m, capped(m.content))
        return None
    if m.is_plan:
        return Card("plan", m, capped(m.content))
    if m.role == "tool":
        return Card("tool", m, capped(m.content), viewer=viewer_of(session_id, meta))
    images = priced_images(m.images)
    if m.role == "user":
        return Card("user", m, capped(m.content), images=images)
    return Card(
        "assistant",
        m,
        capped(m.content),
        calls=_calls(m),
        usage=usage_of(meta),
        images=images,
    )


def waiting_for(msgs: Sequence[MessageOut]) -> list[str]:
    """The calls the last turn ended waiting for (`requires_action`): the newest
    assistant message's calls no tool result answered, when only results follow it."""
    answered: set[str] = set()
    for m in reversed(msgs):
        if m.role == "tool":
            answered.add(m.tool_call_id or "")
            continue
        if m.role != "assistant" or not m.tool_calls:
            return []
        return [
            str((c.get("function") or {}).get("name") or "tool")
            for c in m.tool_calls
            if isinstance(c, dict) and c.get("id") not in answered
        ]
    return []


def chat_cards(
    msgs: Sequence[MessageOut],
    session_id: str,
    compressions: Sequence[Compression],
    *,
    newest: bool = True,
) -> list[Card]:
    """The page's cards; on the newest page the last turn's `requires_action` too."""
    markers = {c.seq: c for c in compressions}
    cards = [c for c in (card_of(m, session_id, markers) for m in msgs) if c is not None]
    waiting = waiting_for(msgs) if newest else []
    if waiting:
        last = next(c for c in reversed(cards) if c.kind == "assistant")
        last.waiting = waiting
    return cards
