"""Hybrid ranking of raw chunks by their best lines — the pure half of `search_raw`.

A raw chunk holds up to 4,000 chars: a dozen or more messages, of which one or two answer
a given question. Ranking whole chunks (one vector for the chunk, one text score for the
chunk) ranks the wrong thing — and a small embedding model reads only a chunk's head
(all-MiniLM stops at 256 tokens, about 1,000 chars). So a chunk is ranked by its best
*line*, and the same line scores decide what the excerpt shows:

* **text**: BM25 over the chunk's lines with the query terms' IDF over the user's chunks
  (a name or word present in every chunk weighs nothing; a rare one decides). A term
  of three or more chars matches at the start of a word (`paint` finds `painting`,
  `порт` finds `порта`), shorter ones match whole words. The chunk's breadcrumbs count
  as one more line (a key the summarizer wrote that the text does not contain).
* **vector**: every chunk is stored with one vector per *segment* — whole lines packed
  up to `SEGMENT_CHARS`, which the model reads completely — and a line takes its
  segment's similarity to the query.
* **fusion**: `TEXT_WEIGHT · t + (1 − TEXT_WEIGHT) · v`, where `t` is the share of the
  query's IDF mass the line matches (BM25, saturating at 1) and `v` the similarity
  rescaled from the lowest candidate similarity (0) to the best one — but never above
  the recall cutoff, so a query nothing is really similar to leaves the text to decide.
  The floor is read off the candidates, not fixed: embedders have their own scales
  (unrelated texts score ~0.1 with MiniLM, ~0.7 with E5).
* **context**: a line then adds `CONTEXT_WEIGHT` × the better of its neighbours'
  scores — consecutive turns share a topic, and the turn that answers sits next to the
  one that names the subject.

A chunk's relevance is its best line's; a chunk is returned when it matched a query term
or a segment is at least `min_similarity` similar. Its `focus` lists the lines the
excerpt is centred on, best first, with their scores (`focus_scores`, comparable across
the candidates of one call: the rendering interleaves hits by them): the chunk's own
best line and any line among the `FOCUS_LINES` best of all candidates.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from app.domain.raw_history.speakers import first_person, speaker_names, user_lines
from app.domain.raw_history.term_match import (
    PREFIX_MIN,
    idf,
    stem_term,
    term_hits,
    term_pattern,
)

__all__ = [
    "FOCUS_LINES",
    "PREFIX_MIN",
    "SEGMENT_CHARS",
    "TEXT_WEIGHT",
    "Candidate",
    "Ranked",
    "idf",
    "line_spans",
    "first_person",
    "rank_chunks",
    "segment_spans",
    "spread",
    "stem_term",
    "term_hits",
    "term_pattern",
]

SEGMENT_CHARS = 800  # ≈ 200 tokens: all-MiniLM reads 256, so a segment is embedded whole
FOCUS_LINES = 30
TEXT_WEIGHT = 0.5
CONTEXT_WEIGHT = 0.3  # share of the better neighbour line's score a line adds to its own
# a first-person query ("what did I…", "my…") scales the lines of other speakers by this:
# what the user said of themselves is the memory, the assistant's elaboration around it
# is not. why: docs/performance.md, "Retrieval A/B"
OTHER_SPEAKER_WEIGHT = 0.4
# a query naming a speaker of the transcript ("what did Maria…", lines `User: Maria: …`)
# scales the lines other named speakers said by this. why: docs/performance.md, "Named
# speakers"
NAMED_OTHER_WEIGHT = 0.8
K1 = 1.2
B = 0.75


Span = tuple[int, int]


def line_spans(text: str) -> list[Span]:
    """(start, end) of every line of `text` that holds more than whitespace."""
    spans: list[Span] = []
    pos = 0
    for line in text.split("\n"):
        end = pos + len(line)
        if line.strip():
            spans.append((pos, end))
        pos = end + 1
    return spans


def segment_spans(text: str, max_chars: int = SEGMENT_CHARS) -> list[Span]:
    """Consecutive whole lines packed into spans of at most `max_chars` chars (a longer
    line is cut at whitespace). Every non-blank char of `text` is in exactly one span."""
    if max_chars <= 0:
        raise ValueError("max_chars must be positive")
    pieces: list[Span] = []
    for start, end in line_spans(text):
        while end - start > max_chars:
            cut = text.rfind(" ", start + max_chars // 2, start + max_chars + 1)
            cut = cut if cut > start else start + max_chars
            pieces.append((start, cut))
            start = cut
            while start < end and text[start].isspace():
                start += 1
        if end > start:
            pieces.append((start, end))
    segments: list[Span] = []
    for start, end in pieces:
        if segments and end - segments[-1][0] <= max_chars:
            segments[-1] = (segments[-1][0], end)
        else:
            segments.append((start, end))
    return segments


@dataclass(frozen=True)
class Candidate:
    """A chunk to rank: its text, its breadcrumbs, its segments' similarities."""

    key: str
    text: str
    keys: Sequence[str] = ()
    segments: Sequence[tuple[int, int, float]] = ()  # (start, end, similarity)


