"""app/lib/disk.py: which errors are a full disk, and what is logged of it."""

from __future__ import annotations

import errno
from pathlib import Path
from types import SimpleNamespace

from structlog.testing import capture_logs

from app.asgi.http import handle_internal
from app.lib.disk import DISK_FULL_DETAIL, disk_full, disk_full_cause, free_bytes


def test_a_full_disk_is_found_through_causes_and_contexts() -> None:
    full = OSError(errno.ENOSPC, "No space left on device")
    assert disk_full_cause(full) is full
    assert disk_full_cause(OSError(errno.EDQUOT, "Disk quota exceeded")) is not None
    assert disk_full_cause(OSError(errno.EACCES, "Permission denied")) is None
    assert disk_full_cause(ValueError("x")) is None
    try:
        try:
            raise full
        except OSError:
            raise RuntimeError("wrapped")  # noqa: B904 - no cause, but its context
    except RuntimeError as exc:
        assert disk_full_cause(exc) is full
    try:
        try:
            raise full
        except OSError:
            raise RuntimeError("replaced") from None
    except RuntimeError as exc:
        assert disk_full_cause(exc) is None  # `from None`: the new error is the story
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = full
    assert disk_full_cause(wrapped) is full


def test_disk_full_logs_the_free_bytes_of_the_nearest_existing_parent(tmp_path: Path) -> None:
    missing = tmp_path / "not" / "yet"
    assert free_bytes(missing) == free_bytes(tmp_path) is not None
    with capture_logs() as logs:
        err = disk_full(missing, OSError(errno.ENOSPC, "No space left on device"), session_id="s")
    assert (err.status_code, err.kind, err.detail) == (
        507,
        "insufficient_storage",
        DISK_FULL_DETAIL,
    )
    [entry] = logs
    assert entry["event"] == "files.disk_full" and entry["log_level"] == "warning"
    assert entry["path"] == str(missing) and isinstance(entry["free_bytes"], int)
    assert entry["session_id"] == "s" and "No space left" in entry["error"]


def test_a_full_disk_that_escaped_its_writer_is_still_a_507() -> None:
    """app/asgi/http.py's last handler: ENOSPC from a writer that did not say so itself."""
    state = SimpleNamespace(get=lambda key, default=None: None)  # before start-up
    request = SimpleNamespace(app=SimpleNamespace(state=state), url=SimpleNamespace(path="/x"))
    wrapped = RuntimeError("while writing")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device", "/data/f.part")
    with capture_logs() as logs:
        response = handle_internal(request, wrapped)  # type: ignore[arg-type]
    assert response.status_code == 507
    assert response.content == {"error": "insufficient_storage", "detail": DISK_FULL_DETAIL}
    assert [(e["event"], e["path"]) for e in logs] == [("files.disk_full", "/data/f.part")]
    with capture_logs():
        other = handle_internal(request, OSError(errno.EACCES, "Permission denied"))  # type: ignore[arg-type]
    assert other.status_code == 500
