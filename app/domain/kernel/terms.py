"""Query terms, scopes and result counts: how every store reads a memory query."""

from __future__ import annotations

import math
import re

from app.domain.kernel.stopwords import STOPWORDS

SCOPES = ("all", "facts", "raw", "sketches", "errors")
DEFAULT_K = 5
MAX_K = 20

TOKEN = re.compile(r"[^\W_]+")


def normalize_scope(scope: object) -> str:
    """`all`, `facts`, `raw`, `sketches` or `errors`; anything else is `all`."""
    value = scope.strip().lower() if isinstance(scope, str) else ""
    return value if value in SCOPES else "all"


def clamp_k(k: object) -> int:
    """Results per store, 1..20. None, 0, booleans and garbage mean the default (5)."""
    if isinstance(k, bool) or k is None:
        return DEFAULT_K
    value: float
    if isinstance(k, int | float):
        value = k
    elif isinstance(k, str):
        try:
            value = float(k.strip())
        except ValueError:
            return DEFAULT_K
    else:
        return DEFAULT_K
    if not math.isfinite(value) or int(value) == 0:
        return DEFAULT_K
    return max(1, min(int(value), MAX_K))


def query_terms(query: str) -> list[str]:
    """Lower-cased content words of `query`, in order, without stopwords or repeats.

    Words are runs of letters and digits: `server_port` and `nginx.conf` split into
    their parts, so they meet the same words written with spaces. One-letter words are
    dropped, one-digit numbers kept.
    """
    seen: set[str] = set()
    terms: list[str] = []
    for token in TOKEN.findall((query or "").lower()):
        if token in seen or token in STOPWORDS or (len(token) < 2 and not token.isdigit()):
            continue
        seen.add(token)
        terms.append(token)
    return terms
