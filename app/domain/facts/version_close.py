"""Closing fact versions when their facts go (deleted, purged): the UPDATEs the fact
writes in `repositories.py` and `version_repository.py` share. The times are bound
parameters: no function in an UPDATE (Citus)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import Table, and_, bindparam, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import FactVersion


async def close_current_versions(
    session: AsyncSession, user_id: str, fact_ids: Sequence[int], at: datetime
) -> None:
    """Close the current versions of these facts (deleted, purged) at `at`, or at their
    expiry when that came first. `at` is bound: no function in the UPDATE (Citus)."""
    if not fact_ids:
        return
    v = FactVersion
    mine = and_(v.user_id == user_id, v.fact_id.in_(list(fact_ids)), v.valid_to.is_(None))
    await session.execute(
        update(v)
        .where(mine, v.expires_at.is_not(None), v.expires_at < at)
        .values(valid_to=v.expires_at)
    )
    await session.execute(update(v).where(mine).values(valid_to=at))


async def close_versions_at(session: AsyncSession, user_id: str, ends: dict[int, datetime]) -> None:
    """Close the current version of each fact of `ends` at its own time (bound)."""
    if not ends:
        return
    table = cast(Table, FactVersion.__table__)
    v = table.c  # a Core UPDATE: executemany, one row per fact
    await session.execute(
        update(table)
        .where(v.user_id == user_id, v.fact_id == bindparam("fid"), v.valid_to.is_(None))
        .values(valid_to=bindparam("end")),
        [{"fid": fid, "end": end} for fid, end in ends.items()],
    )
