"""`/sessions/{id}/scratchpad`: a session's working notes (sketches), one value per section."""

from __future__ import annotations

import uuid

from litestar import Controller, delete, get, put

from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.domain.sketches.deps import DEPENDENCIES
from app.domain.sketches.schemas import SketchIn, SketchOut
from app.domain.sketches.services import SketchService, owner
from app.domain.sketches.tool import sketch_out, write_scratchpad
from app.lib.pagination import Limit, Offset, Page, page


class ScratchpadController(Controller):
    path = "/sessions/{session_id:uuid}/scratchpad"
    tags = ["memory"]
    dependencies = DEPENDENCIES

    @get("/")
    async def list_sections(
        self,
        session_id: uuid.UUID,
        principal: Principal,
        access: SessionAccess,
        sketches: SketchService,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[SketchOut]:
        session = await access.get(session_id, Viewer.of(principal))
        rows, total = await sketches.list_page(owner(session, principal), session_id, limit, offset)
        return page([sketch_out(r) for r in rows], total, limit, offset)

    @put("/{section:str}")
    async def put_section(
        self,
        session_id: uuid.UUID,
        section: str,
        data: SketchIn,
        principal: Principal,
        access: SessionAccess,
        sketches: SketchService,
    ) -> SketchOut:
        row = await write_scratchpad(sketches, access, principal, session_id, section, data.value)
        return sketch_out(row)

    @get("/{section:str}")
    async def get_section(
        self,
        session_id: uuid.UUID,
        section: str,
        principal: Principal,
        access: SessionAccess,
        sketches: SketchService,
    ) -> SketchOut:
        session = await access.get(session_id, Viewer.of(principal))
        return sketch_out(await sketches.get(owner(session, principal), session_id, section))

    @delete("/{section:str}", status_code=204)
    async def delete_section(
        self,
        session_id: uuid.UUID,
        section: str,
        principal: Principal,
        access: SessionAccess,
        sketches: SketchService,
    ) -> None:
        session = await access.get(session_id, Viewer.editor(principal))
        await sketches.delete(owner(session, principal), session_id, section)
