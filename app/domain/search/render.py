"""The text a `memory_search` tool result shows: `format_hits` (the pure rendering).

Provenance on every item: a fact shows its whole `key: value`; raw, sketch and error
hits an excerpt of their text. Raw hits whose store scored their lines are shown
together, best lines of all hits first (`window.interleave_windows`), so a reader — or
a cut at a few thousand chars — meets what matched best first.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from app.domain.kernel.hits import MemoryHit
from app.domain.kernel.terms import normalize_scope, query_terms
from app.domain.kernel.when import read_time
from app.domain.raw_history.speakers import first_person, second_person
from app.domain.raw_history.window import Focused, best_window, interleave_windows, line_windows

__all__ = [
    "BEFORE_SUMMARY",
    "HIT_TEXT_CHARS",
    "NO_HITS",
    "OUTDATED",
    "format_hits",
    "head_excerpt",
    "hit_excerpt",
    "keys_shown",
]

HIT_TEXT_CHARS = 1200
MAX_KEYS_SHOWN = 12
KEYS_CHARS = 200  # the keys line stops before this many chars (at least one key is shown)

NO_HITS = "No matches in any store. Try fewer, different words."
NOW_VALUE_CHARS = 120  # the replacing value in an `outdated` note, cut
OUTDATED = (
    "⚠ outdated: a newer curated fact overrides this — {key}. "
    "Trust the fact; quote this only as history."
)
BEFORE_SUMMARY = (
    "(verbatim record from before the current summary — exact details, "
    "but the summary is the curated version.)"
)

_INDENT = "   "
# a raw excerpt's time on its header: "datetime" (its last message's date and time),
# "date" (its messages' day, or first and last day), "asked" (the days, only when the
# question names or asks a time: `kernel.when`). why: docs/performance.md, "Time in the
# question"
RAW_TIME = "date"
# a raw excerpt whose messages span several days marks the day on its lines
# (`line_days`); why: docs/performance.md, "Time in the question"
LINE_DAYS = True
# which questions see a focus line's whole message (up to MESSAGE_CHARS, in the text's
# order) rather than its best lines: "not-mine" (all but a first-person question: what
# the user said of themselves is one line, and the budget goes to more of them), "you"
# (only a question about what the assistant said), "all", "off". why:
# docs/performance.md, "Whole messages"
WHOLE_MESSAGES = "not-mine"
MESSAGE_CHARS = 3000


def format_hits(
    query: str,
    scope: str,
    hits: Sequence[MemoryHit],
    *,
    best_window_enabled: bool = True,
    text_chars: int = HIT_TEXT_CHARS,
) -> str:
    """Render hits for a tool result, provenance on every item.

    A fact shows its whole `key: value`; raw, sketch and error texts show
    `text_chars` chars — the best window for the query, or the head when
    `best_window_enabled` is off.
    """
    header = f'memory_search "{" ".join((query or "").split())}" '
    header += f"(scope={normalize_scope(scope)}): {len(hits)} hit(s)"
    if not hits:
        return f"{header}\n{NO_HITS}"
    terms = query_terms(query)
    whole = _whole_messages(query or "")
    message_chars = MESSAGE_CHARS if whole else 0
    dated = RAW_TIME != "asked" or bool(read_time(query or "", datetime.now(UTC)))
    numbered = list(enumerate(hits, 1))
    lines = [header, ""]
    pos = 0
    while pos < len(numbered):
        number, hit = numbered[pos]
        pos += 1
        if hit.source_type == "raw" and best_window_enabled:
            # consecutive raw hits (as merge_tiered orders them) are shown together,
            # their best lines first
            end = pos
            while end < len(numbered) and numbered[end][1].source_type == "raw":
                end += 1
            section = numbered[pos - 1 : end]
            lines.extend(_raw_section(section, terms, text_chars, dated, message_chars))
            pos = end
            continue
        if hit.source_type == "fact":
            body = hit.text.strip()
        elif best_window_enabled:
            body = hit_excerpt(hit, terms, text_chars)
        else:
            body = head_excerpt(hit.text, text_chars)
        lines.extend(_item(number, hit, terms, body, dated=dated))
    return "\n".join(lines)


def _whole_messages(query: str) -> bool:
    if WHOLE_MESSAGES == "you":
        return second_person(query)
    if WHOLE_MESSAGES == "not-mine":
        return not first_person(query)
    return WHOLE_MESSAGES == "all"


def _flat(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _item(
    number: int,
    hit: MemoryHit,
    terms: Sequence[str],
    body: str,
    *,
    same_session: bool = False,
    dated: bool = True,
) -> list[str]:
    """One hit: its provenance line, its notes (raw), its text, indented. `same_session`:
    the hit shown just before is from the same session, which is then not repeated.
    `dated`: a raw hit's header shows its time (`RAW_TIME`)."""
    where = _where(hit, dated)
    if same_session and hit.session_id:
        where = where.replace(f"session {hit.session_id}", "same session", 1)
    out = [f"{number}. {where}"]
    if hit.source_type == "raw":
        if hit.superseded_by:
            key = hit.superseded_by
            if hit.superseded_value:  # which value replaced it
                key += f", now: {_flat(hit.superseded_value, NOW_VALUE_CHARS)}"
            out.append(_INDENT + OUTDATED.format(key=key))
        elif hit.before_summary:
            out.append(_INDENT + BEFORE_SUMMARY)
        if hit.breadcrumbs:
            out.append(f"{_INDENT}keys: {keys_shown(hit.breadcrumbs, terms)}")
    out.extend(_indented(body))
    return out


