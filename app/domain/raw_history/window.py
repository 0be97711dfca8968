"""Pick the part of a long excerpt that actually answers the query.

A raw chunk is up to 4000 chars (a capped single message up to 12 000) and a tool
result shows a fraction of it. Showing the head — as the first version of the search
did — hides the evidence whenever it sits past the cut, which for a chunk of several
turns is most of the time. `best_window` shows the `budget`-char window with the most
query-term occurrences instead.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from app.domain.kernel.hits import DayStarts
from app.domain.raw_history.chunks import TOOL_RESULT
from app.domain.raw_history.line_days import day_at, day_mark
from app.domain.raw_history.ranking import Span, line_spans
from app.domain.raw_history.speakers import message_ranges

ELLIPSIS = "…"
_SNAP_WORD = 40  # how far a window edge moves to land on whitespace


def best_window(text: str, terms: Sequence[str], budget: int = 1200) -> str:
    """The `budget`-char window of `text` that covers the most query terms.

    Scoring is lexicographic: distinct terms first, then total occurrences, so a window
    with `port` and `nginx` beats one with `port` five times. Ties go to the earliest
    window. The covered span is centred, then the edges snap to a line start/end
    (within a quarter of the budget) or a word boundary, never cutting into a covered
    occurrence. `… ` / ` …` mark a cut at either end. With no term in the text the
    head is returned, cut at a word boundary.
    """
    text = (text or "").strip()
    if budget <= 0:
        return ""
    if len(text) <= budget:
        return text
    hits = term_occurrences(text, terms)
    if not hits:
        return _cut(text, 0, _snap_end(text, budget, 0, budget))
    start, end = _best_span(hits, budget)
    slack = budget - (end - start)
    lo = max(0, min(start - slack // 2, len(text) - budget))
    hi = lo + budget
    lo = _snap_start(text, lo, start, budget)
    hi = _snap_end(text, hi, end, budget)
    return _cut(text, lo, hi)


def term_occurrences(text: str, terms: Sequence[str]) -> list[tuple[int, int, str]]:
    """(start, end, term) of each case-insensitive occurrence, sorted by start.

    A term matches at the start of a word (so `port` finds `ports` and `server_port`,
    not `report`): prefix matching also catches Russian inflections (`порт` → `порта`).
    """
    wanted = sorted({t.lower() for t in terms if t and t.strip()}, key=len, reverse=True)
    if not wanted:
        return []
    pattern = re.compile(
        r"(?<![^\W_])(?:" + "|".join(re.escape(t) for t in wanted) + ")", re.IGNORECASE
    )
    return [(m.start(), m.end(), m.group(0).lower()) for m in pattern.finditer(text)]


def _best_span(hits: list[tuple[int, int, str]], budget: int) -> tuple[int, int]:
    """Start and end of the best run of occurrences that fits in `budget` chars."""
    best_score = (-1, -1)
    best = (hits[0][0], hits[0][1])
    counts: Counter[str] = Counter()
    right = 0
    for left in range(len(hits)):
        if right < left:
            right = left
            counts.clear()
        while right < len(hits) and hits[right][1] - hits[left][0] <= budget:
            counts[hits[right][2]] += 1
            right += 1
        if right == left:  # one occurrence longer than the budget
            score = (1, 1)
            span = (hits[left][0], hits[left][0] + budget)
        else:
            score = (len(counts), sum(counts.values()))
            span = (hits[left][0], hits[right - 1][1])  # finditer: no overlaps
        if score > best_score:
            best_score, best = score, span
        if right > left:
            counts[hits[left][2]] -= 1
            if counts[hits[left][2]] == 0:
                del counts[hits[left][2]]
    return best


def _snap_start(text: str, lo: int, keep_from: int, budget: int) -> int:
    if lo <= 0:
        return 0
    if text[lo - 1] == "\n":
        return lo
    line = text.find("\n", lo, min(keep_from, lo + budget // 4))
    if line >= 0:
        return line + 1
    if text[lo - 1].isspace():
        return lo
    limit = min(keep_from, lo + _SNAP_WORD)
    for i in range(lo, limit):
        if text[i].isspace():
            return i + 1
    return lo


def _snap_end(text: str, hi: int, keep_to: int, budget: int) -> int:
    if hi >= len(text):
        return len(text)
    line = text.rfind("\n", max(keep_to, hi - budget // 4), hi + 1)
    if line >= 0:
        return line
    floor = max(keep_to, hi - _SNAP_WORD)
    for i in range(hi, floor - 1, -1):
        if text[i].isspace():
            return i
    return hi


def _cut(text: str, lo: int, hi: int) -> str:
    body = text[lo:hi].strip()
    if lo > 0:
        body = f"{ELLIPSIS} {body}"
    if hi < len(text):
        body = f"{body} {ELLIPSIS}"
    return body


# ------------------------------------------------------------------ line windows
# A matched line is shown with the line after it: in a conversation the answer follows the
# question that names the subject. The budget, not the spec's "2 before", decides: lines
# before rarely hold it. Shown together (`interleave_windows`), a line brings its next
# line only when that one answers it: a question's reply, a tool call's result. After a
# statement the budget goes to the next best line instead.
# why: docs/performance.md, "raw search line windows"
NEIGHBOURS_BEFORE = 0
NEIGHBOURS_AFTER = 1
GAP = "…"


def line_windows(
    text: str,
    focus: Sequence[tuple[int, int]],
    budget: int = 1200,
    terms: Sequence[str] = (),
    *,
    before: int = NEIGHBOURS_BEFORE,
    after: int = NEIGHBOURS_AFTER,
) -> str:
    """Short windows of whole lines around the `focus` lines, best first, within `budget`.

    `focus` holds (start, end) spans of lines of `text` (see `ranking.line_spans`), best
    first. Each becomes a window with `before` lines before it and `after` after it (fewer
    when the budget is short); overlapping or adjacent windows merge. Windows are shown in
    the order of their best line, separated by a `…` line; `… ` / ` …` mark text cut
    before the first window and after the last one. A focus line longer than the budget
    on its own falls back to `best_window` inside that line. No usable focus: the head of
    `text`, cut at a word (as `best_window` does without a matching term).
    """
    if budget <= 0:
        return ""
    lines = line_spans(text)
    index = {span: i for i, span in enumerate(lines)}
    wanted = [index[s] for s in focus if s in index]
    if not wanted:
        return best_window(text, terms, budget)
    windows: list[list[int]] = []  # [lo, hi] line indexes, in the order they were added
    for i in wanted:
        for b, a in ((before, after), (0, after), (0, 0)):
            trial = _add_window(windows, max(0, i - b), min(len(lines) - 1, i + a))
            if _render(text, lines, trial)[1] <= budget:
                windows = trial
                break
        else:
            if not windows:  # one line longer than the whole budget
                start, end = lines[i]
                return best_window(text[start:end], terms, budget)
    return _render(text, lines, windows)[0]


def _add_window(windows: list[list[int]], lo: int, hi: int) -> list[list[int]]:
    """`windows` plus lines lo..hi: merged into the first window it overlaps or touches
    (which keeps its place in the order), else appended."""
    out = [list(w) for w in windows]
    new = [lo, hi]
    place = len(out)
    changed = True
    while changed:
        changed = False
        for n, w in enumerate(out):
            if new[0] <= w[1] + 1 and new[1] >= w[0] - 1:
                new = [min(new[0], w[0]), max(new[1], w[1])]
                place = min(place, n)
                del out[n]
                changed = True
                break
    out.insert(min(place, len(out)), new)
    return out


def _render(text: str, lines: list[tuple[int, int]], windows: list[list[int]]) -> tuple[str, int]:
    if not windows:
        return "", 0
    parts = [text[lines[lo][0] : lines[hi][1]].strip() for lo, hi in windows]
    body = f"\n{GAP}\n".join(parts)
    if windows[0][0] > 0:
        body = f"{ELLIPSIS} {body}"
    if windows[-1][1] < len(lines) - 1:
        body = f"{body} {ELLIPSIS}"
    return body, len(body)


# ------------------------------------------------------------------ interleaved excerpts
@dataclass(frozen=True)
class Run:
    """Consecutive lines shown from one text: `item` indexes the texts given to
    `interleave_windows`, `body` is what to show (a `…` line between lines that are not
    adjacent in the text), `first` says whether it is that text's first run."""

    item: int
    body: str
    first: bool


