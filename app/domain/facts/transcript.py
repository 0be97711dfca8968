"""Extraction's pure half: the transcript the LLM reads, and the facts it answers with.

`render_transcript` turns a session's conversation into plain text — user and assistant
messages, `[Tool call] name(args)` and `[Tool result] name: output` (cut at 500
characters) — and `clip_middle` keeps its head and tail within 12,000 characters.

`parse_facts` reads the reply leniently where the meaning is plain and strictly where it
is not. Lenient: a JSON array, possibly inside a code fence or between sentences, a
`{"facts": [...]}` object, a single fact object or several loose ones; `<think>` blocks
ignored; a value that is a number, a boolean or a list of those is written as text
(`41`, `Go, Rust`); a missing category is `general`, an unknown source `conversation`.
Strict, raising `ReplyFormatError` with its `reason` (the caller asks again, then
records the session as failed):

- `not_json`: no usable JSON at all (or JSON with no fact list in it, e.g. `facts` not
  a list);
- `cut_off`: the reply ends inside its JSON (an array or object never closed) — the
  complete objects before the cut are not kept: a reply is taken whole or not at all;
- `invalid_item`: an item that cannot be stored as it is (not an object, a missing key
  or value, a value that is an object or holds one, a key or category too long) —
  the other items of that reply are not kept either.

`states_facts` finds a first-person statement ("my name is", "I live in", "I work
at", …) in the user's lines: an empty list for such a transcript is asked again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.domain.facts.schemas import MAX_CATEGORY, MAX_KEY, MAX_SOURCE_CONTEXT, MAX_VALUE, SOURCES

__all__ = [
    "TOOL_OUTPUT_CHARS",
    "TRANSCRIPT_MAX_CHARS",
    "ExtractedFact",
    "SaidAt",
    "ReplyFormatError",
    "clip_middle",
    "parse_facts",
    "render_transcript",
    "said_at",
    "states_facts",
    "strip_think",
]

TOOL_OUTPUT_CHARS = 500
TRANSCRIPT_MAX_CHARS = 12_000
DEFAULT_CATEGORY = "general"
_MAX_JSON_STARTS = 200  # candidate `[`/`{` positions tried before giving up

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)


# A user line stating something durable about themselves (a cheap guard against an
# empty answer, not a parser: it only decides whether `[]` is asked again).
_STATEMENT = re.compile(
    r"^User:.*?\b(my name is|call me|i live in|i'm based in|i am based in|i moved to"
    r"|i'm from|i am from|i work (?:at|for|as|on)|i'm working at|i prefer|i always use"
    r"|my (?:favou?rite|preferred) [a-z ]{1,30} is|my [a-z]{2,20} is called)\b",
    re.IGNORECASE | re.MULTILINE,
)


class ReplyFormatError(ValueError):
    """The reply cannot be used; `reason` (not_json, cut_off, invalid_item) is what the
    caller records and counts (`navi_memory_extraction_replies_total{outcome}`)."""

    def __init__(self, message: str, reason: str = "not_json") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class ExtractedFact:
    category: str
    key: str
    value: str
    source: str
    source_context: str | None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _tool_call_line(call: Any) -> str | None:
    if not isinstance(call, Mapping):
        return None
    inner = call.get("function")
    fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else call
    name = str(fn.get("name") or "tool")
    args = fn.get("arguments", {})
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"[Tool call] {name}({_cut(args, TOOL_OUTPUT_CHARS)})"


def render_transcript(messages: Iterable[Any]) -> str:
    """Rows with `role`, `content`, `tool_calls`, `name` (in order) → plain text."""
    lines: list[str] = []
    for m in messages:
        content = (m.content or "").strip()
        if m.role == "user":
            if content:
                lines.append(f"User: {content}")
        elif m.role == "assistant":
            if content:
                lines.append(f"Assistant: {content}")
            for call in m.tool_calls or []:
                line = _tool_call_line(call)
                if line:
                    lines.append(line)
        elif m.role == "tool":
            lines.append(f"[Tool result] {m.name or 'tool'}: {_cut(content, TOOL_OUTPUT_CHARS)}")
    return "\n".join(lines)


def clip_middle(text: str, limit: int = TRANSCRIPT_MAX_CHARS) -> str:
    """`text` if it fits, else its head and tail around a marker, `limit` chars at most."""
    if len(text) <= limit:
        return text
    marker = f"\n\n[… {len(text) - limit} characters omitted …]\n\n"
    room = max(limit - len(marker) - 8, 0)  # 8: the count in the marker may grow
    head = room // 2
    tail = room - head
    marker = f"\n\n[… {len(text) - head - tail} characters omitted …]\n\n"
    return text[:head] + marker + (text[-tail:] if tail else "")


def strip_think(reply: str) -> str:
    return _THINK.sub("", reply).strip()


def _as_items(data: Any, *, single: bool) -> list[Any] | None:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        if isinstance(data.get("facts"), list):
            return data["facts"]
        if single and "key" in data and "value" in data:
            return [data]
    return None


def _json_starts(text: str, chars: str) -> Iterable[int]:
    for n, match in enumerate(re.finditer(f"[{re.escape(chars)}]", text)):
        if n >= _MAX_JSON_STARTS:
            return
        yield match.start()


def _find_items(text: str) -> list[Any] | None:
    """The fact list in a reply: the whole reply (or a fenced block) as JSON, else the
    first array (or `{"facts": …}`) inside it, else every fact-shaped object in it — the
    last rescues the complete objects of a truncated array."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        try:
            items = _as_items(json.loads(candidate), single=True)
            if items is not None:
                return items
        except (ValueError, RecursionError):  # a model nesting past the stack
            pass
        for pos in _json_starts(candidate, "[{"):
            try:
                data, _ = decoder.raw_decode(candidate, pos)
            except (ValueError, RecursionError):
                continue
            items = _as_items(data, single=False)
            if items is not None:
                return items
    found: list[Any] = []
    end = 0
    for pos in _json_starts(text, "{"):
        if pos < end:
            continue
        try:
            data, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            continue
        found.extend(_as_items(data, single=True) or [])
    return found or None


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _text(value: Any) -> str | None:
    """A string, a number, a boolean or a list of those as text; None for anything
    else (null, an object, a list holding one) or an empty text."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    if isinstance(value, list):
        if not all(_scalar(v) or v is None for v in value):
            return None
        value = ", ".join(_text(v) or "" for v in value if v is not None)
    elif not _scalar(value):
        return None
    return str(value).strip() or None


def states_facts(transcript: str) -> str | None:
    """The first-person statement a user line of `transcript` makes ("i live in"),
    lower-cased, or None."""
    match = _STATEMENT.search(transcript)
    return match.group(1).lower() if match else None


def _cut_off(text: str) -> bool:
    """True when a `[` or `{` of the reply never closes (a reply cut mid-object or
    mid-array): brackets counted outside the JSON strings inside them."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"' and depth:
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth = max(depth - 1, 0)
    return depth > 0


