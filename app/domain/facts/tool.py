"""The `memory` tool: one call with an `action`, answered with data plus a `text` the
agent runtime hands back to the model verbatim."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from app.domain.facts.render import fact_lines
from app.domain.facts.schemas import (
    DEFAULT_SEARCH_LIMIT,
    CategoryCount,
    MemoryToolCall,
    MemoryToolResult,
)
from app.domain.facts.services import FactService, fact_out, normalise_name
from app.domain.facts.versions import version_out
from app.domain.kernel.repositories import SessionLookupRepository
from app.lib.errors import Unprocessable

_REQUIRED = {
    "save": ("category", "key", "value"),
    "search": ("query",),
    "forget": ("key",),
    "list": (),
    "history": ("key",),
}


def _check_required(call: MemoryToolCall) -> None:
    for name in _REQUIRED[call.action]:
        value = getattr(call, name)
        if value is None or not str(value).strip():
            also = " (or text, to forget a text everywhere)" if call.action == "forget" else ""
            raise Unprocessable(f"{name}: required for action {call.action!r}{also}")


async def run_memory_tool(
    service: FactService,
    user_id: str,
    call: MemoryToolCall,
    session_id: uuid.UUID | None = None,
) -> MemoryToolResult:
    """Every action but `forget` with a `text`, which app/domain/forget/tool.py runs
    (it redacts every store, above this one) before handing the rest here. `session_id`:
    the conversation the call was made in (a saved value's version records it)."""
    _check_required(call)
    if call.action == "save":
        assert call.category is not None and call.key is not None and call.value is not None
        result = await service.upsert_fact(
            user_id,
            call.category,
            call.key,
            call.value,
            source=call.source or "conversation",
            confidence=call.confidence,
            expires_days=call.expires_days,
            source_context=call.source_context,
            source_session_id=session_id,
            message_seq=(
                await SessionLookupRepository(service.db).last_user_seq(user_id, session_id)
                if session_id is not None
                else None
            ),
        )
        row = result.fact
        text = f"Saved [{row.category}] {row.key} → {row.value} (confidence: {row.confidence}%)."
        if call.expires_days:
            text += f" Expires in {call.expires_days} day(s)."
        return MemoryToolResult(action="save", ok=True, text=text, fact=fact_out(row))

    if call.action == "search":
        assert call.query is not None
        found = await service.search_facts(call.query, user_id, call.limit or DEFAULT_SEARCH_LIMIT)
        if not found.hits:
            text = f"No saved facts match {call.query.strip()!r}."
        else:
            text = f"{len(found.hits)} fact(s) for {call.query.strip()!r}:\n" + fact_lines(
                found.hits, datetime.now(UTC)
            )
        return MemoryToolResult(action="search", ok=True, text=text, facts=found.hits)

    if call.action == "forget":
        assert call.key is not None
        deleted = await service.delete_fact(user_id, call.key, call.category)
        where = f" in {call.category.strip()!r}" if call.category else ""
        if deleted:
            text = f"Forgot {call.key.strip()!r}{where}."
        else:
            text = f"Nothing to forget: no fact with key {call.key.strip()!r}{where}."
        return MemoryToolResult(action="forget", ok=bool(deleted), text=text, deleted=deleted)

    if call.action == "history":
        return await _history(service, user_id, call)

    categories = [CategoryCount(c, n) for c, n in await service.categories(user_id)]
    if categories:
        text = "Categories with saved facts: " + ", ".join(
            f"{c.category} ({c.count})" for c in categories
        )
    else:
        text = "No facts saved yet."
    return MemoryToolResult(action="list", ok=True, text=text, categories=categories)


async def _history(service: FactService, user_id: str, call: MemoryToolCall) -> MemoryToolResult:
    """The values a fact held under `key` (in `category`, or in any), newest first."""
    assert call.key is not None
    category = normalise_name(call.category) if call.category and call.category.strip() else None
    rows = await service.versions.history_by_key(
        user_id, normalise_name(call.key), category, call.limit or DEFAULT_SEARCH_LIMIT
    )
    versions = [version_out(r) for r in rows]
    if not versions:
        return MemoryToolResult(
            action="history",
            ok=False,
            text=f"No saved values for {call.key.strip()!r}.",
            versions=[],
        )
    lines = []
    for v in versions:
        until = "now" if v.current else (v.valid_to.date().isoformat() if v.valid_to else "?")
        lines.append(
            f"- [{v.category}] {v.key} = {v.value} (from {v.valid_from.date().isoformat()}"
            f" until {until})"
        )
    text = f"{len(versions)} value(s) of {call.key.strip()!r}, newest first:\n" + "\n".join(lines)
    return MemoryToolResult(action="history", ok=True, text=text, versions=versions)
