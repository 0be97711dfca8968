"""Fact versions: what each write of a fact records, and the reads of the history
(docs/memory.md, "Versions").

A save of a new value closes the current version and adds one; a save of the same
value confirms it (the fact's `last_verified_at`; the version carries the fact's new
expiry) and adds none. A delete or an expiry closes the current version. A merge hides
a row and touches no version: both rows' versions stay, and an undo finds them as
they were. Restoring a version saves its value again: a new version, nothing rewritten.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from app.domain.facts.repositories import FactRow
from app.domain.facts.schemas import FactOut, FactVersionOut
from app.domain.facts.version_repository import FactVersionRepository, NewVersion, VersionRow


async def record_write(
    versions: FactVersionRepository,
    user_id: str,
    row: FactRow,
    *,
    session_id: uuid.UUID | None,
    message_seq: int | None = None,
    said_at: datetime | None = None,
) -> int | None:
    """Record the fact's write `row` (as the upsert returned it, under its lock): the id
    of the version added, None when the value only got confirmed. The new version is
    valid from `said_at` (the time of the message it came from) when that is earlier
    than the write, never before the version it replaces began: the old one ends there."""
    at = row.updated_at  # the write's own `now()`
    if said_at is not None and said_at < at:
        at = said_at
    current = await versions.current(user_id, row.id)
    if current is not None:
        expired = current.expires_at is not None and current.expires_at <= row.updated_at
        if current.value == row.value and not expired:
            if current.expires_at != row.expires_at:
                await versions.set_expiry(user_id, current.id, row.expires_at)
            return None
        at = max(at, current.valid_from)
        ended = min(at, current.expires_at) if expired and current.expires_at else at
        await versions.close(user_id, current.id, ended)
    return await versions.add(
        user_id,
        NewVersion(
            fact_id=row.id,
            category=row.category,
            key=row.key,
            value=row.value,
            source=row.source,
            confidence=row.confidence,
            session_id=session_id,
            message_seq=message_seq,
            valid_from=at,
            expires_at=row.expires_at,
        ),
    )


def version_out(row: VersionRow) -> FactVersionOut:
    return FactVersionOut(
        id=row.id,
        fact_id=row.fact_id,
        category=row.category,
        key=row.key,
        value=row.value,
        source=row.source,
        confidence=row.confidence,
        session_id=row.session_id,
        message_seq=row.message_seq,
        valid_from=row.valid_from,
        valid_to=row.valid_to,
        expires_at=row.expires_at,
        recorded_at=row.recorded_at,
        current=row.valid_to is None,
    )


def fact_as_of(row: VersionRow) -> FactOut:
    """A version true at some time, in the shape of a fact (`GET /memory/facts?as_of=`)."""
    return FactOut(
        id=row.fact_id,
        user_id=row.user_id,
        category=row.category,
        key=row.key,
        value=row.value,
        source=row.source,
        confidence=row.confidence,
        expires_at=row.expires_at,
        source_context=None,
        source_session_id=row.session_id,
        merged_into=None,
        has_embedding=False,
        created_at=row.valid_from,
        updated_at=row.recorded_at,
        version_id=row.id,
        valid_from=row.valid_from,
        valid_to=row.valid_to,
    )
