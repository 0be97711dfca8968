"""All SQL of the files domain (the files themselves live on disk)."""

from __future__ import annotations

import uuid
from collections.abc import Collection

from sqlalchemy import Uuid, any_, bindparam, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Session

#: Directory ids looked up per statement: each batch is one array parameter
#: (`id = ANY(:ids)`), never one bind parameter per id (PostgreSQL takes at most 65,535).
IDS_PER_QUERY = 10_000

_EXISTING = select(Session.id).where(
    Session.id == any_(bindparam("ids", type_=ARRAY(Uuid(as_uuid=True))))
)


class FilesRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def existing_session_ids(self, ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
        """Which of `ids` are sessions (system-wide: the cleanup job's lookup), in
        batches of `IDS_PER_QUERY`, each sent as one array."""
        listed = list(ids)
        found: set[uuid.UUID] = set()
        for start in range(0, len(listed), IDS_PER_QUERY):
            batch = listed[start : start + IDS_PER_QUERY]
            found.update((await self.session.execute(_EXISTING, {"ids": batch})).scalars())
        return found
