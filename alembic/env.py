"""Async Alembic environment on the psycopg 3 driver.

The URL comes from `config.attributes["url"]` (set by app.db.migrate), else
`sqlalchemy.url`, else the app's settings (DATABASE_URL or the embedded server).
"""

from __future__ import annotations

import asyncio

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

import app.db.models  # noqa: F401  (registers every table)
from alembic import context
from app.config import get_settings
from app.db.base import TRIGRAM_INDEX_PREFIX, Base
from app.db.citus import cluster_metadata, has_citus
from app.db.engine import normalize_url, resolve_database_url
from app.db.migrate import lock_migrations

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    return normalize_url(url) if url else resolve_database_url(get_settings())


def include_object(obj, name, type_, reflected, compare_to) -> bool:  # type: ignore[no-untyped-def]
    # Trigram indexes exist only where pg_trgm does; they are managed by app.db.extensions.
    if type_ == "index" and name and name.startswith(TRIGRAM_INDEX_PREFIX):
        return False
    return True


def _configure(connection: Connection | None = None, **kw) -> None:  # type: ignore[no-untyped-def]
    # a Citus coordinator's schema is the models' with one HNSW graph per shard for the
    # segment vectors instead of the per-bucket graphs (app.db.citus)
    distributed = connection is not None and has_citus(connection)
    context.configure(
        connection=connection,
        target_metadata=cluster_metadata(target_metadata) if distributed else target_metadata,
        include_object=include_object,
        compare_type=True,
        compare_server_default=False,
        **kw,
    )


def run_migrations_offline() -> None:
    _configure(url=_url(), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def _run_sync(connection: Connection) -> None:
    # First, before Alembic reads the version table: one migrating process at a time
    # (an advisory lock held to the end of this transaction; app.db.migrate).
    lock_migrations(connection)
    _configure(connection)
    with context.begin_transaction():
        if has_citus(connection):
            # Every migration runs in one transaction. After a multi-shard command in
            # Citus's parallel mode, a later undistribute/distribute in the same
            # transaction is refused, so the whole run uses one connection per node.
            connection.exec_driver_sql("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
        context.run_migrations()


async def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_sync(connection)
        return
    engine = create_async_engine(_url())
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run_sync)
            await conn.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    asyncio.run(run_migrations_online())
