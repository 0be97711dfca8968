"""Executable files are refused on upload: by extension, and by the first bytes.

Pure functions. The extension list is the one in docs/api.md ("Session files"). `.js`
and other source files an interpreter must be asked to run (`.rb`, `.pl`, `.php`, `.ts`)
are accepted: they are ordinary attachments of a coding conversation, and downloads
serve them as `text/plain` with `nosniff`, so they never run on our origin. `.py` and
shell scripts are refused as the spec says: they are what the agent's own tools execute.
"""

from __future__ import annotations

import struct

__all__ = ["EXECUTABLE_EXTENSIONS", "HEAD_BYTES", "executable_extension", "executable_signature"]

# Bytes of a file's head read before its type is judged.
HEAD_BYTES = 4096

EXECUTABLE_EXTENSIONS: frozenset[str] = frozenset(
    {
        # shell scripts
        ".sh", ".bash", ".zsh", ".ksh", ".csh", ".tcsh", ".fish", ".command",
        # Python
        ".py", ".pyw", ".pyc", ".pyo", ".pyz", ".pyzw",
        # Windows executables and scripts
        ".exe", ".dll", ".sys", ".drv", ".ocx", ".cpl", ".scr", ".pif", ".com",
        ".bat", ".cmd", ".ps1", ".psm1", ".psd1", ".vbs", ".vbe", ".jse", ".wsf", ".wsh",
        ".hta", ".msi", ".msp", ".msix", ".appx", ".lnk", ".reg",
        # Unix and macOS binaries, installers, bundles
        ".so", ".dylib", ".bin", ".run", ".elf", ".out", ".appimage", ".app", ".pkg",
        # Java and Android
        ".jar", ".class", ".apk",
    }
)  # fmt: skip

_ELF = b"\x7fELF"
_MACHO = {
    b"\xfe\xed\xfa\xce": "Mach-O executable (32-bit)",
    b"\xce\xfa\xed\xfe": "Mach-O executable (32-bit)",
    b"\xfe\xed\xfa\xcf": "Mach-O executable (64-bit)",
    b"\xcf\xfa\xed\xfe": "Mach-O executable (64-bit)",
    # CAFEBABE is also the magic of a Java class file: refused either way.
    b"\xca\xfe\xba\xbe": "Mach-O universal (fat) binary or Java class file",
    b"\xca\xfe\xba\xbf": "Mach-O universal (fat, 64-bit) binary",
    b"\xbe\xba\xfe\xca": "Mach-O universal (fat) binary",
    b"\xbf\xba\xfe\xca": "Mach-O universal (fat, 64-bit) binary",
}
_TEXT_CONTROL = frozenset(range(0x20)) - {0x09, 0x0A, 0x0C, 0x0D}


def executable_extension(name: str) -> str | None:
    """The refused extension of `name` (lower case), or None."""
    dot = name.rfind(".")
    if dot < 0:
        return None
    ext = name[dot:].lower()
    return ext if ext in EXECUTABLE_EXTENSIONS else None


def _is_dos_executable(head: bytes) -> bool:
    """`MZ` starts every DOS/Windows executable, and also some text ("MZ,Mozambique").
    A real header is 64 binary bytes; a PE image has `PE\\0\\0` at e_lfanew."""
    if not head.startswith(b"MZ"):
        return False
    if len(head) >= 64:
        (e_lfanew,) = struct.unpack_from("<I", head, 0x3C)
        if 64 <= e_lfanew <= len(head) - 4 and head[e_lfanew : e_lfanew + 4] == b"PE\x00\x00":
            return True
    # Without a confirmed PE header: a DOS stub is binary, text is not.
    return any(b in _TEXT_CONTROL for b in head[2:64])


def executable_signature(head: bytes) -> str | None:
    """What kind of executable the first bytes of a file are, or None."""
    if head.startswith(_ELF):
        return "ELF executable"
    if head.startswith(b"#!"):
        return "script with a #! interpreter line"
    kind = _MACHO.get(head[:4])
    if kind:
        return kind
    if _is_dos_executable(head):
        return "Windows/DOS executable (MZ)"
    return None
