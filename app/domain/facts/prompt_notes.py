"""The facts a prompt carries: the user summary and the facts relevant to the turn."""

from __future__ import annotations

from datetime import UTC, datetime

from app.domain.facts.render import fact_lines, memory_message
from app.domain.facts.services import FactService

# Facts listed in every prompt: the most relevant to the turn when a query is given,
# else the most confident. A cap of ours (the seed names none): the list rides in every
# prompt, the summary covers the rest (docs/memory.md, "Injection").
PROMPT_FACTS = 20


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
    lines = fact_lines(facts, datetime.now(UTC)) if facts else None
    return (summary["content"] if summary else None), lines
