"""The files domain's services, provided to its handlers (Litestar DI)."""

from __future__ import annotations

from litestar.datastructures import State
from litestar.di import Provide

from app.config import Settings
from app.domain.files.services import FileService


def provide_file_service(settings: Settings, state: State) -> FileService:
    """No request database session: uploads and share_file check the session in a
    transaction of their own, so none is held while bytes move."""
    return FileService(settings, state)


DEPENDENCIES = {"files": Provide(provide_file_service, sync_to_thread=False)}
