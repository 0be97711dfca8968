from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

T = TypeVar("T")

MAX_LIMIT = 200


class Page(msgspec.Struct, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int
    has_more: bool


def page(items: list[T], total: int, limit: int, offset: int) -> Page[T]:
    return Page(
        items=items, total=total, limit=limit, offset=offset, has_more=offset + len(items) < total
    )