@dataclass(frozen=True)
class Focused:
    """A text with its focus lines ((start, end) spans, see `ranking.line_spans`) and
    their scores, comparable across the texts of one call; `days`: where each day of
    its messages begins, when they span several (`line_days`)."""

    text: str
    focus: Sequence[tuple[int, int]]
    scores: Sequence[float]
    days: DayStarts = ()


def interleave_windows(
    items: Sequence[Focused],
    budget: int = 1200,
    terms: Sequence[str] = (),
    *,
    after: int = NEIGHBOURS_AFTER,
    line_chars: int = 1200,
    message_chars: int = 0,
) -> list[Run]:
    """The focus lines of several texts in one order — best score first, whichever text
    they come from — each with the `after` lines that follow it when they answer it
    (the focus line asks a question, or a tool result follows it), `budget` chars in all.

    A reader (or a cut at a few thousand chars) then meets the best lines of all texts
    before the second-best lines of the first one. Lines already shown are not repeated;
    a focus line whose window does not fit what is left of the budget is shown alone, or
    skipped; a line longer than `line_chars` is shown as its best window of that size.
    Consecutive picks from the same text form one `Run`. `message_chars` > 0: a focus
    line is shown with the rest of its message (and a question with the whole message
    that answers it), in the text's order, when those messages hold at most that many
    chars and fit what is left — a list or a table is read whole, not as its best rows
    out of order; else as above. A text with `days` has its
    first shown line, and each shown line of another day than the line shown before it,
    marked with that day (`line_days.day_mark`, counted in the budget)."""
    spans = [line_spans(it.text) for it in items]
    left = budget
    shown: list[set[int]] = [set() for _ in items]
    last_day: list[date | None] = [None for _ in items]
    picks: list[tuple[int, list[str], list[int]]] = []  # (item, texts, line indexes)

    def show(n: int, j: int, whole: bool) -> str:
        start, end = spans[n][j]
        line = items[n].text[start:end].strip()
        return line if whole or len(line) <= line_chars else best_window(line, terms, line_chars)

    def marked(n: int, idx: list[int], whole: bool) -> tuple[list[str], date | None]:
        block, day = [show(n, j, whole) for j in idx], last_day[n]
        if items[n].days:
            for k, j in enumerate(idx):
                d = day_at(items[n].days, spans[n][j][0])
                if d is not None and d != day:
                    block[k], day = day_mark(d, items[n].days) + block[k], d
        return block, day

    messages = [
        message_ranges(it.text, sp) if message_chars > 0 else []
        for it, sp in zip(items, spans, strict=True)
    ]
    for n, i in _focus_order(items, spans):
        block: list[str] = []
        day: date | None = None
        last = len(spans[n]) - 1
        tries = [
            (i, min(i + a, last), False)
            for a in (after if _wants_next(items[n].text, spans[n], i) else 0, 0)
        ]
        if messages[n]:  # the focus line's message, through the one its window ends in
            lo, hi = messages[n][i][0], messages[n][tries[0][1]][1]
            if spans[n][hi][1] - spans[n][lo][0] <= message_chars and (lo, hi) != tries[0][:2]:
                tries.insert(0, (lo, hi, True))
        for lo, hi, whole in tries:
            idx = [j for j in range(lo, hi + 1) if j not in shown[n]]
            block, day = marked(n, idx, whole)
            if sum(len(b) + 1 for b in block) <= left:
                break
            block = []
        if not block:
            continue
        left -= sum(len(b) + 1 for b in block)
        shown[n].update(idx)
        last_day[n] = day
        _add_pick(picks, n, block, idx)
    seen: set[int] = set()
    runs = []
    for n, parts, _ in picks:
        runs.append(Run(n, "\n".join(parts), n not in seen))
        seen.add(n)
    return runs


