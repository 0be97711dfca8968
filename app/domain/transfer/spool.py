"""An import's request body, spooled to a temporary file before any database work.

The import runs at the server's pace, from disk: a client that uploads slowly (or
trickles a byte now and then) holds a socket and a temporary file, never a pooled
connection or an open transaction. The body is bounded in size (`IMPORT_MAX_MB`, 413),
in silence between two pieces (`IMPORT_IDLE_SECONDS`, 408) and in total time
(`IMPORT_BODY_SECONDS`, 408).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import AsyncIterable, AsyncIterator
from typing import IO

import anyio
import anyio.to_thread

from app.config import Settings
from app.domain.kernel.session_files import import_staging_root
from app.lib.disk import disk_full, disk_full_cause
from app.lib.errors import PayloadTooLarge, RequestTimeout

#: Bytes gathered before a write to the file, and read back per piece.
SPOOL_BYTES = 1024 * 1024


def temp_file(settings: Settings) -> IO[bytes]:
    root = import_staging_root(settings)
    root.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryFile(dir=root)  # no name: gone with the process


async def spool_body(
    chunks: AsyncIterable[bytes],
    settings: Settings,
    *,
    max_mb: int | None = None,
    setting: str = "IMPORT_MAX_MB",
) -> IO[bytes]:
    """The body in a temporary file (rewound), or 413/408 (past `max_mb`, by default
    IMPORT_MAX_MB; `setting` names it). The caller closes it."""
    limit = (settings.import_max_mb if max_mb is None else max_mb) * 1024 * 1024
    idle, whole = settings.import_idle_seconds, settings.import_body_seconds
    deadline = time.monotonic() + whole
    f = await anyio.to_thread.run_sync(temp_file, settings)
    try:
        pending = bytearray()
        total = 0
        pieces = aiter(chunks)
        while True:
            left = deadline - time.monotonic()
            with anyio.move_on_after(min(idle, max(0.0, left))) as scope:
                chunk = await anext(pieces, None)
            if scope.cancelled_caught:
                if left <= idle:
                    raise RequestTimeout(
                        f"body: not received within {whole:g} s (IMPORT_BODY_SECONDS)"
                    )
                raise RequestTimeout(f"body: no bytes for {idle:g} s (IMPORT_IDLE_SECONDS)")
            if chunk is None:
                break
            total += len(chunk)
            if total > limit:
                raise PayloadTooLarge(f"body: more than {limit} bytes ({setting})")
            pending += chunk
            if len(pending) >= SPOOL_BYTES:
                await anyio.to_thread.run_sync(f.write, bytes(pending))
                pending.clear()
        await anyio.to_thread.run_sync(f.write, bytes(pending))
        await anyio.to_thread.run_sync(f.seek, 0)
    except OSError as exc:
        f.close()  # a temporary file without a name: closing it removes it
        full = disk_full_cause(exc)
        if full is None:
            raise
        raise disk_full(import_staging_root(settings), full) from None
    except BaseException:
        f.close()
        raise
    return f


async def file_chunks(f: IO[bytes]) -> AsyncIterator[bytes]:
    """The file's bytes, a piece at a time, from a worker thread."""
    while data := await anyio.to_thread.run_sync(f.read, SPOOL_BYTES):
        yield data
