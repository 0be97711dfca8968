"""`python -m app.cli import-chats FILE --user ID` (wired in app/cli.py)."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI parses its arguments before importing the heavy modules
    from app.config import Settings


async def _import(settings: Settings, url: str, user_id: str, f: IO[bytes], fmt: str | None) -> Any:
    from app.db.engine import create_engine, session_factory, transaction
    from app.domain.chat_import.reader import ExportReader
    from app.domain.chat_import.services import import_chats
    from app.domain.transfer.services import require_user

    engine = create_engine(url, settings)
    try:
        factory = session_factory(engine)
        async with transaction(factory) as db:
            await require_user(db, user_id)
        max_line = settings.message_max_chars * 4 + 64 * 1024
        reader = await asyncio.to_thread(ExportReader, f, fmt, max_line)
        return await import_chats(factory, settings, user_id, reader)
    finally:
        await engine.dispose()


def cmd_import_chats(settings: Settings, args: argparse.Namespace) -> None:
    import msgspec

    from app.domain.transfer.commands import _prepare, _run
    from app.domain.transfer.spool import temp_file

    url = _prepare(settings)
    if args.file == "-":  # a zip needs to seek: stdin goes to a temporary file first
        with temp_file(settings) as f:
            shutil.copyfileobj(sys.stdin.buffer, f)
            f.seek(0)
            report = _run(lambda: _import(settings, url, args.user, f, args.format))
    else:
        with open(args.file, "rb") as f:
            report = _run(lambda: _import(settings, url, args.user, f, args.format))
    print(msgspec.json.format(msgspec.json.encode(report)).decode())


def add_command(sub: Any, settings_or_exit: Callable[[], Settings]) -> None:
    """Register `import-chats` on the CLI's sub-parsers."""
    p = sub.add_parser(
        "import-chats",
        help="import a ChatGPT or Claude export (or JSON Lines of messages) as sessions",
    )
    p.add_argument("--user", required=True, metavar="ID", help="the (existing) account")
    p.add_argument(
        "--format", choices=("chatgpt", "claude", "jsonl"), help="default: detected from the file"
    )
    p.add_argument(
        "file", metavar="FILE", help="conversations.json, the export's zip, or .jsonl (`-`: stdin)"
    )
    p.set_defaults(fn=lambda args: cmd_import_chats(settings_or_exit(), args))
