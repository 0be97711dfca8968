"""PostgreSQL extensions: `vector` is required; `pg_trgm` is optional.

pg_trgm is created when the role may do so; otherwise it is detected and skipped, and text
search falls back to ILIKE without trigram indexes. The trigram indexes exist exactly when
pg_trgm is installed: the first migration creates them, and a DBA who installs pg_trgm
later gets them on the next start — no new migration needed. Start-up only reads the
catalog (`trigram_indexes_missing`: no DDL, no lock on the tables when they are there);
when one is missing or invalid, one process (an advisory lock) builds it in the
background with `CREATE INDEX CONCURRENTLY` (`build_trigram_indexes`), which never
blocks the tables' writers.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from sqlalchemy import text
from sqlalchemy.engine import Connection

from app.db.base import TRIGRAM_INDEX_PREFIX

log = structlog.get_logger()

# (index name, table, column)
TRIGRAM_INDEXES: tuple[tuple[str, str, str], ...] = (
    (f"{TRIGRAM_INDEX_PREFIX}memory_facts_category", "memory_facts", "category"),
    (f"{TRIGRAM_INDEX_PREFIX}memory_facts_key", "memory_facts", "key"),
    (f"{TRIGRAM_INDEX_PREFIX}memory_facts_value", "memory_facts", "value"),
    (f"{TRIGRAM_INDEX_PREFIX}session_messages_content", "session_messages", "content"),
    (
        f"{TRIGRAM_INDEX_PREFIX}session_messages_archive_content",
        "session_messages_archive",
        "content",
    ),
)


@dataclass(frozen=True)
class ExtensionState:
    vector: str | None  # installed version or None
    pg_trgm: str | None


def extension_state(conn: Connection) -> ExtensionState:
    rows: dict[str, str] = dict(
        conn.execute(
            text(
                "SELECT extname, extversion FROM pg_extension WHERE extname IN ('vector','pg_trgm')"
            )
        ).all()
    )
    return ExtensionState(vector=rows.get("vector"), pg_trgm=rows.get("pg_trgm"))


def in_recovery(conn: Connection) -> bool:
    """Whether the server is a standby (replaying WAL: read-only), not a primary."""
    return bool(conn.execute(text("SELECT pg_is_in_recovery()")).scalar())


def try_create_pg_trgm(conn: Connection) -> bool:
    """CREATE EXTENSION pg_trgm if available and permitted; never fails the caller."""
    available = conn.execute(
        text("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'")
    ).scalar()
    if not available:
        log.info("db.pg_trgm_unavailable", hint="text search uses ILIKE without trigram indexes")
        return False
    try:
        with conn.begin_nested():
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
        return True
    except Exception as exc:  # privilege errors: a DBA must install it
        log.warning("db.pg_trgm_not_created", error=str(exc).splitlines()[0])
        return False


#: The session-level advisory lock of the trigram index builder: one process of the
#: deployment builds, the others leave it to that one (app.db.migrate has the other key).
TRIGRAM_BUILD_LOCK = 0x6E617669_0002  # "navi", 2


@dataclass(frozen=True)
class MissingIndex:
    name: str
    table: str
    column: str
    #: it exists but is invalid: a `CREATE INDEX CONCURRENTLY` that did not finish
    invalid: bool

    def create(self, concurrently: bool) -> str:
        how = "CONCURRENTLY " if concurrently else ""
        return (
            f"CREATE INDEX {how}IF NOT EXISTS {self.name} ON {self.table}"
            f" USING gin ({self.column} gin_trgm_ops)"
        )


def trigram_indexes_missing(conn: Connection) -> list[MissingIndex]:
    """The trigram indexes pg_trgm calls for that the catalog lacks as valid indexes
    (none without pg_trgm). Reads the catalog only: no DDL, no lock on the tables."""
    if extension_state(conn).pg_trgm is None:
        return []
    valid: dict[str, bool] = dict(
        conn.execute(
            text(
                "SELECT c.relname, i.indisvalid FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = current_schema() AND c.relname = ANY(:names)"
            ),
            {"names": [name for name, _, _ in TRIGRAM_INDEXES]},
        ).all()
    )
    return [
        MissingIndex(name, table, column, invalid=name in valid)
        for name, table, column in TRIGRAM_INDEXES
        if not valid.get(name)
    ]


def ensure_trigram_indexes(conn: Connection) -> int:
    """Create the missing trigram GIN indexes when pg_trgm is installed, in the caller's
    transaction (the first migration, on tables it has just created). Returns how many
    exist. Issues no DDL when they all exist."""
    if extension_state(conn).pg_trgm is None:
        return 0
    for index in trigram_indexes_missing(conn):
        if index.invalid:
            conn.execute(text(f"DROP INDEX {index.name}"))
        conn.execute(text(index.create(concurrently=False)))
    return len(TRIGRAM_INDEXES)


def build_trigram_indexes(conn: Connection) -> list[str]:
    """Build the missing trigram indexes with `CREATE INDEX CONCURRENTLY` on `conn`, a
    connection in autocommit (the statement refuses a transaction): the table's writers
    and readers go on meanwhile (it takes SHARE UPDATE EXCLUSIVE, which conflicts with no
    DML; it waits for the transactions open when it starts, holding nothing they need).
    An invalid leftover of an interrupted build is dropped (concurrently) first. Under
    TRIGRAM_BUILD_LOCK: when another process holds it, that one builds and this returns
    at once. Returns the names built."""
    got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": TRIGRAM_BUILD_LOCK})
    if not got.scalar():
        log.info("db.trigram_indexes_skipped", reason="another process is building them")
        return []
    built: list[str] = []
    try:
        for index in trigram_indexes_missing(conn):  # again, under the lock
            if index.invalid:
                conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {index.name}"))
            log.info("db.trigram_index_building", index=index.name, table=index.table)
            conn.execute(text(index.create(concurrently=True)))
            built.append(index.name)
            log.info("db.trigram_index_built", index=index.name)
    finally:
        conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": TRIGRAM_BUILD_LOCK})
    return built


def drop_trigram_indexes(conn: Connection) -> None:
    for name, _, _ in TRIGRAM_INDEXES:
        conn.execute(text(f"DROP INDEX IF EXISTS {name}"))


def vector_dimensions(conn: Connection) -> set[int]:
    """The dimensions of the vector columns of the current schema's tables (empty in a
    database not migrated yet)."""
    rows = conn.execute(
        text(
            "SELECT DISTINCT a.atttypmod FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE a.atttypid = to_regtype('vector') AND NOT a.attisdropped"
            " AND c.relkind = 'r' AND n.nspname = current_schema()"
        )
    )
    return {int(dim) for (dim,) in rows}
