"""The streaming receiver fed in small chunks: headers, heads and bodies split anywhere."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.domain.files.uploads import UploadLimits, receive
from app.lib.errors import BadRequest, PayloadTooLarge, UnsupportedMedia

CT = "multipart/form-data; boundary=XyZ"


def body(*parts: tuple[str | None, bytes]) -> bytes:
    out = b""
    for filename, data in parts:
        disposition = 'form-data; name="files"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        out += f"--XyZ\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + data + b"\r\n"
    return out + b"--XyZ--\r\n"


async def chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


LIMITS = UploadLimits(max_file_bytes=64 * 1024, max_files=5)


@pytest.mark.parametrize("size", [5, 61, 4096, 1 << 20])
async def test_chunk_size_does_not_matter(tmp_path: Path, size: int) -> None:
    big = b"D" + os.urandom(5_999)  # no executable signature by chance
    raw = body(("a.txt", b"hello"), (None, b"a plain field"), ("b.dat", big), ("a.txt", b""))
    stored = await receive(chunks(raw, size), CT, tmp_path, LIMITS)
    assert [(s.original, s.name, s.size) for s in stored] == [
        ("a.txt", "a.txt", 5),
        ("b.dat", "b.dat", 6_000),
        ("a.txt", "a_1.txt", 0),
    ]
    assert (tmp_path / "b.dat").read_bytes() == big
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "a_1.txt", "b.dat"]


@pytest.mark.parametrize("size", [3, 5000])
async def test_executable_head_split_across_chunks(tmp_path: Path, size: int) -> None:
    raw = body(("ok.txt", b"fine"), ("x.dat", b"\x7fELF" + bytes(5_000)))
    with pytest.raises(UnsupportedMedia, match="ELF"):
        await receive(chunks(raw, size), CT, tmp_path, LIMITS)
    assert os.listdir(tmp_path) == []


async def test_limits(tmp_path: Path) -> None:
    raw = body(("big.txt", b"x" * (LIMITS.max_file_bytes + 1)))
    with pytest.raises(PayloadTooLarge, match="big.txt"):
        await receive(chunks(raw, 1000), CT, tmp_path, LIMITS)
    raw = body(*[(f"f{i}.txt", b"1") for i in range(6)])
    with pytest.raises(Exception, match="at most 5 files"):
        await receive(chunks(raw, 1000), CT, tmp_path, LIMITS)
    assert os.listdir(tmp_path) == []


async def test_broken_bodies(tmp_path: Path) -> None:
    with pytest.raises(BadRequest, match="incomplete"):
        await receive(chunks(body(("a.txt", b"x"))[:-12], 10), CT, tmp_path, LIMITS)
    with pytest.raises(BadRequest, match="multipart body"):
        await receive(chunks(b"garbage", 10), CT, tmp_path, LIMITS)
    with pytest.raises(BadRequest, match="boundary"):
        await receive(chunks(b"", 10), "multipart/form-data", tmp_path, LIMITS)
    assert os.listdir(tmp_path) == []
