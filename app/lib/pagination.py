from __future__ import annotations

from typing import Annotated, Generic, TypeVar

import msgspec
from litestar.params import Parameter

from app.lib.inputs import INT4_MAX, INT8_MAX

T = TypeVar("T")

MAX_LIMIT = 200

# The paging query parameters of every list (docs/api.md, "Limits").
Limit = Annotated[int, Parameter(ge=1, le=MAX_LIMIT)]
Offset = Annotated[int, Parameter(ge=0, le=INT4_MAX)]
# before_seq: page back from a sequence number (None: the newest page)
BeforeSeq = Annotated[int | None, Parameter(ge=0, le=INT8_MAX)]


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


def page_of(items: list[T], limit: int, offset: int) -> Page[T]:
    """The page `offset`/`limit` of a list held whole in memory."""
    return page(items[offset : offset + limit], len(items), limit, offset)
