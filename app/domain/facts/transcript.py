"""Extraction's pure half: the transcript the LLM reads, and the facts it answers with.

`render_transcript` turns a session's conversation into plain text — user and assistant
messages, `[Tool call] name(args)` and `[Tool result] name: output` (cut at 500
characters) — and `clip_middle` keeps its head and tail within 12,000 characters.

`parse_facts` reads the reply leniently: a JSON array, possibly inside a code fence or
between sentences, a `{"facts": [...]}` object, or a single fact object; `<think>` blocks
are ignored. A reply with no usable JSON at all raises `ReplyFormatError` (the caller
retries, then leaves the session for a later pass). Items that cannot be stored are
returned as problems, one line each, so the caller logs every dropped item.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.domain.facts.schemas import MAX_CATEGORY, MAX_KEY, MAX_SOURCE_CONTEXT, MAX_VALUE, SOURCES

__all__ = [
    "TOOL_OUTPUT_CHARS",
    "TRANSCRIPT_MAX_CHARS",
    "ExtractedFact",
    "ReplyFormatError",
    "clip_middle",
    "parse_facts",
    "render_transcript",
    "strip_think",
]

TOOL_OUTPUT_CHARS = 500
TRANSCRIPT_MAX_CHARS = 12_000
DEFAULT_CATEGORY = "general"
_MAX_JSON_STARTS = 200  # candidate `[`/`{` positions tried before giving up

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)


class ReplyFormatError(ValueError):
    """The reply holds no JSON array (or object) of facts."""


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


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, dict):
        return None
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value if v is not None)
    return str(value).strip() or None


def parse_facts(reply: str) -> tuple[list[ExtractedFact], list[str]]:
    """(facts, problems). Raises ReplyFormatError when the reply holds no fact list."""
    items = _find_items(strip_think(reply))
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
            problems.append(f"item {i}: missing key or value")
            continue
        if len(key) > MAX_KEY or len(category) > MAX_CATEGORY:
            problems.append(f"item {i}: key or category too long ({key[:60]!r})")
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
    return facts, problems