def _indented(body: str) -> list[str]:
    """The lines of a hit's text under its provenance line (blank lines stay blank)."""
    return [_INDENT + line if line.strip() else "" for line in body.splitlines()]


def _raw_section(
    raws: Sequence[tuple[int, MemoryHit]],
    terms: Sequence[str],
    text_chars: int,
    dated: bool,
    message_chars: int = 0,
) -> list[str]:
    """Raw hits whose store scored their lines (`focus_scores`), interleaved by those
    scores: the best line of every hit comes before the second-best line of the first,
    so what a reader meets first is what matched best. A hit shown again later is
    headed `N. (continued)`; the hits share `text_chars` chars each, as before.
    Hits without scored lines follow with their own excerpt. `message_chars`: see
    `interleave_windows`."""
    scored = [(n, h) for n, h in raws if h.focus and len(h.focus_scores) == len(h.focus)]
    with_scores = {n for n, _ in scored}
    others = [(n, h) for n, h in raws if n not in with_scores]
    out: list[str] = []
    runs = interleave_windows(
        [
            Focused(h.text, h.focus, h.focus_scores, h.day_starts if LINE_DAYS else ())
            for _, h in scored
        ],
        text_chars * len(scored),
        [*terms, *(t for _, h in scored for t in h.matched_terms)],
        line_chars=text_chars,
        message_chars=message_chars,
    )
    shown = set()
    last_session: str | None = None
    for run in runs:
        number, hit = scored[run.item]
        shown.add(run.item)
        if run.first:
            same = hit.session_id is not None and hit.session_id == last_session
            out.extend(_item(number, hit, terms, run.body, same_session=same, dated=dated))
            last_session = hit.session_id
        else:
            out.append(f"{number}. (continued)")
            out.extend(_indented(run.body))
    others.extend(p for i, p in enumerate(scored) if i not in shown)
    for number, hit in sorted(others, key=lambda p: p[0]):
        body = hit_excerpt(hit, terms, text_chars)
        out.extend(_item(number, hit, terms, body, dated=dated))
    return out


def hit_excerpt(hit: MemoryHit, terms: Sequence[str], chars: int = HIT_TEXT_CHARS) -> str:
    """What a hit shows of its text: windows of whole lines around the lines the store
    ranked best (`focus`), else the `chars`-char window with the most query terms."""
    words = [*terms, *hit.matched_terms]
    if hit.focus:
        return line_windows(hit.text, hit.focus, chars, words)
    return best_window(hit.text, words, chars)


def keys_shown(keys: Sequence[str], terms: Sequence[str]) -> str:
    """The breadcrumbs line: keys that contain a query term first, at most
    `MAX_KEYS_SHOWN` and about `KEYS_CHARS` chars (the first key always)."""
    wanted = set(terms)
    first = [k for k in keys if wanted & set(query_terms(k))]
    ordered = [*first, *(k for k in keys if k not in first)][:MAX_KEYS_SHOWN]
    shown: list[str] = []
    size = 0
    for key in ordered:
        size += len(key) + (2 if shown else 0)
        if shown and size > KEYS_CHARS:
            break
        shown.append(key)
    return ", ".join(shown)


def head_excerpt(text: str, chars: int = HIT_TEXT_CHARS) -> str:
    """The first `chars` chars, ` …` when cut — the rendering before `best_window`."""
    text = (text or "").strip()
    if len(text) <= chars:
        return text
    return text[:chars].rstrip() + " …"


def _fmt_time(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M")


def _turns(hit: MemoryHit) -> str:
    if hit.end_seq < 0:
        return "turn unknown"
    if hit.start_seq == hit.end_seq or hit.start_seq < 0:
        return f"turn {hit.end_seq}"
    return f"turns {hit.start_seq}–{hit.end_seq}"


def _raw_time(hit: MemoryHit) -> str:
    """A raw hit's time as `RAW_TIME` shows it ("" when it has none)."""
    end = hit.timestamp
    if end is None:
        return ""
    if RAW_TIME == "datetime":
        return f" · {_fmt_time(end)}"
    start = hit.started_at or end
    if start.date() == end.date():
        return f" · {end:%Y-%m-%d}"
    return (
        f" · {start:%Y-%m-%d}…{end:%m-%d}"
        if start.year == end.year
        else f" · {start:%Y-%m-%d}…{end:%Y-%m-%d}"
    )


def _where(hit: MemoryHit, dated: bool = True) -> str:
    session = hit.session_id or "unknown"
    if hit.source_type == "fact":
        where = f"fact [{hit.category or 'other'}]"
        if hit.session_id:
            where += f" · session {hit.session_id}"
        if hit.timestamp is not None:
            where += f" · updated {_fmt_time(hit.timestamp)}"
        return where
    if hit.source_type == "raw":
        where = f"raw · session {session} · {_turns(hit)}"
        return where + (_raw_time(hit) if dated else "")
    if hit.source_type == "error":
        where = "error" + (f" [{hit.key}]" if hit.key else "")
        if hit.session_id:  # error memory is per user, across sessions: often none
            where += f" · session {hit.session_id}"
        if hit.end_seq >= 0:
            where += f" · {_turns(hit)}"
        if hit.timestamp is not None:
            where += f" · {_fmt_time(hit.timestamp)}"
        return where
    where = f"sketch · session {session} · {hit.key or 'main'}"
    if hit.timestamp is not None:
        where += f" · updated {_fmt_time(hit.timestamp)}"
    return where
