"""The summary call: old messages in, bullet points and breadcrumbs (KEYS) out.

One chat request through the gateway (``think=False``): the profile's summary prompt as
the system message, the plain-text transcript (``format_for_summary`` →
``cut_summary_input``) as the user message, with the images that fit the image budget
attached when the profile's summary model reads images. The reply's final
``KEYS: …`` line is split off into the breadcrumbs.

When the messages to summarize hold several older summaries that are large together
(``needs_meta_summary``), those are first merged into one by a separate call, so old
summaries do not crowd out the new history in the summarizer's input.

Failures are raised as :class:`LLMError` (from the gateway) or :class:`SummaryError`
(an unusable reply); the compressor retries and falls back to hard truncation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import ollama
import structlog

from app.config import Settings
from app.domain.compression import (
    Msg,
    cut_summary_input,
    format_for_summary,
    needs_meta_summary,
    split_keys_line,
)
from app.domain.compression.summary_input import IMAGE_BUDGET_FRAC, MAX_KEYS
from app.domain.kernel.profiles import PROMPTS_DIR, Profile
from app.llm.gateway import LLMGateway

__all__ = ["LLMSummarizer", "Summarizer", "Summary", "SummaryError", "merge_keys"]

log = structlog.get_logger()

META_PROMPT_FILE = PROMPTS_DIR / "meta_summary.txt"


class SummaryError(Exception):
    """The summarizer answered, but not with a usable summary."""


@dataclass
class Summary:
    text: str
    keys: list[str] = field(default_factory=list)
    images_sent: int = 0
    images_omitted: int = 0


class Summarizer(Protocol):
    async def __call__(self, messages: Sequence[Msg], *, profile: Profile, window: int) -> Summary:
        """Summarize ``messages``; raise LLMError or SummaryError when that fails."""
        ...


def merge_keys(*groups: Sequence[str], limit: int = MAX_KEYS) -> list[str]:
    """Concatenate key lists, first spelling wins (case-insensitive), at most ``limit``."""
    out: list[str] = []
    seen: set[str] = set()
    for group in groups:
        for key in group:
            low = key.lower()
            if key and low not in seen:
                seen.add(low)
                out.append(key)
                if len(out) >= limit:
                    return out
    return out


def breadcrumbs_of(msg: Msg) -> list[str]:
    raw = msg.metadata.get("breadcrumbs") if msg.metadata else None
    return (
        [str(k) for k in raw if isinstance(k, str | int | float)] if isinstance(raw, list) else []
    )


def _with_keys(msg: Msg) -> Msg:
    """An older summary shown to the summarizer with its breadcrumbs, so they carry over."""
    keys = breadcrumbs_of(msg)
    if not msg.is_summary or not keys:
        return msg
    return dataclasses.replace(msg, content=f"{msg.content}\nKEYS: {', '.join(keys)}")


class LLMSummarizer:
    """:class:`Summarizer` over the LLM gateway."""

    def __init__(self, llm: LLMGateway, settings: Settings) -> None:
        self.llm = llm
        self.settings = settings

    async def _chat(
        self, system_prompt: str, text: str, images: list[bytes], profile: Profile
    ) -> tuple[str, list[str]]:
        user: dict[str, Any] = {"role": "user", "content": text}
        if images:
            # Sent base64-encoded. Wrapped in the client's Image type: the gateway validates
            # each message as an ``ollama.Message``, which does not coerce raw bytes.
            user["images"] = [ollama.Image(value=img) for img in images]
        result = await self.llm.chat(
            [{"role": "system", "content": system_prompt}, user],
            model=profile.summary_model,
            temperature=self.settings.context_summary_temperature,
            max_tokens=profile.summary_max_tokens,
            think=False,
        )
        summary, keys = split_keys_line(result.content.strip())
        summary = summary.strip()
        if not summary:
            raise SummaryError("the summarizer returned no summary text")
        return summary, keys

    async def merge_summaries(self, messages: list[Msg], profile: Profile) -> list[Msg]:
        """Replace the older summaries in ``messages`` by one merged summary."""
        olds = [m for m in messages if m.is_summary]
        text = "\n\n".join(
            f"Summary {i}:\n{_with_keys(m).content}" for i, m in enumerate(olds, start=1)
        )
        merged, keys = await self._chat(
            META_PROMPT_FILE.read_text(encoding="utf-8"), cut_summary_input(text), [], profile
        )
        keys = merge_keys(keys, *(breadcrumbs_of(m) for m in olds))
        first = olds[0]
        meta = dataclasses.replace(
            first, content=merged, metadata={**first.metadata, "breadcrumbs": keys}
        )
        log.info("compressor.meta_summary", summaries=len(olds), chars=len(merged))
        out: list[Msg] = []
        for m in messages:
            if m is first:
                out.append(meta)
            elif not m.is_summary:
                out.append(m)
        return out

    async def __call__(self, messages: Sequence[Msg], *, profile: Profile, window: int) -> Summary:
        msgs = list(messages)
        if needs_meta_summary(msgs):
            msgs = await self.merge_summaries(msgs, profile)
        prepared = format_for_summary(
            [_with_keys(m) for m in msgs],
            window=window,
            image_budget_frac=IMAGE_BUDGET_FRAC if profile.vision else 0.0,
            image_fallback=self.settings.context_image_tokens,
            critical_tools=profile.critical_tools,
        )
        text = cut_summary_input(prepared.text)
        summary, keys = await self._chat(profile.summary_prompt, text, prepared.images, profile)
        return Summary(
            text=summary,
            keys=keys,
            images_sent=len(prepared.images),
            images_omitted=prepared.omitted_images,
        )
