"""The session list's keyset cursor (`GET /sessions?cursor=…`): where the last page
ended, in the list's order (pinned first, the sort column, then the id). Opaque to
clients: base64url of a small JSON array. Pure: no database, no settings."""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.lib.errors import BadRequest

#: The sort columns whose values are times (the others are text or null).
_TIMES = {"last_active", "created_at"}


@dataclass(frozen=True)
class ListCursor:
    sort_by: str
    sort_order: str
    pinned: bool
    value: datetime | str | None
    id: uuid.UUID


def encode_cursor(sort_by: str, sort_order: str, row: Any) -> str:
    """The cursor after `row` (a session summary row) in the list sorted so."""
    value = getattr(row, sort_by)
    if isinstance(value, datetime):
        value = value.isoformat()
    raw = json.dumps([sort_by, sort_order, bool(row.pinned), value, str(row.id)])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, sort_by: str, sort_order: str) -> ListCursor:
    """The cursor a previous page returned; 400 when it is not one, or was made for
    another order (`sort_by`, `sort_order` must be those of the page it came from)."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        by, order, pinned, value, sid = json.loads(raw)
        if by in _TIMES:
            value = datetime.fromisoformat(value)
            if value.tzinfo is None:
                raise ValueError("a naive time")
        elif value is not None and not isinstance(value, str):
            raise ValueError("not a text")
        parsed = ListCursor(str(by), str(order), bool(pinned), value, uuid.UUID(sid))
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise BadRequest("cursor: not a cursor this list returned") from None
    if (parsed.sort_by, parsed.sort_order) != (sort_by, sort_order):
        raise BadRequest(
            f"cursor: made for sort_by={parsed.sort_by}&sort_order={parsed.sort_order};"
            " page on with the same order, or start again without a cursor"
        )
    return parsed
