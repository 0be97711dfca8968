"""The sketches domain's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.kernel.runtime import Runtime
from app.domain.sketches.services import SketchService


def provide_sketch_service(db: AsyncSession, runtime: Runtime) -> SketchService:
    return SketchService.of(db, runtime)


DEPENDENCIES = {"sketches": Provide(provide_sketch_service, sync_to_thread=False)}
