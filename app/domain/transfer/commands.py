"""`python -m app.cli export` and `python -m app.cli import` (wired in app/cli.py)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI parses its arguments before importing the heavy modules
    from app.config import Settings


async def _export(settings: Settings, url: str, user_id: str, out: IO[bytes]) -> None:
    from app.db.engine import create_engine, session_factory, transaction
    from app.domain.transfer.exporter import export_lines
    from app.domain.transfer.services import require_user

    engine = create_engine(url, settings)
    try:
        factory = session_factory(engine)
        async with transaction(factory) as db:
            await require_user(db, user_id)
        # a page per short transaction, as over HTTP: no snapshot held for the whole file
        async for chunk in export_lines(factory, settings, user_id):
            await asyncio.to_thread(out.write, chunk)
        out.flush()
    finally:
        await engine.dispose()


async def _import(settings: Settings, url: str, user_id: str, f: IO[bytes]) -> Any:
    from app.db.engine import create_engine, session_factory
    from app.domain.transfer.ndjson import ndjson_lines
    from app.domain.transfer.services import import_into
    from app.domain.transfer.spool import file_chunks

    engine = create_engine(url, settings)
    try:
        lines = ndjson_lines(file_chunks(f), sys.maxsize, "no limit")
        return await import_into(session_factory(engine), settings, user_id, lines)
    finally:
        await engine.dispose()


def _prepare(settings: Settings) -> str:
    from app.db import migrate
    from app.db.engine import resolve_database_url
    from app.lib.logging import configure_logging

    configure_logging(settings.log_level, settings.log_json)
    url = resolve_database_url(settings)
    migrate.upgrade(url)
    return url


def _run(coro_fn: Callable[[], Any]) -> Any:
    from app.lib.errors import AppError

    try:
        return asyncio.run(coro_fn())
    except AppError as exc:
        print(f"{exc.kind}: {exc.detail}", file=sys.stderr)
        raise SystemExit(1) from None


def cmd_export(settings: Settings, args: argparse.Namespace) -> None:
    url = _prepare(settings)
    if args.out in (None, "-"):
        _run(lambda: _export(settings, url, args.user, sys.stdout.buffer))
        return
    with open(args.out, "wb") as out:
        _run(lambda: _export(settings, url, args.user, out))
    print(f"export: {args.user} written to {args.out}", file=sys.stderr)


def cmd_import(settings: Settings, args: argparse.Namespace) -> None:
    url = _prepare(settings)
    if args.file == "-":
        report = _run(lambda: _import(settings, url, args.user, sys.stdin.buffer))
    else:
        with open(args.file, "rb") as f:
            report = _run(lambda: _import(settings, url, args.user, f))
    records = ", ".join(f"{n} {t}" for t, n in sorted(report.records.items()))
    print(f"import: {args.user}: {records}; vectors {report.vectors}")


def add_commands(sub: Any, settings_or_exit: Callable[[], Settings]) -> None:
    """Register `export` and `import` on the CLI's sub-parsers."""
    p = sub.add_parser("export", help="write a user's memory as NDJSON (docs/operations.md)")
    p.add_argument("--user", required=True, metavar="ID", help="the user's id")
    p.add_argument("--out", metavar="FILE", help="the file to write (default: stdout)")
    p.set_defaults(fn=lambda args: cmd_export(settings_or_exit(), args))
    p = sub.add_parser("import", help="restore an export into an empty account (all or nothing)")
    p.add_argument("--user", required=True, metavar="ID", help="the (existing, empty) account")
    p.add_argument("file", metavar="FILE", help="the export file (`-`: stdin)")
    p.set_defaults(fn=lambda args: cmd_import(settings_or_exit(), args))
