"""Preparing the input of the summarization call and reading its output.

Pure text shaping: the LLM call itself lives with the caller.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .image_tokens import DEFAULT_IMAGE_TOKENS, image_tokens
from .types import Msg

__all__ = [
    "CRITICAL_HALF_CHARS",
    "CRITICAL_RESULT_CHARS",
    "MAX_KEYS",
    "MAX_SUMMARY_INPUT_CHARS",
    "META_SUMMARY_THRESHOLD",
    "TOOL_ARGS_PREVIEW_CHARS",
    "TOOL_RESULT_PREVIEW_CHARS",
    "SummaryInput",
    "cut_summary_input",
    "format_for_summary",
    "format_message",
    "needs_meta_summary",
    "split_keys_line",
    "tool_call_preview",
]

TOOL_ARGS_PREVIEW_CHARS = 120
TOOL_RESULT_PREVIEW_CHARS = 800
CRITICAL_RESULT_CHARS = 4000
CRITICAL_HALF_CHARS = 2000
MAX_SUMMARY_INPUT_CHARS = 32_000
SUMMARY_HEAD_SHARE = 0.75
META_SUMMARY_THRESHOLD = 10_600
MAX_KEYS = 30
MAX_KEY_CHARS = 200
IMAGE_BUDGET_FRAC = 0.25

_CUT_MARKER = "\n\n[… {} chars of the middle of the history omitted …]\n\n"
_KEYS_RE = re.compile(r"^[\s>*_`#-]*keys[\s*_`]*:(?P<body>.*)$", re.IGNORECASE)
_KEY_STRIP = " \t*_`\"'.;"
_NO_KEYS = frozenset({"", "none", "n/a", "na", "-", "—", "nothing"})


@dataclass
class SummaryInput:
    """Text for the summarizer plus the images that fit the image budget."""

    text: str
    images: list[bytes] = field(default_factory=list)
    omitted_images: int = 0
    image_tokens: int = 0


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_call_preview(call: dict[str, Any]) -> str:
    """``→ name(args)`` with the JSON arguments cut to 120 characters."""
    fn = call.get("function", call)
    name = str(fn.get("name") or "tool") if isinstance(fn, dict) else "tool"
    args: Any = fn.get("arguments", {}) if isinstance(fn, dict) else {}
    if isinstance(args, str):
        args_text = args
    else:
        args_text = json.dumps(args, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"→ {name}({_cut(args_text, TOOL_ARGS_PREVIEW_CHARS)})"


def _tool_result_text(msg: Msg, critical: bool) -> str:
    text = msg.content
    if critical:
        if len(text) <= CRITICAL_RESULT_CHARS:
            return text
        omitted = len(text) - 2 * CRITICAL_HALF_CHARS
        return (
            text[:CRITICAL_HALF_CHARS]
            + f"\n[… {omitted} chars elided …]\n"
            + text[-CRITICAL_HALF_CHARS:]
        )
    if len(text) <= TOOL_RESULT_PREVIEW_CHARS:
        return text
    rest = len(text) - TOOL_RESULT_PREVIEW_CHARS
    return text[:TOOL_RESULT_PREVIEW_CHARS] + f"… [+{rest} chars]"


def format_message(msg: Msg, critical_tools: Iterable[str] = ()) -> str:
    """One message as a plain-text block (images are noted by the caller)."""
    if msg.role == "tool":
        critical = msg.is_compression_critical or (msg.name or "") in set(critical_tools)
        label = f"Tool result ({msg.name})" if msg.name else "Tool result"
        return f"{label}: {_tool_result_text(msg, critical)}"
    if msg.role == "user":
        if msg.is_summary:
            return f"Earlier summary:\n{msg.content}"
        return f"User: {msg.content}"
    if msg.role == "system":
        return f"System: {msg.content}"
    lines = []
    if msg.content or not msg.tool_calls:
        lines.append(f"Assistant: {msg.content}")
    else:
        lines.append("Assistant:")
    lines.extend(f"  {tool_call_preview(c)}" for c in msg.tool_calls or ())
    return "\n".join(lines)


def format_for_summary(
    messages: Sequence[Msg],
    *,
    window: int,
    image_budget_frac: float = IMAGE_BUDGET_FRAC,
    image_fallback: int = DEFAULT_IMAGE_TOKENS,
    critical_tools: Iterable[str] = (),
) -> SummaryInput:
    """Plain-text transcript of ``messages`` and the images that fit the budget.

    Images are admitted first-fit in chronological order while the summed
    :func:`image_tokens` stay within ``window × image_budget_frac``; an image
    that does not fit is skipped (a later, smaller one may still fit). Each
    message notes its attached images as ``[N image(s) attached]`` and the
    left-out ones as ``[+ N image(s)]`` so the summarizer knows they existed.
    """
    budget = window * image_budget_frac
    critical = frozenset(critical_tools)
    images: list[bytes] = []
    used = 0
    omitted = 0
    blocks: list[str] = []
    for msg in messages:
        block = format_message(msg, critical)
        attached = skipped = 0
        for img in msg.images or ():
            cost = image_tokens(img, image_fallback)
            if used + cost <= budget:
                images.append(img)
                used += cost
                attached += 1
            else:
                skipped += 1
        if attached:
            block += f"\n[{attached} image(s) attached]"
        if skipped:
            block += f"\n[+ {skipped} image(s)]"
        omitted += skipped
        blocks.append(block)
    return SummaryInput("\n\n".join(blocks), images, omitted, used)


def cut_summary_input(text: str, max_chars: int = MAX_SUMMARY_INPUT_CHARS) -> str:
    """Cap ``text`` at ``max_chars``: 75 % head (oldest) + 25 % tail (newest).

    The omission marker is counted inside the budget, so the result never
    exceeds ``max_chars``.
    """
    if len(text) <= max_chars:
        return text
    marker_room = len(_CUT_MARKER.format(len(text)))
    available = max_chars - marker_room
    if available <= 0:
        return text[:max_chars]
    head = int(available * SUMMARY_HEAD_SHARE)
    tail = available - head
    omitted = len(text) - head - tail
    return text[:head] + _CUT_MARKER.format(omitted) + (text[-tail:] if tail else "")


def needs_meta_summary(messages: Iterable[Msg], threshold: int = META_SUMMARY_THRESHOLD) -> bool:
    """True when ≥ 2 existing summaries together exceed ``threshold`` chars."""
    summaries = [m for m in messages if m.is_summary]
    return len(summaries) >= 2 and sum(len(m.content) for m in summaries) > threshold


def split_keys_line(text: str) -> tuple[str, list[str]]:
    """Remove a final ``KEYS: a, b, c`` line and return ``(summary, keys)``.

    Only the last non-blank line is considered. ``KEYS`` is matched
    case-insensitively and may be wrapped in markdown emphasis or backticks
    (``**KEYS:** …``, ```KEYS: …```, ``- KEYS: …``). Keys are split on commas
    or semicolons, stripped of quotes/emphasis, deduplicated
    case-insensitively (first spelling wins) and capped at 30.
    ``KEYS: NONE`` (or empty) yields ``[]``. Without a KEYS line the text is
    returned unchanged with ``[]``.
    """
    lines = text.splitlines()
    idx = len(lines) - 1
    while idx >= 0 and not lines[idx].strip():
        idx -= 1
    if idx < 0:
        return text, []
    match = _KEYS_RE.match(lines[idx])
    if match is None:
        return text, []
    summary = "\n".join(lines[:idx]).rstrip()
    body = match.group("body").strip().strip("*_`").strip()
    if body.lower().strip(_KEY_STRIP) in _NO_KEYS:
        return summary, []
    keys: list[str] = []
    seen: set[str] = set()
    for raw in re.split(r"[,;]", body):
        key = raw.strip(_KEY_STRIP)[:MAX_KEY_CHARS].strip()
        if not key or key.lower() in seen or key.lower() in _NO_KEYS:
            continue
        seen.add(key.lower())
        keys.append(key)
        if len(keys) >= MAX_KEYS:
            break
    return summary, keys
