"""Lines of an NDJSON body read piece by piece, with a limit on the whole and on a line."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

from app.lib.errors import PayloadTooLarge

#: A line holds one row: a message of MESSAGE_MAX_CHARS escaped, or a file part.
MAX_LINE_BYTES = 64 * 1024 * 1024


async def ndjson_lines(
    chunks: AsyncIterable[bytes],
    max_bytes: int,
    setting: str = "IMPORT_MAX_MB",
    max_line: int = MAX_LINE_BYTES,
) -> AsyncIterator[bytes]:
    """Each line of the body (without its `\\n` or `\\r\\n`), empty lines included so the
    caller's line numbers are the file's. 413 past `max_bytes` in all or `max_line` in
    one line; memory holds one line and one chunk."""
    total = 0
    buffer = bytearray()
    async for chunk in chunks:
        total += len(chunk)
        if total > max_bytes:
            raise PayloadTooLarge(f"body: more than {max_bytes} bytes ({setting})")
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            yield bytes(buffer[start:end]).rstrip(b"\r")
            start = end + 1
        del buffer[:start]
        if len(buffer) > max_line:
            raise PayloadTooLarge(f"body: a line longer than {max_line} bytes")
    if buffer:
        yield bytes(buffer).rstrip(b"\r")
