"""The uploaded export on disk: a raw body as it is, a multipart form's file part taken out.

The body is spooled first (`transfer.spool.spool_body`: size, idle and total-time limits,
no connection held); a `multipart/form-data` body is then streamed through the multipart
parser into a second temporary file holding only its first file part (the console's
form, `curl -F file=@export.zip`).
"""

from __future__ import annotations

from typing import IO

import anyio.to_thread
from python_multipart import MultipartParser
from python_multipart.exceptions import FormParserError

from app.config import Settings
from app.domain.files.uploads import multipart_boundary
from app.domain.transfer.spool import SPOOL_BYTES, spool_body, temp_file
from app.lib.errors import BadRequest, PayloadTooLarge, Unprocessable

MB = 1024 * 1024
MULTIPART_OVERHEAD = 64 * 1024


class _FirstFilePart:
    """Multipart callbacks writing the first part that has a file name to `out`."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.field = b""
        self.disposition = b""
        self.in_file = False
        self.done = False

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        if self.field.lower() == b"content-disposition":
            self.disposition += data[start:end]

    def on_header_end(self) -> None:
        self.field = b""

    def on_headers_finished(self) -> None:
        self.in_file = not self.done and b"filename" in self.disposition

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self.in_file:
            self.out.write(data[start:end])

    def on_part_end(self) -> None:
        self.done = self.done or self.in_file
        self.in_file, self.disposition = False, b""


def _file_part(body: IO[bytes], boundary: bytes, out: IO[bytes]) -> None:
    part = _FirstFilePart(out)
    names = ("on_header_field", "on_header_value", "on_header_end", "on_headers_finished")
    callbacks = {n: getattr(part, n) for n in (*names, "on_part_data", "on_part_end")}
    parser = MultipartParser(boundary, callbacks)  # type: ignore[arg-type]
    try:
        while piece := body.read(SPOOL_BYTES):
            parser.write(piece)
        parser.finalize()
    except FormParserError as exc:
        raise BadRequest(f"body: malformed multipart form ({exc})") from None
    if not part.done:
        raise Unprocessable("body: the multipart form has no file part (send it as `file`)")
    out.seek(0)


async def spool_export(
    chunks: object, content_type: str, content_length: int | None, settings: Settings
) -> IO[bytes]:
    """The uploaded export in a temporary file (rewound); 413 past CHAT_IMPORT_MAX_MB.
    The caller closes it."""
    limit = settings.chat_import_max_mb * MB
    multipart = content_type.lower().startswith("multipart/form-data")
    allowed = limit + (MULTIPART_OVERHEAD if multipart else 0)
    if content_length is not None and content_length > allowed:
        raise PayloadTooLarge(f"body: more than {limit} bytes (CHAT_IMPORT_MAX_MB)")
    body = await spool_body(
        chunks,  # type: ignore[arg-type]
        settings,
        max_mb=settings.chat_import_max_mb + (1 if multipart else 0),
        setting="CHAT_IMPORT_MAX_MB",
    )
    if not multipart:
        return body
    try:
        boundary = multipart_boundary(content_type)
        out = await anyio.to_thread.run_sync(temp_file, settings)
        try:
            await anyio.to_thread.run_sync(_file_part, body, boundary, out)
        except BaseException:
            out.close()
            raise
    finally:
        body.close()
    return out
