"""The pure half of `chat_history`: the tool call normalised, neighbours picked, hits
rendered. No I/O."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from app.domain.kernel.terms import clamp_k, query_terms
from app.domain.raw_history.window import best_window
from app.lib.inputs import scrub_text

Mode = Literal["search", "recent"]
Match = Literal["keyword", "semantic"]
HitKind = Literal["fulltext", "substring", "semantic", "recent"]

NEIGHBOURS_BEFORE = 2
NEIGHBOURS_AFTER = 1
# Rows read around a hit to find its neighbours: a few non-searchable rows (system,
# summaries, compression markers) may sit in between.
NEIGHBOUR_SPAN_BEFORE = 8
NEIGHBOUR_SPAN_AFTER = 4
HIT_CHARS = 1200  # hit text in the rendered output
NEIGHBOUR_CHARS = 400
JSON_CHARS = 8000  # content in the JSON result


@dataclass(frozen=True)
class HistoryRow:
    sequence_number: int
    role: str
    content: str
    created_at: datetime
    archived: bool
    name: str | None = None
    searchable: bool = True


@dataclass(frozen=True)
class HistoryHit:
    row: HistoryRow
    kind: HitKind
    score: float | None = None
    before: tuple[HistoryRow, ...] = ()
    after: tuple[HistoryRow, ...] = ()


@dataclass(frozen=True)
class ToolCall:
    mode: Mode
    match: Match
    query: str
    limit: int


@dataclass
class HistoryResult:
    mode: Mode
    match: Match | None
    query: str
    limit: int
    hits: list[HistoryHit] = field(default_factory=list)
    fallback: str | None = None


def normalize_call(mode: object, match: object, query: object, limit: object) -> ToolCall:
    """The tool call as the model wrote it, made usable: a missing mode is `search` when
    there is a query, else `recent`; an unknown match is `keyword`; limit 1..20."""
    q = scrub_text(query).strip() if isinstance(query, str) else ""  # a NUL → U+FFFD
    m = mode.strip().lower() if isinstance(mode, str) else ""
    if m not in ("search", "recent"):
        m = "search" if q else "recent"
    how = match.strip().lower() if isinstance(match, str) else ""
    how = how if how in ("keyword", "semantic") else "keyword"
    return ToolCall(mode=m, match=how, query=q, limit=clamp_k(limit))  # type: ignore[arg-type]


def pick_neighbours(
    hit_seq: int, rows: Iterable[HistoryRow]
) -> tuple[tuple[HistoryRow, ...], tuple[HistoryRow, ...]]:
    """The 2 searchable messages before a hit and the 1 after it, by sequence number."""
    ordered = sorted(
        (r for r in rows if r.searchable and r.sequence_number != hit_seq),
        key=lambda r: r.sequence_number,
    )
    before = [r for r in ordered if r.sequence_number < hit_seq][-NEIGHBOURS_BEFORE:]
    after = [r for r in ordered if r.sequence_number > hit_seq][:NEIGHBOURS_AFTER]
    return tuple(before), tuple(after)


def utc(value: datetime) -> datetime:
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def fmt_time(value: datetime) -> str:
    return utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def _who(row: HistoryRow) -> str:
    return f"{row.role} ({row.name})" if row.role == "tool" and row.name else row.role


def _one_line(text: str, chars: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 1].rstrip() + "…"


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def render(result: HistoryResult) -> str:
    """What the model reads: one block per hit, newest-first for `recent`, by relevance
    for searches; sequence numbers and UTC times on every message."""
    if result.mode == "recent":
        head = f"chat_history recent: {len(result.hits)} message(s)"
    else:
        head = (
            f'chat_history search "{result.query}" (match={result.match}): '
            f"{len(result.hits)} hit(s)"
        )
    lines = [head]
    if result.fallback:
        lines.append(f"note: {result.fallback}")
    if not result.hits:
        lines.append("No messages found." if result.mode == "search" else "No messages yet.")
        return "\n".join(lines)
    terms = query_terms(result.query)
    for i, hit in enumerate(result.hits, 1):
        row = hit.row
        label = f"{i}. #{row.sequence_number} {_who(row)} · {fmt_time(row.created_at)}"
        if row.archived:
            label += " · archived"
        if hit.score is not None:
            label += f" · similarity {hit.score:.2f}"
        lines.append(label)
        for n in hit.before:
            lines.append(
                f"   #{n.sequence_number} {_who(n)}: {_one_line(n.content, NEIGHBOUR_CHARS)}"
            )
        body = best_window(row.content, terms, HIT_CHARS)
        if hit.before or hit.after:
            lines.append(f" → #{row.sequence_number} {_who(row)}:")
        lines.append(_indent(body, "   "))
        for n in hit.after:
            lines.append(
                f"   #{n.sequence_number} {_who(n)}: {_one_line(n.content, NEIGHBOUR_CHARS)}"
            )
    return "\n".join(lines)


def merge_keyword(
    fulltext: Sequence[HistoryRow], substring: Sequence[HistoryRow], limit: int
) -> list[HistoryHit]:
    """Full-text hits first (in rank order), then substring hits not already found."""
    seen: set[int] = set()
    hits: list[HistoryHit] = []
    for kind, rows in (("fulltext", fulltext), ("substring", substring)):
        for r in rows:
            if r.sequence_number in seen:
                continue
            seen.add(r.sequence_number)
            hits.append(HistoryHit(row=r, kind=kind))  # type: ignore[arg-type]
    return hits[:limit]


def clip_json(text: str) -> tuple[str, bool]:
    return (text, False) if len(text) <= JSON_CHARS else (text[:JSON_CHARS], True)
