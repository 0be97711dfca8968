"""The order of the LLM context rebuilt from stored rows.

Stored messages are ordered by ``sequence_number``, but a summary written by
compression stands for history *older* than the messages it was kept with,
while its own sequence number is newer than theirs (rows are append-only and
``session.messages`` is never rewritten). The summary therefore carries
``metadata["context_head"] = True`` and the context is laid out as::

    system rows older than the newest head summary   (sequence order)
    head summaries                                    (sequence order)
    every other row                                   (sequence order)

which is exactly what compression produced (``system + [summary] + kept``) and
stays stable while later messages are appended. Without a head summary the
order is plain sequence order, so a summary a client appended itself keeps the
position it was appended at.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

__all__ = ["CONTEXT_HEAD", "is_context_head", "order_context"]

CONTEXT_HEAD = "context_head"


class _Row(Protocol):
    @property
    def role(self) -> str: ...
    @property
    def sequence_number(self) -> int: ...
    @property
    def is_summary(self) -> bool: ...


R = TypeVar("R", bound=_Row)


def is_context_head(is_summary: bool, metadata: Mapping[str, Any] | None) -> bool:
    return is_summary and bool((metadata or {}).get(CONTEXT_HEAD))


def order_context(
    rows: Sequence[R], metadata_of: Callable[[R], Mapping[str, Any] | None]
) -> list[R]:
    """``rows`` (any order) laid out as described in the module docstring."""
    ordered = sorted(rows, key=lambda r: r.sequence_number)
    heads = [r for r in ordered if is_context_head(r.is_summary, metadata_of(r))]
    if not heads:
        return ordered
    boundary = heads[-1].sequence_number
    lead = [r for r in ordered if r.role == "system" and r.sequence_number < boundary]
    placed = {id(r) for r in lead} | {id(r) for r in heads}
    return lead + heads + [r for r in ordered if id(r) not in placed]
