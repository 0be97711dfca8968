"""Session files: uploads, listing, share_file, content_publish, and the cleanup job.

Access: every operation first resolves the session through `SessionAccess.get` with
the caller's Viewer (404 for a session the caller may not see); the writes — upload,
share_file — with `Viewer.editor` (403 for a reader who may not change it). Long
transfers (uploads, share_file copies) check the session in a short transaction of their
own, so no database connection is held while bytes move.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import anyio.to_thread
import structlog

from app.config import Settings
from app.db.engine import transaction
from app.domain.files.names import sanitize_filename
from app.domain.files.quota import quota_detail, rate_limited, usage_bytes
from app.domain.files.repositories import FilesRepository
from app.domain.files.schemas import CardOut, FileOut
from app.domain.files.storage import (
    FileInfo,
    PendingFile,
    file_info,
    list_files,
    relative_path,
    resolve_stored,
    session_dir,
    session_files_root,
)
from app.domain.files.uploads import StoredUpload, UploadLimits, receive
from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.repositories import UserSessionsRepository
from app.domain.kernel.runtime import Runtime, SessionMaker
from app.domain.kernel.session_files import file_staging_root, import_staging_root
from app.lib.disk import disk_full, disk_full_cause
from app.lib.errors import Forbidden, NotFound, PayloadTooLarge, Unprocessable
from app.lib.rate_limit import TokenBuckets

log = structlog.get_logger()

MAX_FILES_PER_UPLOAD = 20
COPY_CHUNK = 1024 * 1024
MB = 1024 * 1024


def file_url(session_id: uuid.UUID, name: str) -> str:
    return f"/sessions/{session_id}/files/{quote(name, safe='')}"


def file_out(session_id: uuid.UUID, info: FileInfo, original: str | None = None) -> FileOut:
    return FileOut(
        name=info.name,
        size=info.size,
        content_type=info.content_type.media_type,
        type=info.content_type.kind,
        path=relative_path(session_id, info.name),
        url=file_url(session_id, info.name),
        modified_at=info.modified_at,
        original_name=original if original and original != info.name else None,
    )


def upload_block(session_id: uuid.UUID, stored: list[StoredUpload]) -> str:
    """The lines the client appends to the user message (seed 003)."""
    lines = [f"- {s.original} → {relative_path(session_id, s.name)}" for s in stored]
    return "[Uploaded files on disk:\n" + "\n".join(lines) + "]"


class FileService:
    """A session's files on disk. Its long transfers (uploads, share_file copies) check
    the session in a transaction of their own (`check_session`), so no database
    connection is held while bytes move; the other handlers check it through the
    request's `SessionAccess` first."""

    def __init__(
        self, settings: Settings, sessions: SessionMaker, buckets: TokenBuckets | None = None
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.buckets = buckets if buckets is not None else TokenBuckets()

    @classmethod
    def of(cls, runtime: Runtime) -> FileService:
        """The service of the runtime's files folder and database (no request session)."""
        return cls(runtime.settings, runtime.session_factory, runtime.upload_buckets)

    async def check_session(self, session_id: uuid.UUID, viewer: Viewer) -> str:
        """404 unless the session is in the viewer's scope (403 for an editor who may only
        read it); a transaction of its own. The session's owner."""
        async with transaction(self.sessions) as db:
            return await SessionAccess(db).owner(session_id, viewer)

    def take_upload(self, user_id: str) -> None:
        """One upload of `user_id` from this process's bucket, or 429 with Retry-After."""
        per_minute = self.settings.files_uploads_per_minute
        if per_minute:
            wait = self.buckets.take(user_id, per_minute)
            if wait > 0:
                raise rate_limited(per_minute, wait)

    async def quota_left(self, owner: str) -> tuple[int, str] | None:
        """Bytes `owner` may still upload and the 413 detail past them; None: no quota."""
        quota = self.settings.files_max_bytes_per_user
        if not quota:
            return None
        async with transaction(self.sessions) as db:
            ids = await UserSessionsRepository(db).ids(owner)
        usage = await anyio.to_thread.run_sync(usage_bytes, self.settings, ids)
        return quota - usage, quota_detail(quota, usage)

    async def upload(
        self,
        session_id: uuid.UUID,
        content_type: str,
        content_length: int | None,
        chunks: AsyncIterator[bytes],
        owner: str | None = None,
    ) -> tuple[list[FileOut], str]:
        """Stream the files into the session's directory; with `owner`, within the bytes
        left of that user's quota (413 naming the quota and the usage)."""
        settings = self.settings
        left = await self.quota_left(owner) if owner is not None else None
        limits = UploadLimits(
            max_file_bytes=settings.session_files_max_size_mb * MB,
            max_files=MAX_FILES_PER_UPLOAD,
            quota_left=left[0] if left else None,
            quota_detail=left[1] if left else "",
        )
        if content_length is not None and content_length > limits.max_body_bytes:
            raise PayloadTooLarge(
                f"request body: {content_length} bytes, more than {MAX_FILES_PER_UPLOAD} files "
                f"of {settings.session_files_max_size_mb} MB (SESSION_FILES_MAX_SIZE_MB)"
            )
        if left is not None and left[0] <= 0:
            raise PayloadTooLarge(left[1])
        directory = session_dir(settings, session_id)
        try:
            stored = await receive(chunks, content_type, directory, limits)
        except OSError as exc:  # the receiver removed what it wrote
            full = disk_full_cause(exc)
            if full is None:
                raise
            raise disk_full(directory, full, session_id=str(session_id)) from None
        infos = await anyio.to_thread.run_sync(
            lambda: [file_info(directory / s.name) for s in stored]
        )
        log.info("files.uploaded", session_id=str(session_id), files=len(stored))
        outs = [file_out(session_id, i, s.original) for i, s in zip(infos, stored, strict=True)]
        return outs, upload_block(session_id, stored)

    async def list_page(
        self, session_id: uuid.UUID, limit: int, offset: int
    ) -> tuple[list[FileOut], int]:
        directory = session_dir(self.settings, session_id)

        def read() -> tuple[list[FileOut], int]:
            names = list_files(directory)
            chosen = names[offset : offset + limit]
            return [file_out(session_id, file_info(directory / n)) for n in chosen], len(names)

        return await anyio.to_thread.run_sync(read)

    async def stored(self, session_id: uuid.UUID, name: str) -> tuple[Path, FileInfo]:
        """A stored file's path and what it is (404 when the session has no such file)."""
        path = stored_file(self.settings, session_id, name)
        return path, await anyio.to_thread.run_sync(file_info, path)

    async def share_file(self, session_id: uuid.UUID, raw: str) -> FileOut:
        """Copy a local file (under SHARE_FILE_ROOTS) into the session directory."""
        try:
            info = await anyio.to_thread.run_sync(copy_shared_file, self.settings, session_id, raw)
        except OSError as exc:  # the copy removed its temporary file
            full = disk_full_cause(exc)
            if full is None:
                raise
            directory = session_dir(self.settings, session_id)
            raise disk_full(directory, full, session_id=str(session_id)) from None
        log.info("files.share_file_copied", session_id=str(session_id), size=info.size)
        return file_out(session_id, info)

    async def publish(self, session_id: uuid.UUID, name: str) -> CardOut:
        """content_publish: the card of a file already in the session directory."""
        return await anyio.to_thread.run_sync(publish_card, self.settings, session_id, name)


def stored_file(settings: Settings, session_id: uuid.UUID, name: str) -> Path:
    path = resolve_stored(session_dir(settings, session_id), name)
    if path is None:
        raise NotFound(f"filename: no file {name!r} in this session")
    return path


def publish_card(settings: Settings, session_id: uuid.UUID, name: str) -> CardOut:
    """content_publish: the card of a file already in the session directory."""
    info = file_info(stored_file(settings, session_id, name))
    return CardOut(
        type=info.content_type.kind,
        content_type=info.content_type.media_type,
        size=info.size,
        url=file_url(session_id, info.name),
        name=info.name,
    )


# ---------------------------------------------------------------- share_file
def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def copy_shared_file(settings: Settings, session_id: uuid.UUID, raw: str) -> FileInfo:
    """Copy a local file from under SHARE_FILE_ROOTS into the session directory.

    The source is resolved (every symlink followed) and must then lie inside a root:
    a link that points out of the roots is refused like any outside path. The file is
    opened with O_NOFOLLOW and checked again by its descriptor, so it cannot be swapped
    for a link between the check and the copy.
    """
    if not raw or not os.path.isabs(raw):
        raise Unprocessable("path: must be an absolute path")
    roots = tuple(Path(os.path.realpath(r)) for r in settings.share_file_root_paths)
    if not roots:
        raise Forbidden("path: share_file is disabled (SHARE_FILE_ROOTS is empty)")
    try:
        real = Path(raw).resolve(strict=True)
    except (OSError, RuntimeError):
        raise Unprocessable(f"path: no such file {raw!r}") from None
    if not _inside(real, roots):
        raise Forbidden("path: outside SHARE_FILE_ROOTS (after resolving symlinks)")
    if real.is_dir():
        raise Unprocessable("path: is a directory; share_file copies one file")
    max_bytes = settings.share_file_max_size_mb * MB
    too_large = PayloadTooLarge(
        f"path: larger than {settings.share_file_max_size_mb} MB (SHARE_FILE_MAX_SIZE_MB)"
    )
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise Unprocessable(f"path: cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as src:
        st = os.fstat(src.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Unprocessable("path: not a regular file")
        if st.st_size > max_bytes:
            raise too_large
        pending = PendingFile(session_dir(settings, session_id))
        try:
            while chunk := src.read(COPY_CHUNK):
                if pending.size + len(chunk) > max_bytes:
                    raise too_large
                pending.write(chunk)
        except BaseException:
            pending.discard()
            raise
    name = pending.commit(sanitize_filename(Path(raw).name))
    return file_info(pending.directory / name)


# ---------------------------------------------------------------- cleanup job
def _session_dir_ids(root: Path) -> dict[uuid.UUID, Path]:
    out: dict[uuid.UUID, Path] = {}
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return out
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        try:
            sid = uuid.UUID(entry.name)
        except ValueError:
            continue  # not ours: left alone
        if str(sid) == entry.name:
            out[sid] = Path(entry.path)
    return out


#: An import's staging directory older than this was left by a crash (an import writes
#: its files there until it commits, then moves them: app/domain/transfer/files_io.py).
STALE_STAGING_SECONDS = 24 * 3600


def _remove_stale_staging(root: Path, now: float) -> None:
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if now - entry.stat(follow_symlinks=False).st_mtime > STALE_STAGING_SECONDS:
                shutil.rmtree(entry.path, ignore_errors=True)


async def cleanup_orphan_dirs(runtime: Runtime) -> int:
    """Delete session directories whose session no longer exists; returns how many.

    One query for the whole set of directory names. Safe with several replicas: deleting
    an already deleted directory is a no-op. An import's files are in no session's
    directory before its sessions are committed (they wait in its staging directory,
    `session_files/.import_staging/`, whose name is no session id), so a running import
    loses none here; staging (and a spooled body) left by a crash is removed after a day.
    """
    settings = runtime.settings
    for staging in (import_staging_root(settings), file_staging_root(settings)):
        await anyio.to_thread.run_sync(_remove_stale_staging, staging, time.time())
    dirs = await anyio.to_thread.run_sync(_session_dir_ids, session_files_root(settings))
    if not dirs:
        return 0
    async with transaction(runtime.session_factory) as db:
        existing = await FilesRepository(db).existing_session_ids(dirs.keys())
    orphans = [path for sid, path in dirs.items() if sid not in existing]
    for path in orphans:
        await anyio.to_thread.run_sync(functools.partial(shutil.rmtree, path, ignore_errors=True))
    if orphans:
        log.info("files.orphan_dirs_deleted", count=len(orphans))
    return len(orphans)
