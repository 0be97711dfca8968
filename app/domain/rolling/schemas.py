"""Request and response shapes of `/sessions/{id}/rolling-summary`."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

import msgspec

from app.domain.rolling.summary import MAX_CURRENT_CHARS, MAX_DECISIONS, MAX_ITEM_CHARS, MAX_PAST
from app.lib.inputs import NUL_PATTERN

Item = Annotated[str, msgspec.Meta(max_length=MAX_ITEM_CHARS, pattern=NUL_PATTERN)]


class RollingSummaryDoc(msgspec.Struct, forbid_unknown_fields=True):
    """The summary document the rolling job keeps (and the model reads): at most 8
    `Do:` / `Don't:` decisions, 12 past discussions of ≤ 600 characters each, and the
    current discussion in ≤ 2,000 characters."""

    key_decisions: Annotated[list[Item], msgspec.Meta(max_length=MAX_DECISIONS)] = []
    past_discussions: Annotated[list[Item], msgspec.Meta(max_length=MAX_PAST)] = []
    current_discussion: Annotated[
        str, msgspec.Meta(max_length=MAX_CURRENT_CHARS, pattern=NUL_PATTERN)
    ] = ""


class RollingSummaryEdit(msgspec.Struct, forbid_unknown_fields=True):
    """An edit: the whole document, and the cursor of the summary it was based on (what
    `GET` answered; null when the session had none). A summary that moved on since is
    a 409."""

    summary: RollingSummaryDoc
    cursor_seq: int | None


class RollingSummaryOut(msgspec.Struct):
    session_id: uuid.UUID
    context_mode: str  # the session's profile's: the job keeps the summary in "rolling"
    summary: RollingSummaryDoc | None
    cursor_seq: int | None  # the last message the summary covers (its sequence number)
    cursor_at: datetime | None
