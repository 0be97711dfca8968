"""The facts a prompt carries: the user summary and the facts relevant to the turn."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.domain.facts.render import fact_lines, memory_message
from app.domain.facts.services import FactService

# Facts listed in every prompt: the most relevant to the turn when a query is given,
# else the most confident. A cap of ours (the seed names none): the list rides in every
# prompt, the summary covers the rest (docs/memory.md, "Injection").
PROMPT_FACTS = 20
# Of those, the ones whose value changed in the last CHANGED_WITHIN_DAYS days say what it
# was and when it changed — the CHANGED_MARKS most recent changes at most (each mark is a
# few words more in every prompt; docs/memory.md, "Versions").
CHANGED_WITHIN_DAYS = 30
CHANGED_MARKS = 5


async def memory_notes(
    service: FactService, user_id: str, query: str
) -> tuple[str | None, str | None]:
    """(the summary system message text, the facts list text) for a prompt."""
    summary_row = await service.get_summary(user_id)
    summary = memory_message(summary_row.content if summary_row else None)
    facts = []
    if query.strip():
        facts = (await service.search_facts(query, user_id, PROMPT_FACTS)).hits
    if not facts:
        facts = await service.get_all_facts(  # type: ignore[assignment]
            user_id, limit=PROMPT_FACTS, sort_by="confidence", sort_order="desc"
        )
    now = datetime.now(UTC)
    lines = None
    if facts:
        changes = await service.versions.previous_values(
            user_id, [f.id for f in facts], now - timedelta(days=CHANGED_WITHIN_DAYS)
        )
        newest = sorted(changes.items(), key=lambda c: c[1][1], reverse=True)[:CHANGED_MARKS]
        lines = fact_lines(facts, now, dict(newest))
    return (summary["content"] if summary else None), lines
