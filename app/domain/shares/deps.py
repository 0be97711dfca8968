"""The shares domain's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.kernel.runtime import Runtime
from app.domain.shares.services import ShareService


def provide_share_service(db: AsyncSession, runtime: Runtime) -> ShareService:
    return ShareService.of(db, runtime)


DEPENDENCIES = {"shares": Provide(provide_share_service, sync_to_thread=False)}