@dataclass(frozen=True)
class Ranked:
    key: str
    score: float  # fused relevance of the best line, 0..1
    similarity: float | None  # best segment similarity (None: no vector)
    terms: tuple[str, ...]  # query terms found in the text or the breadcrumbs
    focus: tuple[Span, ...] = field(default=())  # lines to centre the excerpt on, best first
    focus_scores: tuple[float, ...] = field(default=())  # their fused scores


@dataclass
class _Lines:
    cand: Candidate
    spans: list[Span]
    vector: list[float | None]  # per line, then None for the breadcrumbs "line"
    terms: set[str]
    tfs: dict[int, dict[str, int]]  # line (len(spans): the breadcrumbs) -> term counts


def rank_chunks(
    candidates: Sequence[Candidate],
    weights: Mapping[str, float],
    *,
    k: int,
    min_similarity: float,
    text_weight: float | None = None,
    focus_lines: int = FOCUS_LINES,
    context_weight: float | None = None,
    other_speaker_weight: float = 1.0,
    named: Collection[str] = (),
    chunk_factors: Mapping[str, float] | None = None,
) -> list[Ranked]:
    """The `k` best candidates by their best line (see the module docstring).

    `weights` maps each query term to its IDF over the user's chunks; candidates without
    any segment similarity are ranked by text alone. The weights default to the module's
    `TEXT_WEIGHT` and `CONTEXT_WEIGHT`, read at call time. `chunk_factors` (by key) scale
    every line of a chunk (the question's time: `kernel.when.time_factors`). `named`:
    the names the query holds (`speakers.query_names`); when a candidate's lines are
    said by one of them (`User: Maria: …`), the lines other named speakers said are
    scaled by `NAMED_OTHER_WEIGHT` (not with `other_speaker_weight`, the user's own)."""
    text_weight = TEXT_WEIGHT if text_weight is None else text_weight
    context_weight = CONTEXT_WEIGHT if context_weight is None else context_weight
    wanted = [t for t, w in weights.items() if w > 0]
    scored = [_score_lines(c, weights, wanted) for c in candidates]
    if not scored:
        return []
    fused = _fuse(scored, weights, min_similarity, text_weight, context_weight)
    if other_speaker_weight != 1.0:
        for s, row in zip(scored, fused, strict=True):
            for i, mine in enumerate(user_lines(s.cand.text, s.spans)):
                if not mine:
                    row[i] *= other_speaker_weight
    elif named and NAMED_OTHER_WEIGHT != 1.0:
        _named_speakers(scored, fused, named)
    for s, row in zip(scored, fused, strict=True):
        if (f := (chunk_factors or {}).get(s.cand.key, 1.0)) != 1.0:
            row[:] = [x * f for x in row]
    best_lines = heapq.nlargest(focus_lines, (x for row in fused for x in row[:-1]))
    cutoff = best_lines[-1] if best_lines else math.inf
    ranked: list[Ranked] = []
    for s, row in zip(scored, fused, strict=True):
        sim = max((v for v in s.vector if v is not None), default=None)
        if not s.terms and (sim is None or sim < min_similarity):
            continue
        lines = row[:-1]
        picked = _focus(lines, cutoff)
        ranked.append(
            Ranked(
                key=s.cand.key,
                score=max(row) if row else 0.0,
                similarity=sim,
                terms=tuple(t for t in weights if t in s.terms),
                focus=tuple(s.spans[i] for i in picked),
                focus_scores=tuple(lines[i] for i in picked),
            )
        )
    ranked.sort(key=lambda r: -r.score)  # stable: ties keep the candidates' order
    return ranked[: max(k, 0)]


def _named_speakers(
    scored: Sequence[_Lines], fused: list[list[float]], named: Collection[str]
) -> None:
    """Scale the lines of other named speakers when some line is said by a named one."""
    speakers = [speaker_names(s.cand.text, s.spans) for s in scored]
    if not any(n is not None and n.split()[0] in named for row in speakers for n in row):
        return
    for row, names in zip(fused, speakers, strict=True):
        for i, name in enumerate(names):
            if name is not None and name.split()[0] not in named:
                row[i] *= NAMED_OTHER_WEIGHT


def spread(
    ranked: Sequence[Ranked], group: Mapping[str, str], decay: float, k: int
) -> list[Ranked]:
    """The `k` best of `ranked` (best first) when every hit already taken from a group
    (a session) costs the next one of that group a factor `decay`: one session's five
    chunks on a subject do not push out the other sessions that speak of it. A question
    asked across sessions ("how many…", "what changed since…") needs them; a hit far
    ahead of the rest keeps its place. `decay` 1 keeps the order as it is."""
    if decay >= 1.0 or len(ranked) <= 1:
        return list(ranked[: max(k, 0)])
    left = list(ranked)
    taken: dict[str, int] = {}
    out: list[Ranked] = []
    while left and len(out) < k:
        best = max(
            range(len(left)),
            key=lambda i: left[i].score * decay ** taken.get(group.get(left[i].key, ""), 0),
        )
        hit = left.pop(best)
        g = group.get(hit.key, "")
        taken[g] = taken.get(g, 0) + 1
        out.append(hit)
    return out


