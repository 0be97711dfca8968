"""How remembered facts reach a prompt (pure).

* `memory_message(summary)` — the per-user narrative summary as one system message,
  inserted after the main system prompt and before the history;
* `fact_line(fact, now)` — one fact per line, with its confidence and its age, so a
  stale fact reads as stale:  `• [preferences] editor → neovim (confidence: 90%, updated
  34d ago)`;
  a fact whose value changed recently also says what it was and when it changed:
  `• [home] city → Berlin (confidence: 70%, updated 3d ago; changed 2026-12-02, was:
  Lyon)` (which facts, and how many, is `prompt_notes`' choice);
* `fallback_summary(facts)` — the deterministic summary used when the summary LLM call
  fails: one bullet per fact, grouped by category.

Age rules (`age_label`), from `now - updated_at` in whole days: under one day (or in the
future, clock skew) → `today`; 1–59 days → `Nd ago`; 60–729 days → `Nmo ago` (30-day
months); from 730 days → `Ny ago` (365-day years).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol

__all__ = [
    "MEMORY_HEADER",
    "age_label",
    "fact_line",
    "fact_lines",
    "fallback_summary",
    "memory_message",
]

MEMORY_HEADER = "## What I remember about the user"
LINE_VALUE_CHARS = 500
SUMMARY_MAX_FACTS = 200

_WS = re.compile(r"\s+")


class FactLike(Protocol):
    @property
    def category(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def confidence(self) -> int: ...
    @property
    def updated_at(self) -> datetime: ...


def _one_line(text: str, limit: int = LINE_VALUE_CHARS) -> str:
    flat = _WS.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def memory_message(summary: str | None) -> dict[str, Any] | None:
    """The summary as a system message, or None when there is nothing to say."""
    if summary is None or not summary.strip():
        return None
    return {"role": "system", "content": f"{MEMORY_HEADER}\n\n{summary.strip()}"}


def age_label(updated_at: datetime, now: datetime) -> str:
    days = (now - updated_at).days  # floor; negative when updated_at is in the future
    if days < 1:
        return "today"
    if days < 60:
        return f"{days}d ago"
    if days < 730:
        return f"{days // 30}mo ago"
    return f"{days // 365}y ago"


#: A fact's previous value and when the current one replaced it.
Change = tuple[str, datetime]
PREVIOUS_VALUE_CHARS = 120


def fact_line(fact: FactLike, now: datetime, change: Change | None = None) -> str:
    age = age_label(fact.updated_at, now)
    updated = "updated today" if age == "today" else f"updated {age}"
    if change is not None:
        was, at = change
        updated += f"; changed {at.date().isoformat()}, was: {_one_line(was, PREVIOUS_VALUE_CHARS)}"
    return (
        f"• [{fact.category}] {fact.key} → {_one_line(fact.value)} "
        f"(confidence: {fact.confidence}%, {updated})"
    )


def fact_lines(
    facts: Iterable[FactLike], now: datetime, changes: Mapping[int, Change] | None = None
) -> str:
    """`changes`: by fact id, the facts to mark as changed recently."""
    marks = changes or {}
    return "\n".join(fact_line(f, now, marks.get(getattr(f, "id", -1))) for f in facts)


def fallback_summary(facts: Iterable[FactLike]) -> str:
    """Bullets grouped by category (categories sorted, highest confidence first)."""
    by_category: dict[str, list[FactLike]] = {}
    for fact in list(facts)[:SUMMARY_MAX_FACTS]:
        by_category.setdefault(fact.category, []).append(fact)
    parts: list[str] = []
    for category in sorted(by_category):
        rows = sorted(by_category[category], key=lambda f: (-f.confidence, f.key))
        parts.append(f"{category.capitalize()}:")
        parts.extend(f"- {f.key.replace('_', ' ')}: {_one_line(f.value, 300)}" for f in rows)
        parts.append("")
    return "\n".join(parts).strip()
