"""Programmatic Alembic: upgrade, current and head revisions (CLI, health, tests)."""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path

import structlog
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection

from alembic import command

_CHECKOUT = Path(__file__).resolve().parents[2]
#: Where alembic.ini and alembic/ are: the checkout's, else the copy an installed wheel
#: carries in the package (setup.py puts them in app/_migrations/).
ROOT = (
    _CHECKOUT
    if (_CHECKOUT / "alembic.ini").is_file()
    else Path(__file__).resolve().parents[1] / "_migrations"
)
log = structlog.get_logger()

#: Alembic's default version table (alembic/env.py does not rename it).
VERSION_TABLE = "alembic_version"
#: The advisory lock every migration run holds for its transaction (alembic/env.py):
#: processes that migrate one database at once run one after the other, and the later
#: ones find the schema at head. (app.db.extensions has the other key.)
MIGRATION_LOCK = 0x6E617669_0001  # "navi", 1


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


def lock_migrations(conn: Connection) -> None:
    """Take MIGRATION_LOCK for `conn`'s transaction (the one the revisions run in),
    waiting, without a limit, for a process that is migrating the same database."""
    params = {"k": MIGRATION_LOCK}
    if conn.execute(text("SELECT pg_try_advisory_xact_lock(:k)"), params).scalar():
        return
    log.info("db.migration_waiting", hint="another process is migrating this database")
    started = time.perf_counter()
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), params)
    log.info("db.migration_lock_taken", waited_seconds=round(time.perf_counter() - started, 2))


def downgrade(url: str, revision: str = "base") -> None:
    _in_thread(command.downgrade, alembic_config(url), revision)


def check(url: str) -> None:
    """Raise when the models and the migrations disagree (`alembic check`)."""
    _in_thread(command.check, alembic_config(url))


@functools.cache
def _scripts() -> ScriptDirectory:
    """The code's revisions, read once per process (~20 ms of parsing each time: /health
    asks for the head on every call; the files change only with a new release)."""
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str | None:
    return _scripts().get_current_head()


def known_revision(revision: str) -> bool:
    """Whether `revision` is one of this code's revisions. A database at a revision the
    code does not know was migrated by a later release (a rolling deploy's new version
    ran `navi migrate` while this one still serves)."""
    try:
        return _scripts().get_revision(revision) is not None
    except Exception:  # alembic.util.CommandError and kin: not one of ours
        return False


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
