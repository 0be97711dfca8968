"""Token estimates of the context *as the model receives it*.

The stored context may hold a megabyte-long tool result that the context
builder caps per message before sending. Every estimate here prices that
capped view (:func:`truncate_for_view`), never the raw row, so the gates and
the size guard decide on the prompt the model actually gets.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

from .calibration import Calibration
from .image_tokens import DEFAULT_IMAGE_TOKENS, image_tokens
from .types import Msg

__all__ = [
    "ContextTooLargeError",
    "added_tokens",
    "check_context_size",
    "context_chars",
    "context_limit",
    "estimate_tokens",
    "images_tokens",
    "message_chars",
    "real_baseline_estimate",
    "tool_calls_json",
    "truncate_for_view",
    "view_budget_tokens",
]

_VIEW_MARKER = "\n\n[… {} chars omitted from this message …]\n\n"


def tool_calls_json(tool_calls: list[dict[str, Any]] | None) -> str:
    """Compact JSON of a tool-call list ("" when there is none)."""
    if not tool_calls:
        return ""
    return json.dumps(tool_calls, ensure_ascii=False, separators=(",", ":"), default=str)


def message_chars(msg: Msg) -> int:
    """Characters a message contributes to the prompt (images excluded)."""
    return (
        len(msg.role)
        + len(msg.content)
        + len(tool_calls_json(msg.tool_calls))
        + len(msg.name or "")
        + len(msg.tool_call_id or "")
    )


def context_chars(messages: Iterable[Msg]) -> int:
    """Total :func:`message_chars` — the value to record in the calibration."""
    return sum(message_chars(m) for m in messages)


def view_budget_tokens(window: int, configured_budget: int = 0) -> int:
    """Per-message view budget: the configured one, or ``window // 6`` when 0."""
    if configured_budget > 0:
        return configured_budget
    return max(1, window // 6)


def truncate_for_view(msg: Msg, budget_tokens: int, calib: Calibration) -> Msg:
    """The message as the model is sent it.

    Content longer than ``budget_tokens`` (converted to characters at the
    calibration's marginal rate) is cut to that budget: the first half and
    the last half of the allowance are kept around an omission marker. The
    result never exceeds the character allowance. The original object is
    returned untouched when it fits; otherwise a copy is returned with
    ``metadata["view_truncated_from"]`` holding the original length. Tool-call
    arguments and images are never cut here (images are priced separately).
    """
    limit = calib.chars_for_tokens(budget_tokens)
    content = msg.content
    if len(content) <= limit:
        return msg
    widest_marker = len(_VIEW_MARKER.format(len(content)))
    available = limit - widest_marker
    if available <= 0:
        new_content = content[:limit]
    else:
        head = available // 2
        tail = available - head
        omitted = len(content) - head - tail
        new_content = (
            content[:head] + _VIEW_MARKER.format(omitted) + (content[-tail:] if tail else "")
        )
    metadata = {**msg.metadata, "view_truncated_from": len(content)}
    return dataclasses.replace(msg, content=new_content, metadata=metadata)


def images_tokens(messages: Iterable[Msg], fallback: int = DEFAULT_IMAGE_TOKENS) -> int:
    """Summed per-image cost of every image attached to ``messages``."""
    return sum(image_tokens(img, fallback) for m in messages for img in (m.images or ()))


def _view_chars(messages: Iterable[Msg], calib: Calibration, budget: int) -> int:
    return sum(message_chars(truncate_for_view(m, budget, calib)) for m in messages)


def estimate_tokens(
    messages: Sequence[Msg],
    calib: Calibration,
    *,
    window: int,
    message_budget: int = 0,
    image_fallback: int = DEFAULT_IMAGE_TOKENS,
) -> int:
    """Estimated real prompt tokens of ``messages`` (text view + images): the whole
    prompt, the calibration's overhead included (bounded by the window)."""
    if not messages:
        return 0
    budget = view_budget_tokens(window, message_budget)
    text = calib.estimate(_view_chars(messages, calib, budget), window)
    return text + images_tokens(messages, image_fallback)


def added_tokens(
    messages: Sequence[Msg],
    calib: Calibration,
    *,
    window: int,
    message_budget: int = 0,
    image_fallback: int = DEFAULT_IMAGE_TOKENS,
) -> int:
    """Tokens ``messages`` add to a prompt priced on its own: their view at the marginal
    rate plus their images, no overhead (the prompt's one overhead is in its estimate
    or its real baseline). For the parts of a prompt priced apart: the profile's system
    prompt, the injected memory notes, the messages after a real baseline."""
    if not messages:
        return 0
    budget = view_budget_tokens(window, message_budget)
    text = calib.estimate_delta(_view_chars(messages, calib, budget))
    return text + images_tokens(messages, image_fallback)


def real_baseline_estimate(
    messages: Sequence[Msg],
    *,
    baseline_tokens: int | None,
    baseline_count: int,
    calib: Calibration,
    window: int,
    message_budget: int = 0,
    image_fallback: int = DEFAULT_IMAGE_TOKENS,
) -> int:
    """Real bulk + calibrated delta.

    ``baseline_tokens`` is the real ``prompt_eval_count`` measured when the
    context held its first ``baseline_count`` messages. The messages appended
    since are priced at the marginal rate (no second overhead — the baseline
    already contains it) plus their images. Without a usable baseline
    (missing, non-positive, or the context shrank below ``baseline_count``)
    this is :func:`estimate_tokens` of the whole list.
    """
    if (
        baseline_tokens is None
        or baseline_tokens <= 0
        or baseline_count <= 0
        or baseline_count > len(messages)
    ):
        return estimate_tokens(
            messages,
            calib,
            window=window,
            message_budget=message_budget,
            image_fallback=image_fallback,
        )
    return baseline_tokens + added_tokens(
        messages[baseline_count:],
        calib,
        window=window,
        message_budget=message_budget,
        image_fallback=image_fallback,
    )


class ContextTooLargeError(Exception):
    """The prompt would not fit the model's window (after the output reserve)."""

    def __init__(self, tokens: int, limit: int, message: str) -> None:
        super().__init__(message)
        self.tokens = tokens
        self.limit = limit
        self.message = message

    def body(self) -> dict[str, str | int]:
        """The HTTP answer's body (422 `context_too_large`, the house error shape)."""
        return {
            "error": "context_too_large",
            "detail": self.message,
            "tokens": self.tokens,
            "limit": self.limit,
        }


def context_limit(window: int, output_reserve_tokens: int) -> int:
    """Largest admissible prompt: the window minus a reserve capped at window // 4."""
    reserve = min(max(0, output_reserve_tokens), window // 4)
    return window - reserve


def check_context_size(tokens: int, window: int, output_reserve_tokens: int) -> None:
    """Raise :class:`ContextTooLargeError` when ``tokens`` exceed the limit.

    The message is written for the user, to pass on: both callers answer 422
    ``context_too_large`` with it as the ``detail`` (:meth:`ContextTooLargeError.body`)
    — ``POST /sessions/{id}/prepare``, and the turn endpoint (before the turn; between
    rounds as its ``context_too_large`` error, status 422). It is never stored or sent
    as an assistant reply.
    """
    limit = context_limit(window, output_reserve_tokens)
    if tokens <= limit:
        return
    message = (
        f"I can't continue this conversation as it is: the context is now about "
        f"{tokens:,} tokens, but this model accepts at most {limit:,} tokens of input "
        f"(a {window:,}-token window minus room for my reply). "
        "Please run /compact to summarize older messages, or start a new session."
    )
    raise ContextTooLargeError(tokens, limit, message)
