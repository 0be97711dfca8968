"""`/sessions/{id}/scratchpad`: a session's working notes (sketches), one value per section."""

from __future__ import annotations

import uuid
from typing import Annotated

from litestar import Controller, delete, get, put
from litestar.params import Parameter
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.kernel.access import Viewer
from app.domain.kernel.ownership import SessionAccess
from app.domain.kernel.principal import Principal
from app.domain.sketches.repositories import SCRATCHPAD, SketchRepository
from app.domain.sketches.schemas import SketchIn, SketchOut
from app.lib.errors import NotFound, PayloadTooLarge, Unprocessable
from app.lib.inputs import scrub_text
from app.lib.pagination import Limit, Offset, Page, page

MAX_SECTION = 200
MAX_SKETCH = 64 * 1024


Section = Annotated[str, Parameter(min_length=1, max_length=MAX_SECTION)]


class ScratchpadController(Controller):
    path = "/sessions/{session_id:uuid}/scratchpad"
    tags = ["memory"]

    @get("/")
    async def list_sections(
        self,
        session_id: uuid.UUID,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[SketchOut]:
        session = await SessionAccess(db).get(session_id, Viewer.of(principal))
        rows, total = await SketchRepository(db).list_page(
            session.user_id or principal.id, SCRATCHPAD, session_id, limit, offset
        )
        return page(
            [SketchOut(section=r.key, value=r.value, updated_at=r.updated_at) for r in rows],
            total,
            limit,
            offset,
        )

    @put("/{section:str}")
    async def put_section(
        self,
        session_id: uuid.UUID,
        section: str,
        data: SketchIn,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
    ) -> SketchOut:
        if not section.strip() or len(section) > MAX_SECTION:
            raise Unprocessable(f"section: 1-{MAX_SECTION} characters")
        if len(data.value) > MAX_SKETCH:
            raise PayloadTooLarge(f"value: at most {MAX_SKETCH} characters")
        session = await SessionAccess(db).get(session_id, Viewer.editor(principal))
        repo = SketchRepository(db)
        owner = session.user_id or principal.id
        # The value is kept whatever a tool printed: a NUL becomes U+FFFD.
        await repo.put(owner, SCRATCHPAD, session_id, section, scrub_text(data.value))
        row = await repo.get(owner, SCRATCHPAD, session_id, section)
        assert row is not None
        return SketchOut(section=row.key, value=row.value, updated_at=row.updated_at)

    @get("/{section:str}")
    async def get_section(
        self,
        session_id: uuid.UUID,
        section: str,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
    ) -> SketchOut:
        session = await SessionAccess(db).get(session_id, Viewer.of(principal))
        row = await SketchRepository(db).get(
            session.user_id or principal.id, SCRATCHPAD, session_id, section
        )
        if row is None:
            raise NotFound(f"no scratchpad section {section!r}")
        return SketchOut(section=row.key, value=row.value, updated_at=row.updated_at)

    @delete("/{section:str}", status_code=204)
    async def delete_section(
        self,
        session_id: uuid.UUID,
        section: str,
        principal: Principal,
        db: AsyncSession,
        settings: Settings,
    ) -> None:
        session = await SessionAccess(db).get(session_id, Viewer.editor(principal))
        if not await SketchRepository(db).delete(
            session.user_id or principal.id, SCRATCHPAD, session_id, section
        ):
            raise NotFound(f"no scratchpad section {section!r}")
