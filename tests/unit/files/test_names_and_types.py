from __future__ import annotations

import struct
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.files.content_types import detect_content_type, is_mpeg_ts
from app.domain.files.executables import executable_extension, executable_signature
from app.domain.files.names import (
    MAX_NAME_BYTES,
    is_stored_name,
    numbered,
    sanitize_filename,
)
from tests.unit.compression.images import gif, jpeg, png


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("/etc/shadow", "shadow"),
        ("C:\\Users\\me\\notes.txt", "notes.txt"),
        ("..", "file"),
        (".", "file"),
        ("", "file"),
        (None, "file"),
        ("   ", "file"),
        (".bashrc", "bashrc"),
        ("a\x00b\x1fc.txt", "abc.txt"),
        ("line\nbreak.txt", "line break.txt"),
        ("evil\u202etxt.exe", "eviltxt.exe"),  # right-to-left override removed
        ("a.exe. . ", "a.exe"),
        ('what?<>:"|*.txt', "what_______.txt"),
        ("cafe\u0301.txt", "caf\u00e9.txt"),  # NFC
        ("dir/", "file"),
    ],
)
def test_sanitize_filename(raw: str | None, expected: str) -> None:
    assert sanitize_filename(raw) == expected


def test_long_names_keep_their_extension_within_200_bytes() -> None:
    name = sanitize_filename("я" * 300 + ".tar.gz")
    assert name.endswith(".gz") and len(name.encode()) <= MAX_NAME_BYTES
    assert name.startswith("я")
    ascii_name = sanitize_filename("x" * 500 + ".md")
    assert ascii_name == "x" * (MAX_NAME_BYTES - 3) + ".md"


@given(st.text(max_size=400))
def test_sanitized_names_are_safe_and_stable(raw: str) -> None:
    name = sanitize_filename(raw)
    assert name and "/" not in name and "\\" not in name and "\x00" not in name
    assert not name.startswith(".")
    assert len(name.encode()) <= MAX_NAME_BYTES
    assert unicodedata.normalize("NFC", name) == name
    assert sanitize_filename(name) == name and is_stored_name(name)


def test_stored_name_rejects_anything_sanitising_would_change() -> None:
    for bad in ("../a.txt", "a/b", ".images.json", ".upload-x.part", "..", "", " a"):
        assert not is_stored_name(bad), bad
    assert is_stored_name("a (1).txt") and is_stored_name("image_1.png")


def test_numbered_duplicates() -> None:
    assert numbered("a.txt", 0) == "a.txt"
    assert numbered("a.txt", 1) == "a_1.txt"
    assert numbered("archive.tar.gz", 2) == "archive.tar_2.gz"
    assert numbered("README", 3) == "README_3"
    long = "y" * 196 + ".txt"
    assert len(numbered(long, 12).encode()) <= MAX_NAME_BYTES
    assert numbered(long, 12).endswith("_12.txt")


@pytest.mark.parametrize(
    "name", ["run.sh", "x.PY", "setup.exe", "lib.so", "a.dylib", "b.bat", "c.ps1", "d.jar"]
)
def test_executable_extensions(name: str) -> None:
    assert executable_extension(name)


@pytest.mark.parametrize("name", ["notes.txt", "app.js", "main.ts", "a.pdf", "Makefile", "sh"])
def test_not_executable_extensions(name: str) -> None:
    assert executable_extension(name) is None


def _pe() -> bytes:
    head = bytearray(b"MZ" + b"\x90\x00\x03\x00" + bytes(58))
    struct.pack_into("<I", head, 0x3C, 0x80)
    return bytes(head) + bytes(0x80 - len(head)) + b"PE\x00\x00" + bytes(64)


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"\x7fELF\x02\x01\x01" + bytes(20), "ELF"),
        (_pe(), "MZ"),
        (b"MZ\x90\x00\x03\x00\x00\x00" + bytes(56), "MZ"),  # DOS stub without PE
        (b"\xcf\xfa\xed\xfe" + bytes(28), "Mach-O"),
        (b"\xfe\xed\xfa\xce" + bytes(28), "Mach-O"),
        (b"\xca\xfe\xba\xbe" + bytes(28), "universal"),
        (b"#!/bin/sh\necho hi\n", "#!"),
        (b"#!/usr/bin/env python3\n", "#!"),
    ],
)
def test_executable_signatures(head: bytes, kind: str) -> None:
    reason = executable_signature(head)
    assert reason and kind in reason


@pytest.mark.parametrize(
    "head",
    [b"hello", b"MZ,Mozambique\nZA,South Africa\n" * 4, b"# comment\n", png(1, 1), b""],
)
def test_not_executable_signatures(head: bytes) -> None:
    assert executable_signature(head) is None


def _ts(packets: int) -> bytes:
    return b"".join(b"\x47" + bytes(187) for _ in range(packets))


@pytest.mark.parametrize(
    ("name", "head", "media", "kind"),
    [
        ("photo.txt", png(4, 4), "image/png", "image"),  # signature beats the name
        ("x.html", jpeg(2, 2), "image/jpeg", "image"),
        ("a.gif", gif(1, 1), "image/gif", "image"),
        ("main.ts", b"export const x: number = 1;\n", "text/plain", "text"),
        ("clip.ts", _ts(8), "video/mp2t", "video"),
        ("doc.pdf", b"%PDF-1.7\n", "application/pdf", "pdf"),
        ("renamed", b"%PDF-1.4\n", "application/pdf", "pdf"),
        ("part.stl", b"solid cube\nfacet normal 0 0 1\n", "model/stl", "model"),
        ("part.stl", bytes(84), "model/stl", "model"),
        ("scene.gltf", b'{"asset": {"version": "2.0"}}', "model/gltf+json", "model"),
        ("scene.bin", b"glTF\x02\x00\x00\x00", "model/gltf-binary", "model"),
        ("page.html", b"<html><script>alert(1)</script>", "text/html", "html"),
        ("icon.svg", b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml", "svg"),
        ("song.mp3", b"ID3\x04\x00", "audio/mpeg", "audio"),
        ("a.wav", b"RIFF\x00\x00\x00\x00WAVEfmt ", "audio/wav", "audio"),
        ("m.mp4", b"\x00\x00\x00\x18ftypisom", "video/mp4", "video"),
        ("v.webm", b"\x1a\x45\xdf\xa3\x9fB\x86\x81\x01webm", "video/webm", "video"),
        ("data.xml", b"<?xml version='1.0'?><a/>", "text/plain", "text"),
        ("app.js", b"alert(1)", "text/plain", "text"),
        ("noext", b"plain words\n", "text/plain", "text"),
        ("blob", b"\x00\x01\x02\xff", "application/octet-stream", "binary"),
        ("data.json", b"{}", "application/json", "text"),
    ],
)
def test_detect_content_type(name: str, head: bytes, media: str, kind: str) -> None:
    ct = detect_content_type(name, head)
    assert (ct.media_type, ct.kind) == (media, kind)


def test_active_types_and_mpeg_ts() -> None:
    assert detect_content_type("a.html", b"<p>").active
    assert detect_content_type("a.svg", b"<svg/>").active
    assert not detect_content_type("a.txt", b"<svg/>").active
    assert is_mpeg_ts(_ts(3))
    assert not is_mpeg_ts(_ts(1))  # one packet proves nothing
    assert not is_mpeg_ts(b"G" + bytes(187) + b"x" + bytes(187))
    assert detect_content_type("a.txt", "Grüße".encode()[:4]).kind == "text"  # cut UTF-8
