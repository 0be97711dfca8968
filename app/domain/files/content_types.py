"""Content type of a session file, from its extension AND its first bytes.

Pure functions. A signature wins over the name (a PNG saved as `.txt` is an image); the
name decides when the bytes have no recognisable signature. A `.ts` file is an MPEG
transport stream only when its bytes are one (0x47 every 188 bytes); otherwise it is
TypeScript source and served as text.

`kind` is the card a client renders: model, html, svg, pdf, image, video, audio, text,
binary. `active` marks types a browser would run script in (HTML, SVG, XML documents):
downloads serve them as attachments under a sandboxing CSP.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ContentType", "detect_content_type", "is_mpeg_ts"]


@dataclass(frozen=True)
class ContentType:
    media_type: str
    kind: str

    @property
    def active(self) -> bool:
        return self.kind in ("html", "svg")


BINARY = ContentType("application/octet-stream", "binary")
TEXT = ContentType("text/plain", "text")

_BY_EXTENSION: dict[str, ContentType] = {
    # 3D models
    ".stl": ContentType("model/stl", "model"),
    ".gltf": ContentType("model/gltf+json", "model"),
    ".glb": ContentType("model/gltf-binary", "model"),
    # documents
    ".pdf": ContentType("application/pdf", "pdf"),
    ".html": ContentType("text/html", "html"),
    ".htm": ContentType("text/html", "html"),
    ".xhtml": ContentType("application/xhtml+xml", "html"),
    ".svg": ContentType("image/svg+xml", "svg"),
    # images
    ".png": ContentType("image/png", "image"),
    ".jpg": ContentType("image/jpeg", "image"),
    ".jpeg": ContentType("image/jpeg", "image"),
    ".gif": ContentType("image/gif", "image"),
    ".webp": ContentType("image/webp", "image"),
    ".bmp": ContentType("image/bmp", "image"),
    ".ico": ContentType("image/x-icon", "image"),
    ".avif": ContentType("image/avif", "image"),
    # audio
    ".mp3": ContentType("audio/mpeg", "audio"),
    ".wav": ContentType("audio/wav", "audio"),
    ".ogg": ContentType("audio/ogg", "audio"),
    ".oga": ContentType("audio/ogg", "audio"),
    ".opus": ContentType("audio/ogg", "audio"),
    ".flac": ContentType("audio/flac", "audio"),
    ".m4a": ContentType("audio/mp4", "audio"),
    ".aac": ContentType("audio/aac", "audio"),
    # video
    ".mp4": ContentType("video/mp4", "video"),
    ".m4v": ContentType("video/mp4", "video"),
    ".mov": ContentType("video/quicktime", "video"),
    ".webm": ContentType("video/webm", "video"),
    ".mkv": ContentType("video/x-matroska", "video"),
    ".ogv": ContentType("video/ogg", "video"),
    # structured data a browser does not execute
    ".json": ContentType("application/json", "text"),
}

# Served as text/plain: readable inline, never interpreted (XML and CSS included).
_TEXT_EXTENSIONS = frozenset(
    """
    .txt .text .md .markdown .rst .csv .tsv .log .ini .cfg .conf .toml .yaml .yml .xml
    .css .scss .less .js .mjs .cjs .jsx .ts .tsx .mts .cts .vue .svelte .py .pyi .rb .pl .php
    .java .kt .kts .scala .go .rs .c .h .cc .cpp .cxx .hpp .hh .cs .swift .m .mm .r .jl
    .lua .sh .bash .zsh .fish .ps1 .sql .graphql .proto .tex .bib .diff .patch .env
    .dockerfile .makefile .gradle .properties .lock .ipynb .srt .vtt .ndjson .jsonl
    """.split()
)

_TS_PACKET = 188


def is_mpeg_ts(head: bytes) -> bool:
    """0x47 sync byte at the start of every 188-byte packet (at least two packets)."""
    if len(head) < 2 * _TS_PACKET:
        return False
    return all(head[i] == 0x47 for i in range(0, len(head) - _TS_PACKET + 1, _TS_PACKET))


def _by_signature(head: bytes) -> ContentType | None:
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return ContentType("image/png", "image")
    if head.startswith(b"\xff\xd8\xff"):
        return ContentType("image/jpeg", "image")
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return ContentType("image/gif", "image")
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return ContentType("image/webp", "image")
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return ContentType("audio/wav", "audio")
    if head.startswith(b"%PDF-"):
        return ContentType("application/pdf", "pdf")
    if head.startswith(b"glTF"):
        return ContentType("model/gltf-binary", "model")
    if head.startswith(b"fLaC"):
        return ContentType("audio/flac", "audio")
    if head.startswith(b"ID3"):
        return ContentType("audio/mpeg", "audio")
    if head.startswith(b"OggS"):
        return ContentType("audio/ogg", "audio")
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"M4A ", b"M4B "):
            return ContentType("audio/mp4", "audio")
        if brand == b"qt  ":
            return ContentType("video/quicktime", "video")
        if brand in (b"avif", b"avis"):
            return ContentType("image/avif", "image")
        if brand in (b"heic", b"heix", b"mif1"):
            return ContentType("image/heic", "image")
        return ContentType("video/mp4", "video")
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return ContentType("video/webm" if b"webm" in head[:64] else "video/x-matroska", "video")
    if is_mpeg_ts(head):
        return ContentType("video/mp2t", "video")
    return None


def _looks_like_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the end of the head is still text.
        return exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"
    return True


def detect_content_type(name: str, head: bytes) -> ContentType:
    """The type of a file called `name` whose first bytes are `head`."""
    found = _by_signature(head)
    if found is not None:
        return found
    dot = name.rfind(".")
    ext = name[dot:].lower() if dot >= 0 else ""
    if ext in _BY_EXTENSION:
        return _BY_EXTENSION[ext]
    if ext == ".stl" or (ext == "" and head.startswith(b"solid ")):
        return _BY_EXTENSION[".stl"]
    if ext in _TEXT_EXTENSIONS:
        return TEXT
    if head and _looks_like_text(head):
        return TEXT
    return BINARY if head else TEXT
