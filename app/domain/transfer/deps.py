"""The transfer domain's service, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.transfer.services import ImportService


def provide_import_service(db: AsyncSession, settings: Settings) -> ImportService:
    """On the request's transaction: an import is committed whole or not at all."""
    return ImportService(db, settings)


DEPENDENCIES = {"transfer": Provide(provide_import_service, sync_to_thread=False)}
