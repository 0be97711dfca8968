"""Per-image token pricing from the image header alone.

Only a few header bytes are parsed (no decoding, no third-party library).
The cost model follows a 32-px patch grid measured against qwen-style vision
encoders: the image is first downscaled (aspect preserved) to fit into
2048×2048, then costs ``ceil(w/32) × ceil(h/32)`` patches plus 2 framing
tokens. The patch count never exceeds 4096 (the 2048² grid) and the total is
never below 256 (tiny images are upscaled by the encoder).
"""

from __future__ import annotations

import math
import struct

__all__ = [
    "DEFAULT_IMAGE_TOKENS",
    "MAX_IMAGE_SIDE",
    "MAX_IMAGE_PATCHES",
    "MIN_IMAGE_TOKENS",
    "PATCH_SIZE",
    "image_dimensions",
    "image_extension",
    "image_tokens",
]

PATCH_SIZE = 32
MAX_IMAGE_SIDE = 2048
MAX_IMAGE_PATCHES = 4096
MIN_IMAGE_TOKENS = 256
FRAME_TOKENS = 2
DEFAULT_IMAGE_TOKENS = 1024

_PNG_SIG = b"\x89PNG\r\n\x1a\n"
# SOF0..SOF15 minus DHT (C4), JPG extension (C8) and DAC (CC).
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers that stand alone (no length field): TEM, RST0..7, SOI.
_JPEG_STANDALONE = frozenset({0x01, 0xD8, *range(0xD0, 0xD8)})


def image_extension(data: bytes) -> str | None:
    """File extension for ``data`` judged by its signature, or None."""
    if data.startswith(_PNG_SIG):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def _png_dimensions(data: bytes) -> tuple[int, int] | None:
    pos = len(_PNG_SIG)
    # IHDR must be the first chunk; Apple's CgBI variant puts one chunk before it.
    for _ in range(2):
        if len(data) < pos + 8:
            return None
        length, ctype = struct.unpack(">I4s", data[pos : pos + 8])
        if ctype == b"IHDR":
            if len(data) < pos + 16:
                return None
            width, height = struct.unpack(">II", data[pos + 8 : pos + 16])
            return int(width), int(height)
        pos += 12 + int(length)
    return None


def _gif_dimensions(data: bytes) -> tuple[int, int] | None:
    if len(data) < 10:
        return None
    width, height = struct.unpack("<HH", data[6:10])
    return int(width), int(height)


def _jpeg_dimensions(data: bytes) -> tuple[int, int] | None:
    pos = 2
    size = len(data)
    while pos < size:
        if data[pos] != 0xFF:
            return None  # not at a marker: corrupt stream
        while pos < size and data[pos] == 0xFF:  # fill bytes
            pos += 1
        if pos >= size:
            return None
        marker = data[pos]
        pos += 1
        if marker in _JPEG_STANDALONE:
            continue
        if marker in (0xD9, 0xDA):  # EOI / start of scan before any frame header
            return None
        if pos + 2 > size:
            return None
        (seg_len,) = struct.unpack(">H", data[pos : pos + 2])
        if seg_len < 2:
            return None
        if marker in _JPEG_SOF:
            if pos + 7 > size:
                return None
            height, width = struct.unpack(">HH", data[pos + 3 : pos + 7])
            return int(width), int(height)
        pos += seg_len
    return None


def _webp_dimensions(data: bytes) -> tuple[int, int] | None:
    if len(data) < 30:
        return None
    fourcc = data[12:16]
    if fourcc == b"VP8 ":
        if data[23:26] != b"\x9d\x01\x2a":
            return None
        width, height = struct.unpack("<HH", data[26:30])
        return int(width) & 0x3FFF, int(height) & 0x3FFF
    if fourcc == b"VP8L":
        if data[20] != 0x2F:
            return None
        (bits,) = struct.unpack("<I", data[21:25])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if fourcc == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    return None


def image_dimensions(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` read from a PNG, JPEG, GIF or WebP header, else None."""
    if not data:
        return None
    kind = image_extension(data)
    if kind == "png":
        dims = _png_dimensions(data)
    elif kind == "jpg":
        dims = _jpeg_dimensions(data)
    elif kind == "gif":
        dims = _gif_dimensions(data)
    elif kind == "webp":
        dims = _webp_dimensions(data)
    else:
        return None
    if dims is None or dims[0] <= 0 or dims[1] <= 0:
        return None
    return dims


def tokens_for_dimensions(width: int, height: int) -> int:
    """Token cost of an image of ``width × height`` pixels."""
    longest = max(width, height)
    if longest > MAX_IMAGE_SIDE:
        scale = MAX_IMAGE_SIDE / longest
        width = max(1, min(MAX_IMAGE_SIDE, round(width * scale)))
        height = max(1, min(MAX_IMAGE_SIDE, round(height * scale)))
    patches = math.ceil(width / PATCH_SIZE) * math.ceil(height / PATCH_SIZE)
    patches = min(patches, MAX_IMAGE_PATCHES)
    return max(MIN_IMAGE_TOKENS, patches + FRAME_TOKENS)


def image_tokens(data: bytes, fallback: int = DEFAULT_IMAGE_TOKENS) -> int:
    """Token cost of one image; ``fallback`` when its header cannot be read."""
    dims = image_dimensions(data)
    if dims is None:
        return fallback
    return tokens_for_dimensions(*dims)
