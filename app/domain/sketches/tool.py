"""The scratchpad tools (`scratchpad_read`, `scratchpad_write`): a session's working
notes for the model. The checks of a write are the ones `PUT /sessions/{id}/scratchpad/
{section}` applies (`check_write`); the text is what the model reads."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from app.db.models import Sketch
from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.domain.sketches.schemas import SketchOut
from app.domain.sketches.services import SketchService, owner
from app.lib.errors import PayloadTooLarge, Unprocessable

MAX_SECTION = 200
MAX_SKETCH = 64 * 1024
LIST_LIMIT = 50  # sections named by a read without a section
PREVIEW_CHARS = 200  # of each value in that list


def sketch_out(row: Sketch) -> SketchOut:
    return SketchOut(section=row.key, value=row.value, updated_at=row.updated_at)


def check_write(section: object, value: object) -> tuple[str, str]:
    """A section name of 1-200 characters and a value of at most 64 KiB characters."""
    if not isinstance(section, str) or not section.strip() or len(section) > MAX_SECTION:
        raise Unprocessable(f"section: 1-{MAX_SECTION} characters")
    if not isinstance(value, str):
        raise Unprocessable("value: required — the text to keep in the section")
    if len(value) > MAX_SKETCH:
        raise PayloadTooLarge(f"value: at most {MAX_SKETCH} characters")
    return section, value


def _check_section(section: object) -> str | None:
    if section is None or (isinstance(section, str) and not section.strip()):
        return None
    if not isinstance(section, str) or len(section) > MAX_SECTION:
        raise Unprocessable(f"section: 1-{MAX_SECTION} characters")
    return section


@dataclass(frozen=True)
class ScratchpadRead:
    sections: list[Sketch]  # the one asked for, or the first LIST_LIMIT by name
    total: int
    text: str


def _preview(value: str) -> str:
    flat = " ".join(value.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


async def read_scratchpad(
    sketches: SketchService,
    access: SessionAccess,
    principal: Principal,
    session_id: uuid.UUID,
    section: object = None,
) -> ScratchpadRead:
    """One section in full, or (no section) the sections there are, each with a preview."""
    name = _check_section(section)
    session = await access.get(session_id, Viewer.of(principal))
    user_id = owner(session, principal)
    if name is not None:
        row = await sketches.get(user_id, session_id, name)  # 404 names the section
        return ScratchpadRead([row], 1, f"[{row.key}]\n{row.value}")
    rows, total = await sketches.list_page(user_id, session_id, LIST_LIMIT, 0)
    if not rows:
        return ScratchpadRead([], 0, "The scratchpad of this session is empty.")
    lines = [f"- [{r.key}] {_preview(r.value)}" for r in rows]
    more = f" (the first {len(rows)} by name)" if total > len(rows) else ""
    text = f"{total} scratchpad section(s){more}:\n" + "\n".join(lines)
    return ScratchpadRead(rows, total, text)


async def write_scratchpad(
    sketches: SketchService,
    access: SessionAccess,
    principal: Principal,
    session_id: uuid.UUID,
    section: object,
    value: object,
) -> Sketch:
    """Set a section of the session's scratchpad (created or replaced)."""
    name, text = check_write(section, value)
    session = await access.get(session_id, Viewer.editor(principal))
    return await sketches.put(owner(session, principal), session_id, name, text)
