"""`in_own_session`, the side reads of a search: autocommit on its connection (no
`BEGIN` / `ROLLBACK` round trips), and the pooled connection given back as it was."""

from dataclasses import replace
from typing import Any

import psycopg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.engine import create_engine, in_own_session, session_factory, transaction
from app.domain.facts.search_repository import FactSearchRepository
from app.domain.sketches.repositories import SCRATCHPAD, SketchRepository
from app.lib.sql import DriverRows


async def _driver(db: AsyncSession) -> psycopg.AsyncConnection[Any]:
    raw = await (await db.connection()).get_raw_connection()
    return raw.driver_connection  # type: ignore[return-value]


async def test_a_side_read_runs_outside_a_transaction_block(db_url: str) -> None:
    engine = create_engine(db_url, replace(Settings(), db_pool_size=1, db_max_overflow=0))
    factory = session_factory(engine)
    try:

        async def side(db: AsyncSession) -> tuple[int, bool, str, str, list[Any], str]:
            pid = (await db.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            conn = await _driver(db)
            before = (await db.execute(text("SHOW work_mem"))).scalar_one()
            # a statement still scopes a setting to itself
            rows = await DriverRows(db)(
                "SELECT current_setting('work_mem') AS inside FROM"
                " (SELECT set_config('work_mem', '7MB', true) AS cfg) AS s",
                {},
            )
            after = (await db.execute(text("SHOW work_mem"))).scalar_one()
            status = conn.info.transaction_status.name
            return pid, conn.autocommit, before, after, rows, status

        pid, autocommit, before, after, rows, status = await in_own_session(factory, side)
        assert autocommit and rows[0].inside == "7MB"
        assert before != "7MB" and after == before  # the setting ended with its statement
        assert status == "IDLE"  # no open transaction

        # the same pooled connection, back in the service's mode: transactions again
        async with transaction(factory) as db:
            again = (await db.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            conn = await _driver(db)
            assert again == pid
            assert not conn.autocommit
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    finally:
        await engine.dispose()


async def test_the_side_reads_are_never_prepared(db_url: str) -> None:
    """The facts' and sketches' searches run often on the same pooled connection: sent
    unprepared, each is planned for its user and query vector (a generic plan evaluates
    the vector's cast for every row)."""
    engine = create_engine(db_url, replace(Settings(), db_pool_size=1, db_max_overflow=0))
    factory = session_factory(engine)
    try:

        async def side(db: AsyncSession) -> int:
            facts = FactSearchRepository(db)
            sketches = SketchRepository(db)
            for _ in range(7):
                await facts.vector_search("nobody", [1.0] * 8, limit=5, max_distance=0.3)
                await facts.text_search("nobody", ["kettle"], limit=5)
                await sketches.search_values("nobody", SCRATCHPAD, ["kettle"], limit=5)
            found = await db.execute(
                text(
                    "SELECT count(*) FROM pg_prepared_statements"
                    " WHERE statement ILIKE '%memory_facts%' OR statement ILIKE '%kv_store%'"
                )
            )
            return int(found.scalar_one())

        assert await in_own_session(factory, side) == 0
    finally:
        await engine.dispose()
