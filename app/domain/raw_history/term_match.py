"""Query terms against a chunk's text: the light stem, BM25's IDF, and where the terms
occur (a term of `PREFIX_MIN`+ chars matches at the start of a word, a shorter one as a
whole word) — the pure pieces `ranking` scores lines with."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

__all__ = ["PREFIX_MIN", "idf", "stem_term", "term_hits", "term_pattern"]

PREFIX_MIN = 3
_STEM_RULES = (("ies", ""), ("ied", ""), ("ing", ""), ("ed", ""), ("es", "e"), ("s", ""))
_VOWELS = frozenset("aeiouy")


def stem_term(word: str) -> str:
    """A light English stem of a lower-case query word, for matching as a word prefix:
    one inflection is stripped (`-ies -ied -ing -ed -es -s`), then a final `e` and a
    doubled final consonant (`activities` → `activit`, `dancing` → `danc`, `running` →
    `run`, `classes` → `class`). Never shorter than 3 chars; words under 4 chars,
    non-ASCII words and words with digits are returned as they are."""
    if len(word) < 4 or not word.isascii() or not word.isalpha():
        return word
    stem = word
    for suffix, repl in _STEM_RULES:
        if stem.endswith(suffix) and not stem.endswith("ss"):
            if len(stem) - len(suffix) + len(repl) >= PREFIX_MIN:
                stem = stem[: len(stem) - len(suffix)] + repl
            break
    if stem.endswith("e") and len(stem) >= 5:
        stem = stem[:-1]
    if stem != word and len(stem) >= 4 and stem[-1] == stem[-2]:
        if stem[-1] not in _VOWELS and stem[-1] not in "lsz":
            stem = stem[:-1]
    return stem


def idf(df: int, n: int) -> float:
    """BM25's IDF (never negative): a term in every one of `n` chunks weighs ~0."""
    n = max(n, 1)
    df = min(max(df, 0), n)
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def term_pattern(terms: Iterable[str]) -> re.Pattern[str] | None:
    """One case-insensitive pattern for all terms, matching at the start of a word: as a
    prefix for terms of `PREFIX_MIN`+ chars, as a whole word for shorter ones. The
    matched text, lower-cased, is the term."""
    alts = []
    for term in sorted({t.lower() for t in terms if t}, key=len, reverse=True):
        alt = re.escape(term)
        alts.append(alt if len(term) >= PREFIX_MIN else alt + r"(?![^\W_])")
    if not alts:
        return None
    return re.compile(r"(?<![^\W_])(?:" + "|".join(alts) + ")", re.IGNORECASE)


def term_hits(text: str, terms: Iterable[str]) -> list[tuple[int, str]]:
    """(start, term) of every match in `text` of the (lower-case, letters-and-digits)
    `terms`, in text order — what `term_pattern(terms).finditer` finds, found with
    `str.find` on the lower-cased text instead: the pattern's look-behind is tried at
    every position (why: docs/performance.md, "term hits"). At one position the longest
    term wins, as in the pattern. A text whose lower-casing changes its length (a few
    Unicode letters do) is matched with the pattern."""
    wanted = sorted({t.lower() for t in terms if t}, key=len, reverse=True)
    if not wanted:
        return []
    low = text.lower()
    if len(low) != len(text):
        pattern = term_pattern(wanted)
        assert pattern is not None
        return [(m.start(), m.group(0).lower()) for m in pattern.finditer(text)]
    found: dict[int, str] = {}
    size = len(low)
    for term in wanted:
        whole = len(term) < PREFIX_MIN
        i = low.find(term)
        while i >= 0:
            end = i + len(term)
            if (i == 0 or not low[i - 1].isalnum()) and (
                not whole or end >= size or not low[end].isalnum()
            ):
                found.setdefault(i, term)
            i = low.find(term, i + 1)
    return sorted(found.items())
