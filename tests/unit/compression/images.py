"""Builders of minimal but structurally valid image headers for the tests."""

from __future__ import annotations

import struct
import zlib


def png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr
    crc = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr) & 0xFFFFFFFF)
    iend = struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND") & 0xFFFFFFFF)
    return b"\x89PNG\r\n\x1a\n" + chunk + crc + iend


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00" + b";"


def _segment(marker: int, payload: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


def jpeg(width: int, height: int, *, sof: int = 0xC0, decoy: bool = True) -> bytes:
    """SOI, APP0 (JFIF), a DHT, optionally a comment holding a fake SOF, then SOFn."""
    app0 = _segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
    dht = _segment(0xC4, b"\x00" + bytes(16) + b"\x00")
    parts = [b"\xff\xd8", app0, dht]
    if decoy:
        # A comment whose payload looks like an SOF0 marker for 1×1: a parser that
        # scans bytes instead of walking segments would pick it up.
        parts.append(_segment(0xFE, b"\xff\xc0\x00\x11\x08\x00\x01\x00\x01"))
    sof_payload = struct.pack(">BHHB", 8, height, width, 3) + b"\x01\x22\x00" * 3
    parts.append(_segment(sof, sof_payload))
    parts.append(b"\xff\xd9")
    return b"".join(parts)


def _riff(chunk_type: bytes, payload: bytes) -> bytes:
    chunk = chunk_type + struct.pack("<I", len(payload)) + payload
    if len(payload) % 2:
        chunk += b"\x00"
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def webp_vp8(width: int, height: int) -> bytes:
    frame_tag = b"\x30\x01\x00"
    payload = frame_tag + b"\x9d\x01\x2a" + struct.pack("<HH", width, height) + bytes(10)
    return _riff(b"VP8 ", payload)


def webp_vp8l(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14) | (1 << 28)  # alpha hint, version 0
    return _riff(b"VP8L", b"\x2f" + struct.pack("<I", bits) + bytes(5))


def webp_vp8x(width: int, height: int) -> bytes:
    payload = b"\x10\x00\x00\x00" + (width - 1).to_bytes(3, "little")
    payload += (height - 1).to_bytes(3, "little")
    return _riff(b"VP8X", payload)