def _fuse(
    scored: Sequence[_Lines],
    weights: Mapping[str, float],
    min_similarity: float,
    text_weight: float,
    context_weight: float,
) -> list[list[float]]:
    """Each candidate's line scores: the vector part (its similarity above the lowest
    one, scaled to the best) plus the text part (BM25 over the matched mass), each line
    lifted by its better neighbour."""
    lens = [n for s in scored for n in _line_lengths(s)]
    avg = sum(lens) / len(lens) if lens else 1.0
    mass = sum(w for w in weights.values() if w > 0) or 1.0
    sims = [v for s in scored for v in s.vector if v is not None]
    have_vectors = bool(sims)
    top_sim = max([*sims, min_similarity]) if sims else min_similarity
    floor = min(sims) if sims else 0.0
    span = max(top_sim - floor, 1e-9)
    wt = text_weight if have_vectors else 1.0

    fused: list[list[float]] = []
    vector_share = (1.0 - wt) / span
    for s in scored:
        # most lines match no term: the vector part first, the text part where it exists
        row = [
            0.0 if v is None or v <= floor else min(1.0 - wt, (v - floor) * vector_share)
            for v in s.vector
        ]
        for line, t in _bm25(s, weights, avg).items():
            row[line] += wt * min(1.0, t / mass)
        fused.append(_with_context(row, context_weight))
    return fused


def _focus(lines: list[float], cutoff: float) -> list[int]:
    """The lines to show: the best one (when it scores at all), then the others at or
    above `cutoff` (the `focus_lines` best of all candidates), best first."""
    if not lines:
        return []
    best = max(range(len(lines)), key=lines.__getitem__)
    if lines[best] <= 0:
        return []
    others = [i for i, x in enumerate(lines) if x >= cutoff and x > 0 and i != best]
    return [best, *sorted(others, key=lambda i: -lines[i])]


def _with_context(row: list[float], weight: float) -> list[float]:
    """Each line's score plus `weight` × the better of its two neighbours' (the last
    entry, the breadcrumbs, stays as it is): consecutive turns share a topic, and the
    line that answers sits next to the one that names the subject."""
    lines = row[:-1]
    if weight <= 0 or len(lines) < 2:
        return row
    out = [
        s
        + weight * max(lines[i - 1] if i > 0 else 0.0, lines[i + 1] if i + 1 < len(lines) else 0.0)
        for i, s in enumerate(lines)
    ]
    return [*out, row[-1]]


def _score_lines(c: Candidate, weights: Mapping[str, float], wanted: Sequence[str]) -> _Lines:
    spans = line_spans(c.text)
    starts = [a for a, _ in spans]
    ends = [b for _, b in spans]
    # one scan of the text: the terms it holds and their counts per line (a match counts
    # in the line it starts in); the breadcrumbs are the line after the last
    tfs: dict[int, dict[str, int]] = {}
    if wanted:
        for at, term in term_hits(c.text, wanted):
            line = bisect_right(starts, at) - 1
            if line >= 0 and at < ends[line]:
                _count(tfs, line, term)
        for _, term in term_hits(" ".join(c.keys), wanted):
            _count(tfs, len(spans), term)
    terms = {t for tf in tfs.values() for t in tf}
    # each line takes the best similarity of the segments it overlaps: per segment, the
    # lines from the first that ends after its start to the last that starts before its
    # end (a segment packs whole lines, or is a piece of one long line)
    vector: list[float | None] = [None] * len(spans)
    for seg_start, seg_end, sim in c.segments:
        lo = bisect_right(ends, seg_start)
        hi = bisect_left(starts, seg_end)
        for i in range(lo, hi):
            got = vector[i]
            if got is None or sim > got:
                vector[i] = sim
    vector.append(None)  # the breadcrumbs line has no vector of its own
    return _Lines(c, spans, vector, terms & set(weights), tfs)


def _count(tfs: dict[int, dict[str, int]], line: int, term: str) -> None:
    tf = tfs.setdefault(line, {})
    tf[term] = tf.get(term, 0) + 1


def _line_lengths(s: _Lines) -> list[int]:
    """Words per line, counted by their separating spaces (the average line length of
    BM25's length norm needs no more)."""
    text = s.cand.text
    return [text.count(" ", a, b) + 1 for a, b in s.spans]


def _bm25(s: _Lines, weights: Mapping[str, float], avg: float) -> dict[int, float]:
    """BM25 of the lines that match a term (the breadcrumbs are line `len(spans)`)."""
    n_lines = len(s.spans)
    out: dict[int, float] = {}
    text = s.cand.text
    for line, tf in s.tfs.items():
        if line == n_lines:
            body = " ".join(s.cand.keys)
        else:
            body = text[s.spans[line][0] : s.spans[line][1]]
        norm = K1 * (1 - B + B * len(body.split()) / max(avg, 1e-9))
        out[line] = sum(weights.get(t, 0.0) * n * (K1 + 1) / (n + norm) for t, n in tf.items())
    return out
