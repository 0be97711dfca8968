"""Streaming multipart receiver: request body chunks → files in the session directory.

The body is parsed as it arrives (python-multipart's push parser) and each file part is
written straight to a temp file, so memory holds one chunk and one file head (4 KiB),
whatever the upload size. A file is judged twice before it is kept: its extension when
its headers arrive, its first bytes once they are in. Any refusal — too large,
executable, malformed body — discards the file being written and every file this
request already stored: a failed upload leaves nothing behind.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import anyio.to_thread
from python_multipart import MultipartParser
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import parse_options_header

from app.domain.files.executables import (
    HEAD_BYTES,
    executable_extension,
    executable_signature,
)
from app.domain.files.names import sanitize_filename
from app.domain.files.storage import PendingFile
from app.lib.errors import BadRequest, PayloadTooLarge, Unprocessable, UnsupportedMedia

__all__ = ["StoredUpload", "UploadLimits", "UploadReceiver", "multipart_boundary", "receive"]

# Part headers are tiny; anything else is an abuse of the parser.
MAX_PART_HEADER_BYTES = 16 * 1024
MULTIPART_OVERHEAD = 64 * 1024
_FILENAME_STAR = re.compile(r"filename\*\s*=\s*([^']*)'[^']*'([^;\s]+)", re.IGNORECASE)


@dataclass(frozen=True)
class UploadLimits:
    max_file_bytes: int
    max_files: int
    #: Bytes of files this request may store in all (the user's quota left); None: any.
    quota_left: int | None = None
    quota_detail: str = ""  # the 413's detail past `quota_left`

    @property
    def max_body_bytes(self) -> int:
        return self.max_files * (self.max_file_bytes + MULTIPART_OVERHEAD)

    @property
    def max_file_mb(self) -> int:
        return self.max_file_bytes // (1024 * 1024)


@dataclass(frozen=True)
class StoredUpload:
    original: str  # the client's name, sanitised
    name: str  # the stored name (a numeric suffix when the name was taken)
    size: int


def multipart_boundary(content_type: str) -> bytes:
    media, options = parse_options_header(content_type)
    if media != b"multipart/form-data":
        raise UnsupportedMedia("Content-Type: expected multipart/form-data with the files")
    boundary = options.get(b"boundary")
    if not boundary:
        raise BadRequest("Content-Type: multipart boundary missing")
    return boundary


def _part_filename(disposition: bytes) -> str | None:
    """The file name of a part, or None for a plain form field."""
    raw = disposition.decode("utf-8", errors="replace")
    star = _FILENAME_STAR.search(raw)
    if star:
        return unquote(star.group(2), encoding=star.group(1) or "utf-8", errors="replace")
    _, options = parse_options_header(disposition)
    name = options.get(b"filename")
    return None if name is None else name.decode("utf-8", errors="replace")


class _Part:
    def __init__(self, original: str | None, unnamed: bool = False) -> None:
        self.original = original
        self.unnamed = unnamed  # filename="" : what a browser sends for an empty input
        self.head = b""
        self.checked = False
        self.pending: PendingFile | None = None
        self.size = 0


class UploadReceiver:
    """Synchronous state machine fed with body chunks; run it in a worker thread."""

    def __init__(self, directory: Path, boundary: bytes, limits: UploadLimits) -> None:
        self.directory = directory
        self.limits = limits
        self.stored: list[StoredUpload] = []
        self.ended = False
        self.file_count = 0
        self.file_bytes = 0  # of every file part so far (the quota counts them)
        self._part: _Part | None = None
        self._header_field = b""
        self._header_value = b""
        self._headers: dict[bytes, bytes] = {}
        self._header_bytes = 0
        self.parser = MultipartParser(
            boundary,
            {
                "on_part_begin": self._on_part_begin,
                "on_header_field": self._on_header_field,
                "on_header_value": self._on_header_value,
                "on_header_end": self._on_header_end,
                "on_headers_finished": self._on_headers_finished,
                "on_part_data": self._on_part_data,
                "on_part_end": self._on_part_end,
                "on_end": self._on_end,
            },
        )

    # --------------------------------------------------------------- parser events
    def _on_part_begin(self) -> None:
        self._headers = {}
        self._header_field = self._header_value = b""
        self._header_bytes = 0
        self._part = None

    def _count_header(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > MAX_PART_HEADER_BYTES:
            raise BadRequest("multipart body: part headers too large")

    def _on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._count_header(end - start)
        self._header_field += data[start:end]

    def _on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._count_header(end - start)
        self._header_value += data[start:end]

    def _on_header_end(self) -> None:
        self._headers[self._header_field.strip().lower()] = self._header_value.strip()
        self._header_field = self._header_value = b""

    def _on_headers_finished(self) -> None:
        original = _part_filename(self._headers.get(b"content-disposition", b""))
        part = _Part(None if original is None else sanitize_filename(original), original == "")
        self._part = part
        if part.original is None:
            return  # a plain form field: its value is skipped
        self.file_count += 1
        if self.file_count > self.limits.max_files:
            raise Unprocessable(f"files: at most {self.limits.max_files} files per upload")
        ext = executable_extension(part.original)
        if ext:
            raise UnsupportedMedia(
                f"{part.original}: executable files are refused (extension {ext})"
            )

    def _on_part_data(self, data: bytes, start: int, end: int) -> None:
        part = self._part
        if part is None or part.original is None:
            return
        chunk = data[start:end]
        part.size += len(chunk)
        self.file_bytes += len(chunk)
        quota_left = self.limits.quota_left
        if quota_left is not None and self.file_bytes > quota_left:
            raise PayloadTooLarge(self.limits.quota_detail)
        if part.size > self.limits.max_file_bytes:
            raise PayloadTooLarge(
                f"{part.original}: larger than {self.limits.max_file_mb} MB "
                "(SESSION_FILES_MAX_SIZE_MB)"
            )
        if not part.checked:
            part.head += chunk
            if len(part.head) < HEAD_BYTES:
                return
            chunk, part.head = part.head, part.head[:HEAD_BYTES]
            self._check_content(part)
        assert part.pending is not None
        part.pending.write(chunk)

    def _check_content(self, part: _Part) -> None:
        reason = executable_signature(part.head)
        if reason:
            raise UnsupportedMedia(
                f"{part.original}: executable files are refused (content is a {reason})"
            )
        part.checked = True
        part.pending = PendingFile(self.directory)

    def _on_part_end(self) -> None:
        part, self._part = self._part, None
        if part is None or part.original is None:
            return
        if not part.checked:
            if part.size == 0 and part.unnamed:
                self.file_count -= 1
                return
            self._check_content(part)
            assert part.pending is not None
            part.pending.write(part.head)
        assert part.pending is not None
        pending, part.pending = part.pending, None
        name = pending.commit(part.original)
        self.stored.append(StoredUpload(original=part.original, name=name, size=part.size))

    def _on_end(self) -> None:
        self.ended = True

    # --------------------------------------------------------------- driving
    def feed(self, chunk: bytes) -> None:
        try:
            self.parser.write(chunk)
        except FormParserError as exc:
            raise BadRequest(f"multipart body: {exc}") from None

    def finish(self) -> list[StoredUpload]:
        if not self.ended:
            raise BadRequest("multipart body: incomplete (no closing boundary)")
        if not self.stored:
            raise Unprocessable("files: the request holds no file")
        return self.stored

    def abort(self) -> None:
        """Remove the file being written and every file this request stored."""
        part, self._part = self._part, None
        if part is not None and part.pending is not None:
            part.pending.discard()
        for s in self.stored:
            (self.directory / s.name).unlink(missing_ok=True)
        self.stored = []


async def receive(
    chunks: AsyncIterator[bytes], content_type: str, directory: Path, limits: UploadLimits
) -> list[StoredUpload]:
    """Stream a multipart body into `directory`; all files or none are kept."""
    receiver = UploadReceiver(directory, multipart_boundary(content_type), limits)
    total = 0
    try:
        async for chunk in chunks:
            if not chunk:
                continue
            total += len(chunk)
            if total > limits.max_body_bytes:
                raise PayloadTooLarge(
                    f"request body: larger than {limits.max_files} files of "
                    f"{limits.max_file_mb} MB (SESSION_FILES_MAX_SIZE_MB)"
                )
            await anyio.to_thread.run_sync(receiver.feed, chunk)
        return receiver.finish()
    except BaseException:
        receiver.abort()  # quick and synchronous: it must run on cancellation too
        raise
