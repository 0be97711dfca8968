"""Session files in an export: read a part at a time, written back the same way.

Files live on disk (`{data_dir}/session_files/{session_id}/`, app/domain/files/storage.py);
an export carries each listed file as `file` records of at most `FILE_PART_BYTES` bytes
(base64), so neither side holds a whole file. Dot-files (the pasted-image index) are not
carried: they are rebuilt from the files.

An import writes the files under a staging directory of its own
(`{data_dir}/session_files/.import_staging/<random>/<session_id>/`: the session files'
file system, so a full disk refuses the import before its commit) and moves each session's directory
into `session_files/` only after its transaction has committed (`publish`): the hourly
orphan cleanup deletes a session directory whose session it does not find, and an
uncommitted import's sessions are not found.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio.to_thread

from app.config import Settings
from app.domain.files.names import is_stored_name
from app.domain.files.storage import list_files, resolve_stored, session_dir
from app.domain.kernel.session_files import file_staging_root
from app.domain.transfer.decoding import RecordError
from app.domain.transfer.records import FILE_PART_BYTES, file_record
from app.lib.disk import disk_full, disk_full_cause


def _read_part(path: Path, offset: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(FILE_PART_BYTES)


async def file_records(settings: Settings, session_id: uuid.UUID) -> AsyncIterator[dict[str, Any]]:
    """The `file` records of one session's directory (none when it has no directory)."""
    directory = session_dir(settings, session_id)
    for name in await anyio.to_thread.run_sync(list_files, directory):
        path = resolve_stored(directory, name)
        if path is None:
            continue
        offset = 0
        while True:
            data = await anyio.to_thread.run_sync(_read_part, path, offset)
            if data or offset == 0:  # an empty file is one empty record
                yield file_record(session_id, name, offset, data)
            if len(data) < FILE_PART_BYTES:
                break
            offset += len(data)


class FileWriter:
    """Writes imported files to a staging directory; `publish()` (after the commit) moves
    them into place, `discard()` removes them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.staging = file_staging_root(settings) / secrets.token_hex(8)
        self.sessions_written: set[uuid.UUID] = set()
        self.sizes: dict[tuple[uuid.UUID, str], int] = {}

    async def write(self, record: dict[str, Any], sessions: set[uuid.UUID]) -> None:
        try:
            session_id = uuid.UUID(record.get("session_id"))
        except (TypeError, ValueError, AttributeError):
            raise RecordError("session_id: expected a UUID") from None
        if session_id not in sessions:
            raise RecordError(f"session_id: no session {session_id} before it in the file")
        name, offset, data = record.get("name"), record.get("offset"), record.get("data")
        if not isinstance(name, str) or not is_stored_name(name) or name.startswith("."):
            raise RecordError("name: not a file name Navi stores")
        if not isinstance(data, str):
            raise RecordError("data: expected base64 text")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise RecordError("data: not valid base64") from None
        expected = self.sizes.get((session_id, name), 0)
        if offset != expected or isinstance(offset, bool):
            raise RecordError(f"offset: expected {expected} (parts in order, no gaps)")
        directory = self.staging / str(session_id)
        try:
            if session_id not in self.sessions_written:
                await anyio.to_thread.run_sync(_fresh_dir, directory)
                self.sessions_written.add(session_id)
            await anyio.to_thread.run_sync(_append, directory / name, raw)
        except OSError as exc:  # the import is rolled back and its staging removed
            full = disk_full_cause(exc)
            if full is None:
                raise
            raise disk_full(directory, full, session_id=str(session_id)) from None
        self.sizes[(session_id, name)] = expected + len(raw)

    async def publish(self) -> None:
        """Move the staged directories into `session_files/` (the sessions are committed).
        A directory already there is an orphan of a deleted session with that id: the
        import checked the id was free, so it is replaced."""
        for session_id in sorted(self.sessions_written):
            target = session_dir(self.settings, session_id)
            await anyio.to_thread.run_sync(_replace, self.staging / str(session_id), target)
        await self.discard()

    async def discard(self) -> None:
        await anyio.to_thread.run_sync(shutil.rmtree, self.staging, True)
        self.sessions_written.clear()


def _fresh_dir(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)


def _replace(source: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(source, target)  # a rename on one file system


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)
