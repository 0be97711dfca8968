"""`image_view`: one of the session's images (pasted or uploaded), read for the model.

The model names the image as the pasted-image notice lists it
(`session_files/<session id>/image_2.png`) or by its bare file name (`image_2.png`). Only
the current session's directory is ever read: a path naming another session's directory
is refused in the same words as a missing file, so it confirms nothing. Synchronous:
call from a worker thread.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from app.config import Settings
from app.domain.compression.image_tokens import image_extension
from app.domain.files.storage import SESSION_FILES, relative_path, resolve_stored, session_dir
from app.lib.errors import PayloadTooLarge, Unprocessable

__all__ = ["IMAGE_VIEW_MAX_BYTES", "ViewedImage", "read_session_image"]

#: The largest image `image_view` loads (a pasted image is bounded by the request body,
#: an upload by SESSION_FILES_MAX_SIZE_MB: far more than a model call should carry).
IMAGE_VIEW_MAX_BYTES = 10 * 1024 * 1024

MEDIA_TYPES = {"png": "image/png", "jpg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}


@dataclass(frozen=True)
class ViewedImage:
    name: str
    path: str  # as the agent is told: session_files/<id>/<name>
    media_type: str
    data: bytes


def _name_of(session_id: uuid.UUID, ref: str) -> str | None:
    """The file name `ref` points at in this session's directory, or None."""
    ref = ref.strip()
    if "/" not in ref:
        return ref
    prefix = f"{SESSION_FILES}/{session_id}/"
    # Any other directory (another session's, an absolute path) is never read.
    return ref[len(prefix) :] if ref.startswith(prefix) else None


def read_session_image(settings: Settings, session_id: uuid.UUID, ref: str) -> ViewedImage:
    """The image `ref` of the session; 422 naming `ref` when the session has no such image,
    413 over IMAGE_VIEW_MAX_BYTES."""
    missing = Unprocessable(f"path: no image {ref!r} in this session's files")
    name = _name_of(session_id, ref)
    path = resolve_stored(session_dir(settings, session_id), name) if name else None
    if path is None or name is None:
        raise missing
    size = path.stat().st_size
    if size > IMAGE_VIEW_MAX_BYTES:
        raise PayloadTooLarge(
            f"path: {name} is {size} bytes, more than image_view loads "
            f"({IMAGE_VIEW_MAX_BYTES // (1024 * 1024)} MB)"
        )
    data = path.read_bytes()
    ext = image_extension(data)
    if ext is None:
        raise Unprocessable(f"path: {name} is not an image (PNG, JPEG, GIF or WebP)")
    return ViewedImage(name, relative_path(session_id, name), MEDIA_TYPES[ext], data)
