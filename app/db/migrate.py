"""Programmatic Alembic: upgrade, current and head revisions (CLI, health, tests)."""

from __future__ import annotations

import threading
from pathlib import Path

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from alembic import command

ROOT = Path(__file__).resolve().parents[2]


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
    _in_thread(command.upgrade, alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    _in_thread(command.downgrade, alembic_config(url), revision)


def check(url: str) -> None:
    """Raise when the models and the migrations disagree (`alembic check`)."""
    _in_thread(command.check, alembic_config(url))


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()