def _focus_order(items: Sequence[Focused], spans: list[list[Span]]) -> list[tuple[int, int]]:
    """(item, line index) of every focus line found in its text, best score first (ties:
    item order, then the item's own order)."""
    entries: list[tuple[float, int, int, int]] = []
    for n, it in enumerate(items):
        index = {s: i for i, s in enumerate(spans[n])}
        for r, (span, score) in enumerate(zip(it.focus, it.scores, strict=False)):
            if span in index:
                entries.append((-score, n, r, index[span]))
    entries.sort()
    return [(n, i) for _, n, _, i in entries]


def _wants_next(text: str, spans: list[Span], i: int) -> bool:
    """Line `i` is answered by the lines after it: it asks a question, or a tool result
    follows."""
    line = text[spans[i][0] : spans[i][1]]
    if "?" in line:
        return True
    nxt = spans[i + 1] if i + 1 < len(spans) else None
    return nxt is not None and text.startswith(TOOL_RESULT, nxt[0])


def _add_pick(
    picks: list[tuple[int, list[str], list[int]]], n: int, block: list[str], idx: list[int]
) -> None:
    """`block` (lines `idx` of item `n`) onto the last run when it is of the same item
    (a gap marker between lines that do not follow each other), else a run of its own."""
    if picks and picks[-1][0] == n:
        if idx[0] != picks[-1][2][-1] + 1:
            picks[-1][1].append(GAP)
        picks[-1][1].extend(block)
        picks[-1][2].extend(idx)
    else:
        picks.append((n, block, idx))
