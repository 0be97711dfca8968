"""The soak's full-disk fault (bench/soak.py): a small tmpfs mounted over the service's
session files folder before the service starts, filled with a ballast file for the
fault's hold, then emptied again.

Mounting needs root (or CAP_SYS_ADMIN); where it is refused the fault is left out of
the run and the reason printed. The ledger (bench/_soak_load.py) is told when the disk
was full: a 507 `insufficient_storage` answered then is the contract, one answered at
any other time a violation.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import time
from pathlib import Path
from typing import Any

#: the tmpfs: room for a long run's small uploads (a file takes at least a 4 KiB page)
DISK_MB = 16
BALLAST = ".soak-ballast"  # a dot-name: never listed, never served
PIECE = 1024 * 1024


def mount_tmpfs(root: Path, size_mb: int = DISK_MB) -> str:
    """Mount a tmpfs of `size_mb` MiB at `root` (created): "" when mounted, else why not."""
    root.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(root)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"mount failed: {exc}"
    if done.returncode != 0:
        return f"mount failed: {done.stderr.strip() or done.returncode}"
    return ""


def unmount(root: Path) -> None:
    subprocess.run(["umount", "-l", str(root)], check=False, timeout=30, capture_output=True)


def fill(root: Path) -> int:
    """Write the ballast until the file system is full; its bytes."""
    size = 0
    with open(root / BALLAST, "wb", buffering=0) as f:
        for piece in (PIECE, 4096, 64):
            while True:
                try:
                    size += f.write(b"\0" * piece)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    return size


def leftovers(root: Path) -> list[str]:
    """Temporary files left in the session files (a write a full disk cut short must
    remove its own): their paths."""
    temps = (".upload-", ".images-")
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob(".*")
        if p.is_file() and p.name.startswith(temps)
    )


def free_bytes(root: Path) -> int:
    st = os.statvfs(root)
    return st.f_bavail * st.f_frsize


async def disk_full(root: Path, ledger: Any, hold: float) -> str:
    """The fault: the session files' disk full for `hold` seconds; its detail."""
    start = ledger.now()
    ledger.full_windows.append((start, float("inf")))
    try:
        size = await asyncio.to_thread(fill, root)
        left = await asyncio.to_thread(free_bytes, root)
        await asyncio.sleep(max(0.0, hold - (ledger.now() - start)))
    finally:
        (root / BALLAST).unlink(missing_ok=True)
        ledger.full_windows[-1] = (start, ledger.now())
    return f"ballast {size / 1e6:.1f} MB, {left} bytes left; removed at {time.strftime('%X')}"
