"""Images pasted into the chat: stored as `image_N.<ext>` in the session directory.

The extension comes from the bytes (`image_extension`), the bytes are written exactly as
they arrived, numbering runs across the session, and the same bytes twice reuse the file
that already holds them. The sha256 → name index is `.images.json` in the directory
(rebuilt by scanning `image_*` files when missing or unreadable).

The dual buffer keeps one row per message, so the LLM copy of a user message is its
row plus two metadata keys written here: `context_note` (the notice, appended to the
content by the context view) and `context_images` (how many leading images reach the
model). The display copy — content and images — is stored unchanged.

Concurrency: `attach_pasted_images` runs inside the append transaction after the
session row was locked (`MessageRepository.reserve`), so appends to one session write
their images one at a time, on every replica.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio.to_thread
import msgspec
import structlog

from app.config import Settings
from app.domain.compression.calibration import calibration_for
from app.domain.compression.estimate import estimate_tokens
from app.domain.compression.image_tokens import image_extension, image_tokens
from app.domain.compression.types import Msg
from app.domain.files.executables import HEAD_BYTES, executable_signature
from app.domain.files.notice import admitted_images, image_budget, image_notice
from app.domain.files.storage import link_unique, relative_path, session_dir
from app.domain.kernel.access import Viewer, reaches_llm
from app.domain.kernel.messages import MessageIn, MessageOut
from app.domain.kernel.profiles import Profiles, ProfilesError
from app.lib.disk import disk_full, disk_full_cause
from app.lib.errors import UnsupportedMedia

log = structlog.get_logger()

__all__ = [
    "CONTEXT_IMAGES_KEY",
    "CONTEXT_NOTE_KEY",
    "attach_pasted_images",
    "check_pasted_image",
    "context_view",
    "store_images",
    "window_and_model",
    "with_context_note",
]

CONTEXT_NOTE_KEY = "context_note"
CONTEXT_IMAGES_KEY = "context_images"
INDEX_FILE = ".images.json"
_IMAGE_NAME = re.compile(r"^image_(\d+)\.[a-z0-9]+$")
SUPPORTED_IMAGES = "PNG, JPEG, GIF or WebP"


def check_pasted_image(data: bytes, field: str) -> None:
    """415 unless `data` is an image by its first bytes: an executable is refused in the
    words an upload gets, anything else that is not a PNG, JPEG, GIF or WebP after it."""
    reason = executable_signature(data[:HEAD_BYTES])
    if reason:
        raise UnsupportedMedia(f"{field}: executable files are refused (content is a {reason})")
    if image_extension(data) is None:
        raise UnsupportedMedia(f"{field}: not a supported image ({SUPPORTED_IMAGES})")


# ------------------------------------------------------------------ disk (synchronous)
def _scan_index(directory: Path) -> dict[str, Any]:
    by_hash: dict[str, str] = {}
    top = 0
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        m = _IMAGE_NAME.match(entry.name)
        if not m or not entry.is_file(follow_symlinks=False):
            continue
        top = max(top, int(m.group(1)))
        digest = hashlib.sha256(Path(entry.path).read_bytes()).hexdigest()
        by_hash.setdefault(digest, entry.name)
    return {"next": top + 1, "sha256": by_hash}


def _load_index(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / INDEX_FILE).read_text(encoding="utf-8"))
        if isinstance(data.get("next"), int) and isinstance(data.get("sha256"), dict):
            return data
    except (OSError, ValueError, AttributeError):
        pass
    return _scan_index(directory)


def _save_index(directory: Path, index: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".images-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(index, f)
        os.replace(tmp, directory / INDEX_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def store_images(directory: Path, images: Sequence[bytes]) -> list[str]:
    """Store each image (or find the file already holding its bytes); their names."""
    directory.mkdir(parents=True, exist_ok=True)
    index = _load_index(directory)
    names: list[str] = []
    created: list[str] = []
    try:
        _store_each(directory, images, index, names, created)
        _save_index(directory, index)
    except BaseException:
        for name in created:  # all or none: a failed append keeps no file of its own
            (directory / name).unlink(missing_ok=True)
        raise
    return names


def _store_each(
    directory: Path,
    images: Sequence[bytes],
    index: dict[str, Any],
    names: list[str],
    created: list[str],
) -> None:
    for data in images:
        digest = hashlib.sha256(data).hexdigest()
        known = index["sha256"].get(digest)
        if known and (directory / known).is_file():
            names.append(known)
            continue
        ext = image_extension(data) or "bin"
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".upload-", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)
            # link_unique skips a number whose name is taken (an upload called image_3.png).
            n = int(index["next"])
            while (directory / f"image_{n}.{ext}").exists():
                n += 1
            name = link_unique(Path(tmp), directory, f"image_{n}.{ext}")
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        m = _IMAGE_NAME.match(name)
        index["next"] = max(n, int(m.group(1)) if m else n) + 1
        index["sha256"][digest] = name
        names.append(name)
        created.append(name)


# ------------------------------------------------------------------ the append hook
async def _store_all(
    settings: Settings, session_id: uuid.UUID, images: list[bytes]
) -> list[str | None]:
    """The paths of `images` once stored; all None when the directory cannot be written
    (logged); 507 when the disk is full (nothing stored)."""
    directory = session_dir(settings, session_id)
    try:
        names = await anyio.to_thread.run_sync(store_images, directory, images)
    except OSError as exc:
        full = disk_full_cause(exc)
        if full is not None:  # refused before the message is stored
            raise disk_full(directory, full, session_id=str(session_id)) from None
        log.warning(
            "agent.image_save_failed",
            session_id=str(session_id),
            images=len(images),
            error=f"{type(exc).__name__}: {exc.strerror or exc}",
        )
        return [None] * len(images)
    return [relative_path(session_id, n) for n in names]


class _Sessions(Protocol):
    async def get(self, session_id: uuid.UUID, viewer: Viewer) -> Any: ...


class _Messages(Protocol):
    async def context_messages(self, user_id: str, session_id: uuid.UUID) -> Sequence[Any]: ...


def _decoded(images: Sequence[str] | None) -> list[bytes]:
    out = []
    for img in images or ():
        try:
            out.append(base64.b64decode(img))
        except ValueError:
            continue
    return out


def _in_context_count(metadata: dict[str, Any] | None, n_images: int) -> int:
    value = (metadata or {}).get(CONTEXT_IMAGES_KEY)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= n_images:
        return value
    return n_images


def context_view(
    content: str, images: list[Any] | None, metadata: dict[str, Any] | None
) -> tuple[str, list[Any] | None]:
    """(content, images) of a stored message as the LLM receives it."""
    meta = metadata or {}
    note = meta.get(CONTEXT_NOTE_KEY)
    if isinstance(note, str) and note:
        content = f"{content}\n\n{note}" if content else note
    if images:
        images = images[: _in_context_count(meta, len(images))]
    return content, images


def _as_msg(m: Any, with_note: bool) -> Msg:
    # A stored row keeps its metadata in `message_metadata` (`metadata` is the ORM's);
    # an incoming MessageIn in `metadata`.
    meta = (m.message_metadata if hasattr(m, "message_metadata") else m.metadata) or {}
    content, images = m.content, m.images
    if with_note:
        content, images = context_view(content, images, meta)
    return Msg(
        role=m.role,
        content=content,
        tool_calls=m.tool_calls,
        tool_call_id=m.tool_call_id,
        name=m.name,
        images=_decoded(images) or None,
    )


def window_and_model(
    settings: Settings, profiles: Profiles, profile_id: str | None
) -> tuple[int, str]:
    """The profile's context window and model (OLLAMA_NUM_CTX / OLLAMA_MODEL without)."""
    try:
        profile = profiles.get(profile_id)
    except ProfilesError:
        return settings.ollama_num_ctx, settings.ollama_model
    return profile.context_window, profile.model


