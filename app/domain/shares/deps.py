"""The shares domain's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.shares.services import ShareService


def provide_share_service(db: AsyncSession, settings: Settings) -> ShareService:
    return ShareService(db, settings)


DEPENDENCIES = {"shares": Provide(provide_share_service, sync_to_thread=False)}
