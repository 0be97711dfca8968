"""Small SQL helpers shared by repositories."""

from __future__ import annotations


def escape_like(term: str) -> str:
    """Escape LIKE/ILIKE wildcards so `term` matches literally (with ESCAPE '\\')."""
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def contains_pattern(term: str) -> str:
    """`%term%` matching `term` literally anywhere."""
    return f"%{escape_like(term)}%"
