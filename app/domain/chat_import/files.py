"""The attachments of an imported conversation as session files.

Bytes come from the export's zip (ChatGPT's `file-….dat` / `file-…-name.png` members,
`reader.ExportReader.attachment`) or from the export itself (Claude's extracted text of
an upload). Each file is copied a piece at a time into the session's directory under its
sanitised original name (`files.storage.PendingFile`: never over another file), within
`SESSION_FILES_MAX_SIZE_MB` and the user's quota (`FILES_MAX_BYTES_PER_USER`);
executables are refused as on upload. What is not stored is answered with the reason —
on a full disk too (`files.disk_full` is logged): the conversations are committed before
their files, so the import is not refused for them. A re-import does not retry them:
only the files of the messages it imports (a new or topped-up conversation's) are stored.
"""

from __future__ import annotations

import uuid
import zipfile
from pathlib import Path

import anyio.to_thread

from app.config import Settings
from app.domain.chat_import.formats import Attachment
from app.domain.chat_import.reader import ExportReader
from app.domain.files.executables import HEAD_BYTES, executable_extension, executable_signature
from app.domain.files.names import sanitize_filename
from app.domain.files.storage import PendingFile, session_dir
from app.lib.disk import disk_full, disk_full_cause

PIECE_BYTES = 1024 * 1024
#: An attachment the full disk of the session files could not take (the import goes on).
DISK_FULL_REASON = "the server's disk for session files is full: not stored"
MB = 1024 * 1024


class FileStore:
    def __init__(self, settings: Settings, reader: ExportReader, quota_left: int | None) -> None:
        self.settings = settings
        self.reader = reader
        self.left = quota_left  # bytes the user may still store; None: no quota

    async def store(self, session_id: uuid.UUID, att: Attachment) -> str | None:
        """Store `att` in the session's directory: None when stored, else why not."""
        name = sanitize_filename(att.name)
        if executable_extension(name):
            return "an executable file: not stored"
        found = None if att.data is not None else self.reader.attachment(att)
        if att.data is None and found is None:
            return "not in the export"
        size = len(att.data) if att.data is not None else found[1].file_size  # type: ignore[index]
        if size > self.settings.session_files_max_size_mb * MB:
            return f"larger than SESSION_FILES_MAX_SIZE_MB ({size} bytes)"
        if self.left is not None and size > self.left:
            return "over the user's file quota (FILES_MAX_BYTES_PER_USER)"
        if found is not None:
            name = sanitize_filename(found[0])
        directory = session_dir(self.settings, session_id)
        reason = await anyio.to_thread.run_sync(
            _write, directory, name, att.data, found[1] if found else None, self.reader
        )
        if reason is None and self.left is not None:
            self.left -= size
        return reason


def _write(
    directory: Path,
    name: str,
    data: bytes | None,
    info: zipfile.ZipInfo | None,
    reader: ExportReader,
) -> str | None:
    try:
        pending = PendingFile(directory)
    except OSError as exc:
        full = disk_full_cause(exc)
        if full is None:
            raise
        disk_full(directory, full, file=name)
        return DISK_FULL_REASON
    try:
        if data is not None:
            head = data[:HEAD_BYTES]
            pending.write(data)
        else:
            assert reader.zip is not None and info is not None
            head = b""
            with reader.zip.open(info) as member:
                while piece := member.read(PIECE_BYTES):
                    if not head:
                        head = piece[:HEAD_BYTES]
                    pending.write(piece)
                    if pending.size > info.file_size:  # a lying header: stop
                        pending.discard()
                        return "damaged in the zip"
        if executable_signature(head):
            pending.discard()
            return "an executable file: not stored"
        pending.commit(name)
    except OSError as exc:
        pending.discard()
        full = disk_full_cause(exc)
        if full is None:
            return f"unreadable in the zip ({type(exc).__name__})"
        disk_full(directory, full, file=name)  # logged; the import goes on without it
        return DISK_FULL_REASON
    except (zipfile.BadZipFile, EOFError) as exc:
        pending.discard()
        return f"unreadable in the zip ({type(exc).__name__})"
    return None
