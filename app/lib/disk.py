"""A full disk is an answer, not a crash: ENOSPC (or EDQUOT, a file-system quota) from a
write in the data directory becomes 507 `insufficient_storage` with one detail, and a
warning `files.disk_full` naming the path and its file system's free bytes.

Each writer removes what it wrote before it raises (a temporary file, the files of the
request so far); `app/asgi/http.py` turns a full-disk error that escaped a writer into the
same 507.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import structlog

from app.lib.errors import InsufficientStorage

log = structlog.get_logger()

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
DISK_FULL_DETAIL = "the server's disk for session files is full; nothing was stored"


def disk_full_cause(exc: BaseException | None) -> OSError | None:
    """The full-disk OSError `exc` is or was raised from (its causes, and its contexts
    unless suppressed: `raise … from None` said the new error is the whole story)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return exc
        if exc.__cause__ is not None:
            exc = exc.__cause__
        else:
            exc = None if exc.__suppress_context__ else exc.__context__
    return None


def free_bytes(path: Path) -> int | None:
    """Bytes free to an unprivileged writer on the file system of `path` (its nearest
    existing parent); None when it cannot be read."""
    for candidate in (path, *path.parents):
        try:
            st = os.statvfs(candidate)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize
    return None


def disk_full(path: Path, exc: OSError, **context: object) -> InsufficientStorage:
    """Log the full disk under `path` and return the 507 to raise."""
    log.warning(
        "files.disk_full",
        path=str(path),
        free_bytes=free_bytes(path),
        error=f"{type(exc).__name__}: {exc.strerror or exc}",
        **context,
    )
    return InsufficientStorage(DISK_FULL_DETAIL)
