"""The files domain's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.di import Provide

from app.domain.files.services import FileService
from app.domain.kernel.runtime import Runtime


def provide_file_service(runtime: Runtime) -> FileService:
    """No request database session: uploads and share_file check the session in a
    transaction of their own, so none is held while bytes move."""
    return FileService.of(runtime)


DEPENDENCIES = {"files": Provide(provide_file_service, sync_to_thread=False)}
