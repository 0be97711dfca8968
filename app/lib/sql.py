"""Small SQL helpers shared by repositories."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

import psycopg
from psycopg.rows import namedtuple_row
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.sql import ClauseElement

_DIALECT = PGDialect_psycopg()


def escape_like(term: str) -> str:
    """Escape LIKE/ILIKE wildcards so `term` matches literally (with ESCAPE '\\')."""
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def contains_pattern(term: str) -> str:
    """`%term%` matching `term` literally anywhere."""
    return f"%{escape_like(term)}%"


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form of `vector` (`[0.1,0.2,…]`), for a `CAST(:v AS vector)`
    parameter: bound as one string, without the ORM type's per-call processing.

    The last few texts are remembered: one search sends its query vector to several
    statements (the segment walk, the candidates' distances, the facts), and writing
    384 floats costs ~0.25 ms each time; looking one up costs ~10 µs."""
    return _vector_text(tuple(map(float, vector)))


@lru_cache(maxsize=16)
def _vector_text(values: tuple[float, ...]) -> str:
    return "[" + ",".join(map(repr, values)) + "]"


@dataclass(frozen=True)
class Compiled:
    """A Core statement compiled once for psycopg (`%(name)s` placeholders), with the
    values of the literals it binds (`defaults`): what `DriverRows` runs."""

    sql: str
    defaults: Mapping[str, Any]

    def params(self, given: Mapping[str, Any]) -> dict[str, Any]:
        return {**self.defaults, **given}


def compile_for_driver(stmt: ClauseElement) -> Compiled:
    """`stmt` compiled for psycopg. The values it binds itself (literals: `1.0` in a
    `CASE`) become the defaults; a parameter without one must be given at each call
    (psycopg refuses a missing one)."""
    compiled = stmt.compile(dialect=_DIALECT)
    return Compiled(str(compiled), {k: v for k, v in compiled.params.items() if v is not None})


class DriverRows:
    """Statements of a search's hot path sent by psycopg itself, on the session's
    connection and in its transaction (if any: side reads run in autocommit): the ORM's
    layers (the statement's cache key, its parameter and row processing) cost more Python
    per statement than some of these statements take to run. Rows are named tuples. The
    SQL comes from the repositories (`compile_for_driver` for a Core statement). The
    session's connection is asked for at each call (after a commit it may be another
    one); its driver connection is looked up again only when it changed.

    Never prepared: each statement is planned for its own parameters. psycopg otherwise
    prepares a statement run five times on a connection, and PostgreSQL may then keep
    one generic plan for every user — wrong for a user with a hundred or ten thousand
    chunks — in which a parameter cast (the query vector's text `CAST(… AS vector)`) is
    no longer folded into a constant but evaluated for every row. Measurements:
    docs/performance.md, "Measurements behind the code"."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self._bound: tuple[AsyncConnection, psycopg.AsyncConnection[Any]] | None = None

    async def __call__(self, sql: str, params: Mapping[str, Any]) -> list[Any]:
        current = await self.session.connection()
        if self._bound is None or self._bound[0] is not current:
            raw = await current.get_raw_connection()
            self._bound = (current, cast(psycopg.AsyncConnection[Any], raw.driver_connection))
        async with self._bound[1].cursor(row_factory=namedtuple_row) as cur:
            await cur.execute(sql, params, prepare=False)
            return await cur.fetchall()
