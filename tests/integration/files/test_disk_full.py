"""The disk of the session files full (issue 45): a real full file system, a 1 MiB tmpfs
mounted over `{data_dir}/session_files`. Every writer answers 507 `insufficient_storage`
and keeps nothing (no temporary file, no message, no usage); once room is made, the same
requests succeed. Skipped where mounting is not permitted (not root, a container)."""

from __future__ import annotations

import base64
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import Settings
from app.domain.files.quota import directory_bytes
from app.lib.disk import DISK_FULL_DETAIL
from tests.conftest import ADMIN_TOKEN, new_user
from tests.unit.compression.images import png

BALLAST = "ballast.bin"


@pytest.fixture
def full_disk(settings: Settings) -> Iterator[Path]:
    """A 1 MiB tmpfs as the session files folder (the ballast is left to the test)."""
    root = settings.data_path / "session_files"
    root.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(root)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs for a full disk: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for a full disk: {done.stderr.strip()}")
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False, timeout=30)


def fill(root: Path) -> None:
    """Write the ballast until the file system says it is full."""
    with open(root / BALLAST, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    # what a full disk still takes: the last few bytes of a block
    with open(root / BALLAST, "ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass


def files_under(root: Path) -> list[str]:
    return sorted(str(Path(d, n).relative_to(root)) for d, _, names in os.walk(root) for n in names)


async def test_a_full_disk_answers_507_and_keeps_nothing(  # type: ignore[no-untyped-def]
    make_client, settings: Settings, full_disk: Path, tmp_path: Path, capsys
) -> None:
    shared = tmp_path / "share"
    shared.mkdir()
    (shared / "notes.txt").write_bytes(b"n" * 50_000)
    payload = b"hello, disk " * 4000  # 48 KB: more than a full tmpfs takes
    image, small = png(64, 64), png(8, 8)
    async with make_client(
        settings, files_max_bytes_per_user=10_000_000, share_file_roots=str(shared)
    ) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        r = await client.post("/sessions", json={"profile_id": "default"})
        sid = r.json()["id"]
        upload = [("files", ("a.txt", payload, "text/plain"))]
        picture = {"role": "user", "content": "look", "images": [base64.b64encode(image).decode()]}
        # two messages with images: all of them stored or none
        pictures = [picture, {**picture, "images": [base64.b64encode(small).decode()]}]
        fill(full_disk)

        r = await client.post(f"/sessions/{sid}/files", files=upload)
        assert r.status_code == 507, r.text
        assert r.json() == {"error": "insufficient_storage", "detail": DISK_FULL_DETAIL}
        logs = capsys.readouterr()
        assert "files.disk_full" in logs.out + logs.err and "free_bytes" in logs.out + logs.err

        r = await client.post(
            f"/sessions/{sid}/share_file", json={"path": str(shared / "notes.txt")}
        )
        assert r.status_code == 507, r.text
        # a pasted image: the append is refused before the message is stored
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": pictures})
        assert r.status_code == 507, r.text
        assert r.json()["error"] == "insufficient_storage"
        turn = {"message": {"content": "look", "images": picture["images"]}}
        r = await client.post(f"/sessions/{sid}/turns", json=turn)
        assert r.status_code == 507, r.text  # refused before the model or the message

        assert files_under(full_disk) == [BALLAST]  # no temporary part, no image
        assert directory_bytes(full_disk / sid) == 0  # the quota's usage: unchanged
        assert (await client.get(f"/sessions/{sid}/files")).json()["total"] == 0
        assert (await client.get(f"/sessions/{sid}/messages")).json()["messages"] == []

        (full_disk / BALLAST).unlink()  # room again: the same requests succeed
        r = await client.post(f"/sessions/{sid}/files", files=upload)
        assert r.status_code == 201, r.text
        r = await client.get(f"/sessions/{sid}/files/a.txt")
        assert r.status_code == 200 and r.content == payload
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": pictures})
        assert r.status_code == 201, r.text
        assert (full_disk / sid / "image_1.png").read_bytes() == image
        assert (full_disk / sid / "image_2.png").read_bytes() == small
        r = await client.post(
            f"/sessions/{sid}/share_file", json={"path": str(shared / "notes.txt")}
        )
        assert r.status_code == 201, r.text
        assert sorted(n for n in os.listdir(full_disk / sid) if not n.startswith(".")) == [
            "a.txt",
            "image_1.png",
            "image_2.png",
            "notes.txt",
        ]


async def test_an_import_with_files_on_a_full_disk_is_refused_whole(  # type: ignore[no-untyped-def]
    make_client, settings: Settings, full_disk: Path
) -> None:
    """`POST /me/import` stages its files on the session files' file system: a full disk
    refuses it before the commit (507), no session of it is kept, no staging left."""
    payload = b"x" * 48_000
    async with make_client(settings) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        _, alice = await new_user(client, "alice")
        _, bob = await new_user(client, "bob")
        r = await client.post("/sessions", json={"profile_id": "default"}, headers=alice)
        sid = r.json()["id"]
        r = await client.post(
            f"/sessions/{sid}/files",
            files=[("files", ("a.txt", payload, "text/plain"))],
            headers=alice,
        )
        assert r.status_code == 201, r.text
        body = (await client.get("/me/export", headers=alice)).content
        assert (await client.delete(f"/sessions/{sid}", headers=alice)).status_code == 204
        fill(full_disk)

        r = await client.post("/me/import", content=body, headers=bob)
        assert r.status_code == 507, r.text
        assert r.json()["error"] == "insufficient_storage"
        assert (await client.get("/sessions", headers=bob)).json()["total"] == 0
        assert files_under(full_disk) == [BALLAST]

        (full_disk / BALLAST).unlink()
        r = await client.post("/me/import", content=body, headers=bob)
        assert r.status_code == 201, r.text
        r = await client.get(f"/sessions/{sid}/files/a.txt", headers=bob)
        assert r.status_code == 200 and r.content == payload
