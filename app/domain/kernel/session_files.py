"""Where a session's files live on disk: `{data_dir}/session_files/{session_id}/`.

In the kernel because more than the files domain needs the place: deleting a session or
a whole user removes the directories (app/domain/files/storage.py writes them).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path

from app.config import Settings

SESSION_FILES = "session_files"
#: Where an import spools its body: `{data_dir}/import_staging/`.
IMPORT_STAGING = "import_staging"
#: Where an import writes its session files until it commits:
#: `{data_dir}/session_files/.import_staging/`, on the file system of the session files
#: whatever is mounted there (moving them into place is a rename, never a copy that a
#: full disk could cut short after the commit). A dot-name: never a session's directory.
FILE_STAGING = ".import_staging"


def session_files_root(settings: Settings) -> Path:
    return settings.data_path / SESSION_FILES


def import_staging_root(settings: Settings) -> Path:
    return settings.data_path / IMPORT_STAGING


def file_staging_root(settings: Settings) -> Path:
    return session_files_root(settings) / FILE_STAGING


def session_dir(settings: Settings, session_id: uuid.UUID) -> Path:
    return session_files_root(settings) / str(session_id)


def remove_session_dirs(settings: Settings, session_ids: Iterable[uuid.UUID]) -> None:
    """Delete the directories of these sessions (a missing one is fine). Call it once the
    rows are gone for good (after the commit); the periodic orphan cleanup
    (`files.services.cleanup_orphan_dirs`) catches any left behind by a crash."""
    for session_id in session_ids:
        shutil.rmtree(session_dir(settings, session_id), ignore_errors=True)
