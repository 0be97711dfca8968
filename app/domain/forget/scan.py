"""The user's session files that hold a forgotten text: listed, never changed (a file is
the user's own document; deleting or editing it is theirs to decide)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from app.config import Settings
from app.domain.files.content_types import detect_content_type
from app.domain.files.storage import list_files, read_head, relative_path, session_dir
from app.domain.forget.redact import Needle

TEXT_KINDS = frozenset({"text", "html", "svg"})
MAX_SCAN_BYTES = 20 * 1024 * 1024  # a longer file is searched in its first 20 MiB


@dataclass(frozen=True)
class FoundFile:
    session_id: uuid.UUID
    path: str  # relative to the data directory, as uploads answer it


def files_holding(
    settings: Settings, session_ids: Sequence[uuid.UUID], needle: Needle
) -> list[FoundFile]:
    """Blocking (file I/O): run it in a worker thread."""
    found = []
    for sid in session_ids:
        directory = session_dir(settings, sid)
        for name in list_files(directory):
            path = directory / name
            try:
                if detect_content_type(name, read_head(path)).kind not in TEXT_KINDS:
                    continue
                with open(path, "rb") as f:
                    data = f.read(MAX_SCAN_BYTES)
            except OSError:
                continue  # removed meanwhile
            if needle.regex.search(data.decode("utf-8", errors="replace")):
                found.append(FoundFile(sid, relative_path(sid, name)))
    return found
