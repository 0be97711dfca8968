"""Small SQL helpers shared by repositories."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache


def escape_like(term: str) -> str:
    """Escape LIKE/ILIKE wildcards so `term` matches literally (with ESCAPE '\\')."""
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def contains_pattern(term: str) -> str:
    """`%term%` matching `term` literally anywhere."""
    return f"%{escape_like(term)}%"


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form of `vector` (`[0.1,0.2,…]`), for a `CAST(:v AS vector)`
    parameter: bound as one string, without the ORM type's per-call processing.

    The last few texts are remembered: one search sends its query vector to several
    statements (the segment walk, the candidates' distances, the facts), and writing
    384 floats costs ~0.25 ms each time; looking one up costs ~10 µs."""
    return _vector_text(tuple(map(float, vector)))


@lru_cache(maxsize=16)
def _vector_text(values: tuple[float, ...]) -> str:
    return "[" + ",".join(map(repr, values)) + "]"
