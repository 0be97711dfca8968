from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from app.lib.inputs import NoNul

# A path or a file name: a NUL is refused (422), never handed to the OS.
PathText = Annotated[str, NoNul]


class FileOut(msgspec.Struct):
    name: str
    size: int
    content_type: str
    type: str  # the card kind: model, html, svg, pdf, image, video, audio, text, binary
    path: str  # relative to the data directory, as the agent is told
    url: str
    modified_at: datetime | None = None
    original_name: str | None = None  # uploads: the client's name, when it was changed


class UploadOut(msgspec.Struct):
    files: list[FileOut]
    # The block the client appends to the user message:
    # "[Uploaded files on disk:\n- a.pdf → session_files/{id}/a.pdf]"
    message_block: str


class ShareFileIn(msgspec.Struct, forbid_unknown_fields=True):
    path: PathText


class PublishIn(msgspec.Struct, forbid_unknown_fields=True):
    filename: PathText


class CardOut(msgspec.Struct):
    type: str
    content_type: str
    size: int
    url: str
    name: str
