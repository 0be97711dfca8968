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

    ``sent_chars`` / ``sent_tokens``: the runtime's own size of the prompt it sent
    (default: Navi's count and estimate of the stored context it covered).
    ``had_images``: the prompt carried images (default: judged from the stored context).
    """

    model: ModelName
    prompt_eval_count: Count
    sent_chars: Count | None = None
    sent_tokens: Count | None = None
    had_images: bool | None = None
