"""Shapes shared with the sessions domain: compression events and the usage report.

Kept free of imports from ``app.domain.sessions`` so its schemas can use them.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from app.lib.inputs import NUL_PATTERN, Count

__all__ = ["CompressionStarted", "ContextCompressed", "ContextEvent", "ModelName", "UsageIn"]

ModelName = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=NUL_PATTERN)]


class CompressionStarted(msgspec.Struct, tag="CompressionStarted", tag_field="type"):
    """Compression is about to run on a context of ``context_tokens``."""

    context_tokens: int
    max_context_tokens: int


class ContextCompressed(msgspec.Struct, tag="ContextCompressed", tag_field="type"):
    """Compression ran: ``summary`` is empty when the hard-truncate fallback was used."""

    summary: str
    messages_before: int
    messages_after: int
    context_tokens: int
    max_context_tokens: int
    method: Literal["summary", "truncate"] = "summary"
    reason: str = ""


ContextEvent = CompressionStarted | ContextCompressed


class UsageIn(msgspec.Struct, forbid_unknown_fields=True):
    """What the runtime's LLM reported for the prompt that produced the appended reply.

    Client claims: they reach only this user's calibration and this session's baseline
    (`context.pricing.Pricing.calibrate`). ``sent_tokens``: the runtime's own estimate of
    the prompt it sent, the yardstick of a truncated prompt (default: Navi's estimate of
    the stored context it covered). ``had_images``: the prompt carried images, kept out
    of the fit (a prompt Navi knows had images is kept out anyway). ``sent_chars`` is
    accepted and not used: the calibration is fitted on Navi's own count of the prompt's
    characters, never on a client's.
    """

    model: ModelName
    prompt_eval_count: Count
    sent_chars: Count | None = None
    sent_tokens: Count | None = None
    had_images: bool | None = None