def parse_facts(reply: str) -> list[ExtractedFact]:
    """The reply's facts, all of them or none: a reply with any item that cannot be
    stored raises ReplyFormatError (`invalid_item`), as does one with no fact list
    (`not_json`) or one cut off (`cut_off`)."""
    text = strip_think(reply)
    if _cut_off(text):
        raise ReplyFormatError(
            f"the reply ends inside its JSON (cut off): …{reply.strip()[-120:]!r}", "cut_off"
        )
    items = _find_items(text)
    if items is None:
        raise ReplyFormatError(f"no JSON array of facts in the reply: {reply.strip()[:120]!r}")
    facts: list[ExtractedFact] = []
    problems: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(f"item {i}: not an object")
            continue
        key, value = _text(item.get("key")), _text(item.get("value"))
        category = _text(item.get("category")) or DEFAULT_CATEGORY
        if key is None or value is None:
            which = "key" if key is None else "value"
            problems.append(f"item {i}: {which} missing, null, an object or holding one")
            continue
        if (
            max(len(key), len(key.lower())) > MAX_KEY
            or max(len(category), len(category.lower())) > MAX_CATEGORY
        ):  # (the store's limits: "İ".lower() is two characters)
            problems.append(f"item {i}: key or category too long ({key[:60]!r})")
            continue
        if "\x00" in key + category:
            problems.append(f"item {i}: a NUL character in its key or category")
            continue
        source = _text(item.get("source"))
        context = _text(item.get("source_context"))
        facts.append(
            ExtractedFact(
                category=category,
                key=key,
                value=value[:MAX_VALUE],
                source=source if source in SOURCES else "conversation",
                source_context=context[:MAX_SOURCE_CONTEXT] if context else None,
            )
        )
    if problems:
        raise ReplyFormatError(
            f"{len(problems)} of {len(items)} items cannot be stored: " + "; ".join(problems[:5]),
            "invalid_item",
        )
    return facts


@dataclass(frozen=True)
class SaidAt:
    sequence_number: int
    at: datetime


def said_at(messages: Sequence[Any], facts: Sequence[ExtractedFact]) -> list[SaidAt | None]:
    """Per fact, the message it came from (`transcript_messages` rows, in order): the
    last user message holding its source context, else its value (case and spacing
    aside), else the transcript's last message (the session had said it by then); None
    when there are no messages. A fact's version is valid from that message's time
    (an imported conversation of 2023 states its facts in 2023, not on import day)."""
    if not messages:
        return [None for _ in facts]
    users = [(m, _plain(m.content)) for m in reversed(messages) if m.role == "user"]
    last = messages[-1]
    out: list[SaidAt | None] = []
    for fact in facts:
        found = last
        for needle in (fact.source_context, fact.value):
            plain = _plain(_QUOTED_ROLE.sub("", needle or ""))
            hit = next((m for m, text in users if len(plain) >= 3 and plain in text), None)
            if hit is not None:
                found = hit
                break
        out.append(SaidAt(found.sequence_number, found.created_at))
    return out


_QUOTED_ROLE = re.compile(r"^\s*(user|assistant)\s*:\s*", re.IGNORECASE)


def _plain(text: str | None) -> str:
    return " ".join((text or "").casefold().split())