def with_context_note(item: MessageOut) -> MessageOut:
    """A stored message as the LLM context shows it: the notice appended to the
    content, only the images that were admitted."""
    if CONTEXT_NOTE_KEY not in item.metadata and CONTEXT_IMAGES_KEY not in item.metadata:
        return item
    content, images = context_view(item.content, item.images, item.metadata)
    return msgspec.structs.replace(item, content=content, images=images)


def _hidden(m: MessageIn) -> bool:
    return bool((m.metadata or {}).get("hidden"))


async def attach_pasted_images(
    sessions: _Sessions,
    messages_repo: _Messages,
    settings: Settings,
    profiles: Profiles,
    user_id: str,
    session_id: uuid.UUID,
    viewer: Viewer,
    messages: Sequence[MessageIn],
) -> None:
    """Store the images of each (not hidden) user message and write the context notice
    into its metadata (`user_id`: the session's). A directory that cannot be written is logged
    (`agent.image_save_failed`) and skipped; a full disk refuses the append (507
    `insufficient_storage`, `files.disk_full`): nothing of it is stored."""
    targets = [
        i for i, m in enumerate(messages) if m.role == "user" and m.images and not _hidden(m)
    ]
    if not targets:
        return
    session = await sessions.get(session_id, viewer)
    window, model = window_and_model(settings, profiles, session.profile_id if session else None)
    calib = calibration_for(model, user_id)
    rows = await messages_repo.context_messages(user_id, session_id)
    context = [
        _as_msg(r, True) for r in rows if reaches_llm(r.role, r.is_context, r.message_metadata)
    ]
    # every image of the append in one write: all stored or none (a full disk: 507)
    decoded = {i: _decoded(messages[i].images) for i in targets}
    stored = await _store_all(settings, session_id, [d for i in targets for d in decoded[i]])
    at = 0
    for i in targets:
        m = messages[i]
        data = decoded[i]
        paths, at = stored[at : at + len(data)], at + len(data)
        earlier = [_as_msg(x, True) for x in messages[:i] if getattr(x, "is_context", True)]
        text_only = Msg(role=m.role, content=m.content, name=m.name)
        used = estimate_tokens(
            [*context, *earlier, text_only],
            calib,
            window=window,
            message_budget=settings.context_message_token_budget,
            image_fallback=settings.context_image_tokens,
        )
        costs = [image_tokens(d, settings.context_image_tokens) for d in data]
        k = admitted_images(costs, image_budget(window, used))
        extra: dict[str, Any] = {}
        note = image_notice(len(data), k, paths)
        if note:
            extra[CONTEXT_NOTE_KEY] = note
        if note or k < len(data):
            extra[CONTEXT_IMAGES_KEY] = k
        if extra:
            m.metadata = {**(m.metadata or {}), **extra}
