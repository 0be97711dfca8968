"""What every input must satisfy before it reaches PostgreSQL (docs/api.md, "Limits").

Pure functions and msgspec/Litestar constraint types, used by the schemas and services:

* **NUL (U+0000)**, the one code point PostgreSQL `text` and `jsonb` cannot hold.
  Free text that comes from models and tools (message content, thinking, tool calls,
  tool results, metadata, fact values, summaries, scratchpad values, error-memory text)
  is *kept*: `scrub` replaces each NUL with U+FFFD and says whether it did, so the caller
  can mark what it stores (a message gets `metadata.sanitized: true`). Identifiers and
  keys (names, profile ids, categories, fact keys, sections, tool names, query and path
  parameters) are refused: `NoNul` in a schema, `reject_nul` in code → 422 naming the field.
* **Integers** are bounded by the column they land in: `INT4_MAX` / `INT8_MAX`.
* **Timestamps** a client may set lie between `EARLIEST` and `LATEST` (UTC): PostgreSQL
  would store year 10000, and every later read of it would fail in Python.
* **JSON nesting**: a request body nests at most `MAX_JSON_DEPTH` arrays and objects,
  the body itself counting as one (`check_depth`, run on every decoded JSON body).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import msgspec

from app.lib.errors import Unprocessable

__all__ = [
    "INT4_MAX",
    "INT8_MAX",
    "MAX_JSON_DEPTH",
    "NUL_PATTERN",
    "REPLACEMENT",
    "Count",
    "NoNul",
    "SeqNo",
    "check_depth",
    "check_time",
    "explain_pattern",
    "reject_nul",
    "scrub",
    "scrub_text",
]

T = TypeVar("T")

NUL = "\x00"
_ESCAPED_NUL = b"\\u0000"
REPLACEMENT = "\ufffd"
MAX_JSON_DEPTH = 32
INT4_MAX = 2**31 - 1  # integer columns: token counts, usage figures, offsets
INT8_MAX = 2**63 - 1  # bigint columns: sequence numbers, fact ids

# A string without NUL, for msgspec `Meta(pattern=…)` / Litestar `Parameter(pattern=…)`.
NUL_PATTERN = "^[^\\x00]*$"
NUL_DETAIL = "must not contain a NUL character (U+0000)"

# A day inside Python's datetime range, so that no time zone can push a value out of it.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)

NoNul = msgspec.Meta(pattern=NUL_PATTERN)
Count = Annotated[int, msgspec.Meta(ge=0, le=INT4_MAX)]
SeqNo = Annotated[int, msgspec.Meta(ge=0, le=INT8_MAX)]


def scrub_text(text: str) -> str:
    return text.replace(NUL, REPLACEMENT) if NUL in text else text


def scrub(value: T) -> tuple[T, bool]:
    """`value` with every NUL in its strings (dict keys included) replaced by U+FFFD,
    and whether there was one. Unchanged values are returned as they are (no copy)."""
    if isinstance(value, str):
        if NUL in value:
            return value.replace(NUL, REPLACEMENT), True  # type: ignore[return-value]
        return value, False
    if not isinstance(value, dict | list | tuple):
        return value, False
    # JSON escapes a NUL as \u0000: one C-speed encode spares the walk of clean values.
    if _ESCAPED_NUL not in msgspec.json.encode(value):
        return value, False
    return _walk(value)


def _walk(value: Any) -> tuple[Any, bool]:
    if isinstance(value, str):
        return (value.replace(NUL, REPLACEMENT), True) if NUL in value else (value, False)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        changed = False
        for k, v in value.items():
            k2, c1 = _walk(k)
            v2, c2 = _walk(v)
            out[k2] = v2
            changed = changed or c1 or c2
        return (out, True) if changed else (value, False)
    if isinstance(value, list | tuple):
        items = [_walk(v) for v in value]
        if any(c for _, c in items):
            return type(value)(v for v, _ in items), True
    return value, False


def reject_nul(value: str | None, field: str) -> str | None:
    """`value` itself; 422 naming `field` when it holds a NUL (identifiers, keys)."""
    if value is not None and NUL in value:
        raise Unprocessable(f"{field}: {NUL_DETAIL}")
    return value


def check_time(value: datetime, field: str) -> datetime:
    """`value` with a time zone (naive means UTC: returned as UTC, never left for
    PostgreSQL to read in its session's TimeZone); 422 naming `field` outside
    EARLIEST..LATEST."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if not EARLIEST <= aware <= LATEST:
        raise Unprocessable(f"{field}: out of range (0001-01-02 to 9999-12-30 UTC)")
    return aware


def explain_pattern(message: str) -> str:
    """msgspec's "Expected `str` matching regex '^[^\\x00]*$'" in plain words."""
    shown = f"Expected `str` matching regex {NUL_PATTERN!r}"
    return message.replace(shown, NUL_DETAIL)


def _deepest_path(value: Any, limit: int) -> str:
    """Where `value` first nests past `limit` (only called once it does)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        node, path, depth = stack.pop()
        if depth > limit:
            return path or "body"
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if isinstance(child, dict | list):
                if isinstance(key, int):
                    sub = f"{path}[{key}]"
                else:
                    sub = f"{path}.{key}" if path else str(key)
                stack.append((child, sub, depth + 1))
    return "body"


def check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """422 when `value` nests more than `limit` arrays/objects (itself counting as one).
    Level by level, without recursion: a 100,000-level value costs one pass."""
    level = [value] if isinstance(value, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            where = _deepest_path(value, limit)
            raise Unprocessable(f"{where}: JSON nested more than {limit} levels deep")
        nxt: list[Any] = []
        for node in level:
            children = node.values() if type(node) is dict else node
            nxt += [c for c in children if type(c) is dict or type(c) is list]
        level = nxt
