"""PostgreSQL extensions: `vector` is required; `pg_trgm` is optional.

pg_trgm is created when the role may do so; otherwise it is detected and skipped, and text
search falls back to ILIKE without trigram indexes. The trigram indexes are created here
(by the migration, and again at every start-up) exactly when pg_trgm is installed, so a DBA
who installs it later gets the indexes on the next start — no new migration needed.
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


def ensure_trigram_indexes(conn: Connection) -> int:
    """Create the trigram GIN indexes when pg_trgm is installed. Returns how many exist."""
    if extension_state(conn).pg_trgm is None:
        return 0
    for name, table, column in TRIGRAM_INDEXES:
        conn.execute(
            text(f"CREATE INDEX IF NOT EXISTS {name} ON {table} USING gin ({column} gin_trgm_ops)")
        )
    return len(TRIGRAM_INDEXES)


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
