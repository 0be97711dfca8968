"""The session directory on disk: `{data_dir}/session_files/{session_id}/`.

Every file is written under a temporary dot-name in the same directory and only then
linked to its final name, which is never overwritten (`a.txt`, `a_1.txt`, …): a failed
or refused write leaves nothing behind, and two writers of one name both keep their file.
Dot-files (temp files, the image index) are ours and never listed or served.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from app.domain.files.content_types import ContentType, detect_content_type
from app.domain.files.executables import HEAD_BYTES
from app.domain.files.names import is_stored_name, numbered
from app.domain.kernel.session_files import SESSION_FILES, session_dir, session_files_root

TEMP_PREFIX = ".upload-"
MAX_DUPLICATES = 10_000

__all__ = [
    "SESSION_FILES",
    "FileInfo",
    "PendingFile",
    "file_info",
    "link_unique",
    "list_files",
    "relative_path",
    "resolve_stored",
    "session_dir",
    "session_files_root",
]


def relative_path(session_id: uuid.UUID, name: str) -> str:
    """The path the agent is told: relative to the data directory."""
    return f"{SESSION_FILES}/{session_id}/{name}"


@dataclass(frozen=True)
class FileInfo:
    name: str
    size: int
    content_type: ContentType
    modified_at: datetime


def read_head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(HEAD_BYTES)


def file_info(path: Path) -> FileInfo:
    st = path.stat()
    return FileInfo(
        name=path.name,
        size=st.st_size,
        content_type=detect_content_type(path.name, read_head(path)),
        modified_at=datetime.fromtimestamp(st.st_mtime, UTC),
    )


def resolve_stored(directory: Path, name: str) -> Path | None:
    """The regular file `name` in `directory`, or None. Only names that sanitising
    produces can match, so `..`, separators and dot-files never resolve; symlinks
    (which we never create) are not followed."""
    if not is_stored_name(name):
        return None
    path = directory / name
    try:
        st = path.lstat()
    except OSError:
        return None
    return path if stat.S_ISREG(st.st_mode) else None


def list_files(directory: Path) -> list[str]:
    """Names of the stored files, sorted."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    return sorted(
        e.name for e in entries if not e.name.startswith(".") and e.is_file(follow_symlinks=False)
    )


def link_unique(tmp: Path, directory: Path, name: str) -> str:
    """Give `tmp` the first free name of `name`, `name_1`, … and return it."""
    for n in range(MAX_DUPLICATES):
        candidate = numbered(name, n)
        target = directory / candidate
        try:
            os.link(tmp, target)
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                raise
            # No hard links here: reserve the name exclusively, then move over it.
            try:
                os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            except FileExistsError:
                continue
            os.replace(tmp, target)
            return candidate
        os.unlink(tmp)
        return candidate
    raise FileExistsError(f"{name}: too many files of this name")


class PendingFile:
    """A file being written under a temporary name; `commit()` names it, `discard()`
    removes it. Synchronous: call from a worker thread."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=TEMP_PREFIX, suffix=".part")
        self.directory = directory
        self.path = Path(tmp)
        self.file = os.fdopen(fd, "wb")
        self.size = 0

    def write(self, data: bytes) -> None:
        self.file.write(data)
        self.size += len(data)

    def commit(self, name: str) -> str:
        try:
            self.file.close()  # flushes: a full disk may say so only here
            os.chmod(self.path, 0o644)
            return link_unique(self.path, self.directory, name)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        try:
            self.file.close()
        finally:
            self.path.unlink(missing_ok=True)
