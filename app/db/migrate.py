"""Programmatic Alembic: upgrade, current and head revisions (CLI, health, tests)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import structlog
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection

from alembic import command

ROOT = Path(__file__).resolve().parents[2]
log = structlog.get_logger()

#: Alembic's default version table (alembic/env.py does not rename it).
VERSION_TABLE = "alembic_version"


def alembic_config(url: str | None = None) -> Config:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(ROOT / "alembic"))
    if url:
        cfg.attributes["url"] = url
    return cfg


def _in_thread(fn, *args) -> None:  # type: ignore[no-untyped-def]
    # env.py calls asyncio.run(); run it off any running event loop.
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn(*args)
        except BaseException as exc:  # re-raised in the caller
            errors.append(exc)

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if errors:
        raise errors[0]


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate to `revision`, saying so, and how long it took (Alembic logs each
    revision it applies: "Running upgrade a -> b")."""
    log.info("db.migrating", target=revision)
    started = time.perf_counter()
    _in_thread(command.upgrade, alembic_config(url), revision)
    log.info("db.migrated", target=revision, seconds=round(time.perf_counter() - started, 2))


def downgrade(url: str, revision: str = "base") -> None:
    _in_thread(command.downgrade, alembic_config(url), revision)


def check(url: str) -> None:
    """Raise when the models and the migrations disagree (`alembic check`)."""
    _in_thread(command.check, alembic_config(url))


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(conn: Connection) -> str | None:
    """The revision the database is at, read from Alembic's version table directly:
    `MigrationContext.configure` logs two INFO lines ("Context impl PostgresqlImpl.",
    "Will assume transactional DDL.") every time, which made every /health log them."""
    if conn.execute(text("SELECT to_regclass(:t)"), {"t": VERSION_TABLE}).scalar() is None:
        return None
    heads = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(heads) > 1:  # what MigrationContext.get_current_revision refuses too
        raise RuntimeError(f"{VERSION_TABLE} holds several heads: {sorted(heads)}")
    return heads[0] if heads else None


def pinned_search_path(connection: Connection) -> str:
    """`SET search_path = …` with the migration's own path, written out: what
    `SET search_path FROM CURRENT` pins, in a form Citus accepts on the functions it
    propagates to the workers (it refuses `FROM CURRENT` there)."""
    path = connection.execute(text("SELECT current_setting('search_path')")).scalar_one()
    return f"SET search_path = {path}"
