"""One read path over everything Navi remembers — the pure half.

Three stores, written separately on purpose, read as one:

* **facts** — curated, rewritten by key, user lifetime;
* **raw** — verbatim messages that compression dropped (append-only chunks);
* **sketches** — a session's working notes, updated in place;

plus **errors**, failures recorded for the agent to learn from. The service fetches
hits from each store; the functions here normalise the request, label freshness,
merge the tiers and filter automatic recall (`render.py` renders the tool output). The merge is
tiered, not a blind mix: curated facts first, then raw excerpts (and errors) by
relevance, then sketches. A raw excerpt that a newer fact overrides is still
returned, labelled outdated — "we changed our mind, the old value was X" is often
exactly the question.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence, Set
from dataclasses import replace
from datetime import UTC, datetime

from app.domain.kernel.hits import MemoryHit
from app.domain.kernel.terms import TOKEN, query_terms

__all__ = [
    "mark_freshness",
    "merge_tiered",
    "recall_filter",
    "recall_query",
    "shared_terms",
    "superseded_label",
]

RECALL_MESSAGES = 4
RECALL_MESSAGE_CHARS = 1000


def shared_terms(fact_text: str, raw_text: str) -> int:
    """Content words of a fact (longer than two chars) that also occur in a raw text."""
    return len(_fact_words(fact_text) & _words(raw_text))


def _fact_words(text: str) -> set[str]:
    return {t for t in query_terms(text) if len(t) > 2}


def _value_of(fact: MemoryHit) -> str:
    """The value of a fact hit (`"<key>: <value>"`), else its whole text."""
    prefix = f"{fact.key}: " if fact.key else ""
    return fact.text[len(prefix) :] if prefix and fact.text.startswith(prefix) else fact.text


def _words(text: str) -> set[str]:
    """Every word of `text`, lower-cased: what a fact's content words are looked up in
    (they hold no stopword, so the raw side needs no filtering — one C-level scan of a
    4,000-char chunk instead of `query_terms`' Python loop, ~1 ms a chunk)."""
    return set(TOKEN.findall(text.lower()))


def mark_freshness(
    facts: Sequence[MemoryHit],
    raws: Sequence[MemoryHit],
    summary_at: datetime | None,
    current_session_id: str | None,
    *,
    summary_through: int | None = None,
) -> list[MemoryHit]:
    """`raws` with `superseded_by` / `before_summary` set; the inputs are not changed.

    * A raw hit sharing at least two content words with a fact *newer* than the hit is
      superseded by that fact (the newest such fact when several qualify), labelled
      `superseded_label(fact)`: its key and when it changed, and `superseded_value`: the
      value that replaced the excerpt's. An older fact next to a
      newer verbatim line is the lossy copy, not the truth. A hit that states the fact's
      current value (every content word of it) is not superseded by that fact: it says
      what is still true (a value confirmed since, or restored, moves the fact's time).
    * A raw hit of the current session is `before_summary` when its turns are ones the
      latest summary covers: it ends at or before `summary_through` (the last turn the
      summary summarised) — or, when that is unknown, it is older than `summary_at`. A
      chunk of turns still in the live context (the idle-session index writes those)
      is not; a chunk from another session says nothing about this session's summary.

    Naive datetimes are read as UTC so mixed inputs compare instead of raising.
    """
    dated = sorted(
        (f for f in facts if f.timestamp is not None),
        key=lambda f: _instant(f.timestamp),
        reverse=True,
    )
    fact_words = {id(f): _fact_words(f.text) for f in dated}
    value_words = {id(f): _fact_words(_value_of(f)) for f in dated}
    marked: list[MemoryHit] = []
    for hit in raws:
        before, superseded, now = hit.before_summary, hit.superseded_by, hit.superseded_value
        raw_words: set[str] | None = None  # read once per hit, and only when a fact is newer
        if (
            summary_at is not None
            and current_session_id is not None
            and hit.session_id is not None
            and str(hit.session_id) == str(current_session_id)
        ):
            if summary_through is not None and hit.end_seq >= 0:
                before = hit.end_seq <= summary_through
            elif hit.timestamp is not None:
                before = _instant(hit.timestamp) < _instant(summary_at)
        if hit.timestamp is not None:
            at = _instant(hit.timestamp)
            for fact in dated:
                if _instant(fact.timestamp) <= at:
                    break
                if raw_words is None:
                    raw_words = _words(hit.text)
                if len(fact_words[id(fact)] & raw_words) >= 2:
                    states = value_words[id(fact)]
                    if not (states and states <= raw_words):  # else: it states the value
                        superseded, now = superseded_label(fact), _value_of(fact)
                    break
        if (before, superseded, now) != (
            hit.before_summary,
            hit.superseded_by,
            hit.superseded_value,
        ):
            hit = replace(
                hit, before_summary=before, superseded_by=superseded, superseded_value=now
            )
        marked.append(hit)
    return marked


def superseded_label(fact: MemoryHit) -> str:
    """`<key> (updated YYYY-MM-DD HH:MM)`, the fact's `updated_at` in UTC: what a raw
    hit's `superseded_by` says, so the reader sees which fact and how recent."""
    label = fact.key or "a newer fact"
    if fact.timestamp is None:
        return label
    return f"{label} (updated {_instant(fact.timestamp).astimezone(UTC):%Y-%m-%d %H:%M})"


def merge_tiered(
    facts: Iterable[MemoryHit],
    raws: Iterable[MemoryHit],
    sketches: Iterable[MemoryHit],
    errors: Iterable[MemoryHit] = (),
) -> list[MemoryHit]:
    """Facts (as given), raws by relevance, errors by relevance, sketches (as given).

    Relevance: the store's fused `rank` descending when it reports one (hits with a
    rank first), then vector similarity descending (hits with a score before hits
    without), then matched terms descending; ties keep the store's order.
    """
    return [
        *facts,
        *sorted(raws, key=_relevance),
        *sorted(errors, key=_relevance),
        *sketches,
    ]


def recall_filter(
    hits: Iterable[MemoryHit],
    *,
    min_similarity: float = 0.55,
    min_terms: int = 2,
    already_injected: Set[str] = frozenset(),
) -> list[MemoryHit]:
    """Raw hits worth injecting automatically, in the given order.

    Dropped: non-raw hits (recall injects raw excerpts only), superseded excerpts,
    chunks already injected in this session (and repeats within `hits`), vector hits
    below `min_similarity`, text hits (no score) with fewer than `min_terms` terms.
    """
    seen = set(already_injected)
    kept: list[MemoryHit] = []
    for hit in hits:
        if hit.source_type != "raw" or hit.superseded_by:
            continue
        if hit.chunk_id is not None and hit.chunk_id in seen:
            continue
        if hit.score is not None:
            if not hit.score >= min_similarity:  # NaN fails too
                continue
        elif hit.terms_hit < min_terms:
            continue
        if hit.chunk_id is not None:
            seen.add(hit.chunk_id)
        kept.append(hit)
    return kept


def recall_query(
    recent_messages: Sequence[tuple[str, str]],
    incoming: str,
    *,
    message_chars: int = RECALL_MESSAGE_CHARS,
) -> str:
    """The search text for automatic recall: the current topic, not the whole session.

    The last four user/assistant messages of `recent_messages` ((role, content) pairs,
    oldest first) and then `incoming`, one per line; each is cut to `message_chars`.
    """
    picked = [
        content
        for role, content in recent_messages
        if (role or "").strip().lower() in ("user", "assistant") and (content or "").strip()
    ][-RECALL_MESSAGES:]
    parts = [*picked, incoming] if (incoming or "").strip() else picked
    return "\n".join(_clip(" ".join(p.split()), message_chars) for p in parts)


def _clip(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    cut = text.rfind(" ", 0, chars + 1)
    return text[: cut if cut > chars // 2 else chars]


def _relevance(hit: MemoryHit) -> tuple[bool, float, bool, float, int]:
    rank, score = hit.rank, hit.score
    has_rank = rank is not None and not math.isnan(rank)
    has_score = score is not None and not math.isnan(score)
    return (
        not has_rank,
        -(rank or 0.0) if has_rank else 0.0,
        not has_score,
        -(score or 0.0) if has_score else 0.0,
        -hit.terms_hit,
    )


def _instant(value: datetime | None) -> datetime:
    """Comparable instant: naive is read as UTC; None (never passed here) sorts first."""
    if value is None:
        return datetime.min.replace(tzinfo=UTC)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value
