"""The per-user limits of uploads: the storage quota and the rate limit's refusal.

Usage is measured on disk: the bytes of every file (temporary parts included) in the
session directories of the user's sessions, summed when an upload starts. Two uploads
of one user at once are each checked against the usage before either: together they may
pass the quota by at most one request's files.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

from app.config import Settings
from app.domain.kernel.session_files import session_dir
from app.lib.errors import TooManyRequests


def directory_bytes(directory: Path) -> int:
    """Bytes of the regular files directly in `directory` (0 when it does not exist)."""
    total = 0
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return 0
    for e in entries:
        try:
            if e.is_file(follow_symlinks=False):
                total += e.stat(follow_symlinks=False).st_size
        except FileNotFoundError:  # removed meanwhile
            continue
    return total


def usage_bytes(settings: Settings, session_ids: Iterable[uuid.UUID]) -> int:
    """Bytes stored in the session directories of `session_ids` (blocking: a thread's)."""
    return sum(directory_bytes(session_dir(settings, sid)) for sid in session_ids)


def quota_detail(quota: int, usage: int) -> str:
    return (
        f"upload: the user's session files may take {quota} bytes "
        f"(FILES_MAX_BYTES_PER_USER); {usage} are in use, {max(0, quota - usage)} left"
    )


def rate_limited(per_minute: int, wait: float) -> TooManyRequests:
    return TooManyRequests(
        f"uploads: at most {per_minute} a minute per user (FILES_UPLOADS_PER_MINUTE); "
        f"retry in {math.ceil(wait)} s",
        retry_after=math.ceil(wait),
    )
