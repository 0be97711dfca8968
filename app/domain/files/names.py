"""File names of the session directory: sanitising client names, de-duplicating.

Pure functions. A stored name is one path component: no separators, no `..`, no leading
dot (so it never collides with our own dot-files: upload temp files, the image index),
no control or format characters (U+202E could make `exe.txt` read as `txt.exe`), NFC,
at most 200 UTF-8 bytes with the extension kept.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "MAX_NAME_BYTES",
    "is_stored_name",
    "numbered",
    "sanitize_filename",
    "split_extension",
]

MAX_NAME_BYTES = 200
MAX_EXTENSION_BYTES = 16
FALLBACK_NAME = "file"
# Awkward on other systems and in the shell lines the agent is handed.
_RESERVED = re.compile(r'[<>:"|?*]')
_SPACES = re.compile(r"\s+")


def split_extension(name: str) -> tuple[str, str]:
    """(stem, ".ext"); the extension is the last suffix when it is short and not the
    whole name (".bashrc" has none)."""
    dot = name.rfind(".")
    if dot <= 0 or dot == len(name) - 1:
        return name, ""
    ext = name[dot:]
    if len(ext.encode()) > MAX_EXTENSION_BYTES or any(c.isspace() for c in ext):
        return name, ""
    return name[:dot], ext


def _truncate_utf8(text: str, max_bytes: int) -> str:
    raw = text.encode()
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", errors="ignore")


def _limit(name: str, max_bytes: int) -> str:
    if len(name.encode()) <= max_bytes:
        return name
    stem, ext = split_extension(name)
    stem = _truncate_utf8(stem, max(1, max_bytes - len(ext.encode()))).rstrip(" .")
    return (stem or FALLBACK_NAME) + ext


def sanitize_filename(raw: str | None, max_bytes: int = MAX_NAME_BYTES) -> str:
    """A safe single-component name for a client-supplied file name ("" → "file").

    A path keeps only its last component (browsers used to send `C:\\dir\\a.txt`).
    """
    name = unicodedata.normalize("NFC", raw or "")
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(
        " " if c in "\t\n\r" else c
        for c in name
        if c in "\t\n\r" or unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Co", "Cn")
    )
    name = _RESERVED.sub("_", name)
    name = _SPACES.sub(" ", name).strip()
    # Leading dots would hide the file (or be "..");
    # trailing dots/spaces are dropped by Windows, turning "a.exe." into "a.exe".
    name = name.lstrip(".").strip().rstrip(". ")
    name = _limit(name, max_bytes)
    return name or FALLBACK_NAME


def is_stored_name(name: str) -> bool:
    """True when `name` is exactly what sanitising produces: the only names a download
    or publish request may ask for (anything else cannot exist in the directory)."""
    return bool(name) and sanitize_filename(name) == name


def numbered(name: str, n: int, max_bytes: int = MAX_NAME_BYTES) -> str:
    """The n-th duplicate of `name`: `a.txt` → `a_1.txt`, `a_2.txt` … (n ≥ 1)."""
    if n <= 0:
        return name
    stem, ext = split_extension(name)
    suffix = f"_{n}"
    stem = _truncate_utf8(stem, max_bytes - len(ext.encode()) - len(suffix)).rstrip(" .")
    return f"{stem or FALLBACK_NAME}{suffix}{ext}"
