"""The LLM calls of the rolling summary, through the gateway: per chunk, the summary call
(the previous summary and the new messages → the new summary: `rolling_summary.txt`) and
the optional noise filter's decision call (`rolling_noise.txt`, ROLLING_SUMMARY_NOISE_FILTER).
The job that drives them, chunk by chunk, is services.py's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from app.config import Settings
from app.domain.rolling.summary import (
    EMPTY_SUMMARY,
    SummaryParseError,
    TranscriptMessage,
    exchanges,
    normalize_summary,
    numbered_exchanges,
    parse_noise,
    parse_summary,
    render_transcript,
)
from app.llm.gateway import LLMError, LLMGateway

log = structlog.get_logger()

PROMPTS = Path(__file__).resolve().parents[2] / "llm" / "prompts"
SUMMARY_PROMPT = PROMPTS / "rolling_summary.txt"
NOISE_PROMPT = PROMPTS / "rolling_noise.txt"
SUMMARY_MAX_TOKENS = 2048


def reply_lang_rule(reply_lang: str) -> str:
    lang = (reply_lang or "auto").strip()
    if lang.lower() == "auto":
        return (
            "Write the text of every field in the language the conversation is mostly "
            "in; Chinese always as Traditional Chinese (Taiwan). The markers stay English."
        )
    return f"Write the text of every field in {lang}. The markers stay English."


def summary_prompt(previous: dict[str, Any] | None, reply_lang: str) -> str:
    doc = normalize_summary(previous) if previous else EMPTY_SUMMARY
    return (
        SUMMARY_PROMPT.read_text(encoding="utf-8")
        .replace("{{SUMMARY}}", json.dumps(doc, ensure_ascii=False, indent=1))
        .replace("{{REPLY_LANG}}", reply_lang_rule(reply_lang))
    )


def noise_prompt(previous: dict[str, Any] | None) -> str:
    doc = normalize_summary(previous) if previous else EMPTY_SUMMARY
    numbered = {
        "key_decisions": {str(i): d for i, d in enumerate(doc["key_decisions"], 1)},
        "past_discussions": {str(i): p for i, p in enumerate(doc["past_discussions"], 1)},
        "current_discussion": doc["current_discussion"],
    }
    return NOISE_PROMPT.read_text(encoding="utf-8").replace(
        "{{SUMMARY}}", json.dumps(numbered, ensure_ascii=False, indent=1)
    )


@dataclass(frozen=True)
class RollingProfile:
    """What the job needs of a profile."""

    id: str
    reply_lang: str = "auto"
    model: str | None = None  # None = the gateway's chat model


class RollingSummarizer:
    """The LLM calls of the rolling summary (through the gateway)."""

    def __init__(self, llm: LLMGateway, settings: Settings) -> None:
        self.llm = llm
        self.settings = settings

    async def summarise(
        self,
        previous: dict[str, Any] | None,
        msgs: list[TranscriptMessage],
        profile: RollingProfile,
    ) -> dict[str, Any]:
        """One call: previous summary + new messages → the new summary. Raises LLMError
        or SummaryParseError."""
        result = await self.llm.chat(
            [
                {"role": "system", "content": summary_prompt(previous, profile.reply_lang)},
                {"role": "user", "content": "New messages:\n\n" + render_transcript(msgs)},
            ],
            model=profile.model,
            temperature=0.2,
            max_tokens=SUMMARY_MAX_TOKENS,
            think=False,
        )
        return parse_summary(result.content)

    async def filter_noise(
        self,
        previous: dict[str, Any] | None,
        msgs: list[TranscriptMessage],
        profile: RollingProfile,
    ) -> tuple[list[TranscriptMessage], dict[str, Any] | None]:
        """(messages kept, previous summary trimmed). Any failure keeps everything."""
        groups = exchanges(msgs)
        try:
            result = await self.llm.chat(
                [
                    {"role": "system", "content": noise_prompt(previous)},
                    {"role": "user", "content": numbered_exchanges(groups)},
                ],
                model=profile.model,
                temperature=0.0,
                max_tokens=512,
                think=False,
            )
            drop, trimmed = parse_noise(result.content, len(groups), normalize_summary(previous))
        except (LLMError, SummaryParseError) as exc:
            log.info("rolling.noise_filter_failed", error=str(exc)[:200])
            return msgs, previous
        kept = [m for n, g in enumerate(groups, 1) if n not in drop for m in g]
        return kept, (trimmed if previous is not None else None)
