"""The auth domain's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.auth.services import UserService
from app.domain.kernel.runtime import Runtime


def provide_user_service(db: AsyncSession, runtime: Runtime) -> UserService:
    return UserService.of(db, runtime)


DEPENDENCIES = {"users": Provide(provide_user_service, sync_to_thread=False)}
