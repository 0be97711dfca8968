"""The transfer domain's service, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.kernel.runtime import Runtime
from app.domain.transfer.services import ImportService


def provide_import_service(db: AsyncSession, runtime: Runtime) -> ImportService:
    """On the request's transaction: an import is committed whole or not at all."""
    return ImportService.of(db, runtime)


DEPENDENCIES = {"transfer": Provide(provide_import_service, sync_to_thread=False)}
