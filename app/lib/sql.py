"""Small SQL helpers shared by repositories."""

from __future__ import annotations

from collections.abc import Sequence


def escape_like(term: str) -> str:
    """Escape LIKE/ILIKE wildcards so `term` matches literally (with ESCAPE '\\')."""
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def contains_pattern(term: str) -> str:
    """`%term%` matching `term` literally anywhere."""
    return f"%{escape_like(term)}%"


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form of `vector` (`[0.1,0.2,…]`), for a `CAST(:v AS vector)`
    parameter: bound as one string, without the ORM type's per-call processing."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"
