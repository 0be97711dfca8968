"""Each user's last write position (a WAL LSN), shared by every worker process of one
`navi serve` on this host: read-your-writes whichever worker serves the next read.

A fixed table of `SLOTS` unsigned 64-bit LSNs in a memory-mapped file that the
supervisor creates before it starts the workers (`create_shared`; its path reaches them
in NAVI_WRITE_POSITIONS). A user's slot is a hash of their id; two users that share a
slot share its value, the larger of their positions, so a collision only ever sends a
read to the primary — never to a replica that lacks a write. Nothing else is kept per
user, and the table never grows.

- Written at commit (`note`): `slot = max(slot, lsn)` under a POSIX record lock on the
  slot's 8 bytes, so two processes raising one slot cannot lose the larger value.
- Read at routing (`get`): one aligned 8-byte load, no lock, no database round trip. A
  read racing a write sees the old or the new value, never a torn one; it started before
  the write's response was sent, so either answer is a correct one.

A single process (no NAVI_WRITE_POSITIONS) keeps the same table in private memory.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import mmap
import os
import secrets
import tempfile
import zlib
from pathlib import Path

import structlog

log = structlog.get_logger()

SLOTS = 65_536
SLOT_BYTES = 8
TABLE_BYTES = SLOTS * SLOT_BYTES
ENV = "NAVI_WRITE_POSITIONS"


def slot_of(user_id: str) -> int:
    """The user's slot: CRC-32 of the id (the same in every process, unlike `hash()`,
    and ~10× cheaper than a cryptographic hash; nobody gains by choosing a collision —
    it only sends their own reads to the primary)."""
    return zlib.crc32(user_id.encode()) % SLOTS


class WritePositions:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._fd: int | None = None
        if path is None:
            self._map = mmap.mmap(-1, TABLE_BYTES)
        else:
            self._fd = os.open(path, os.O_RDWR)
            self._map = mmap.mmap(self._fd, TABLE_BYTES)
        self._slots = memoryview(self._map).cast("Q")

    @property
    def shared(self) -> bool:
        return self._fd is not None

    @classmethod
    def from_env(cls) -> WritePositions:
        """The supervisor's table when this process is one of its workers, else a
        private one. A path that cannot be opened is logged and a private table used
        (read-your-writes then holds within this process, as the header always does)."""
        raw = os.environ.get(ENV)
        if not raw:
            return cls()
        try:
            return cls(Path(raw))
        except (OSError, ValueError) as exc:
            log.warning(
                "db.write_positions_unavailable",
                path=raw,
                error=str(exc),
                hint="read-your-writes across workers needs the header (Navi-Min-LSN)",
            )
            return cls()

    def get(self, user_id: str) -> int:
        return int(self._slots[slot_of(user_id)])

    def note(self, user_id: str, lsn: int) -> None:
        i = slot_of(user_id)
        if self._fd is None:
            if self._slots[i] < lsn:
                self._slots[i] = lsn
            return
        offset = i * SLOT_BYTES
        fcntl.lockf(self._fd, fcntl.LOCK_EX, SLOT_BYTES, offset, os.SEEK_SET)
        try:
            if self._slots[i] < lsn:
                self._slots[i] = lsn
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, SLOT_BYTES, offset, os.SEEK_SET)


def _run_dir(data_dir: Path) -> Path:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm  # memory, never written back to a disk
    run = data_dir / "run"
    run.mkdir(parents=True, exist_ok=True)
    return run


def create_shared(data_dir: Path) -> Path:
    """The supervisor's table: a zeroed file of TABLE_BYTES, removed when this process
    exits. Its path is put in NAVI_WRITE_POSITIONS for the workers it starts."""
    directory = _run_dir(data_dir)
    fd, name = tempfile.mkstemp(
        prefix=f"navi-write-positions-{os.getpid()}-{secrets.token_hex(4)}-", dir=directory
    )
    try:
        os.ftruncate(fd, TABLE_BYTES)
    finally:
        os.close(fd)
    path = Path(name)
    atexit.register(_unlink, path)
    os.environ[ENV] = str(path)
    log.info("db.write_positions_created", path=str(path), slots=SLOTS)
    return path


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
