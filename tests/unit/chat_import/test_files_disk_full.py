"""A chat import's attachment on a full disk (issue 45): listed as missing with the
reason, nothing left in the session directory, the quota left untouched."""

from __future__ import annotations

import errno
import uuid
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from app.config import Settings
from app.domain.chat_import.files import DISK_FULL_REASON, FileStore
from app.domain.chat_import.formats import Attachment
from app.domain.files.storage import PendingFile


async def test_an_attachment_the_full_disk_cannot_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: PendingFile, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(PendingFile, "write", full)
    settings = Settings(data_dir=str(tmp_path))
    store = FileStore(settings, reader=Any, quota_left=1000)  # type: ignore[arg-type]
    sid = uuid.uuid4()
    with capture_logs() as logs:
        reason = await store.store(sid, Attachment(name="notes.txt", data=b"extracted text"))
    assert reason == DISK_FULL_REASON
    assert [e["event"] for e in logs] == ["files.disk_full"]
    assert list((tmp_path / "session_files" / str(sid)).iterdir()) == []  # no temp file
    assert store.left == 1000
