"""Every controller and background job of the service, registered in one place."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from app.domain.auth.controllers import AdminUserController, MeController
from app.domain.memory.controllers import MemorySearchController, ScratchpadController
from app.domain.sessions.controllers import SessionController
from app.domain.system.controllers import HealthController

ROUTE_HANDLERS: list[Any] = [
    HealthController,
    AdminUserController,
    MeController,
    SessionController,
    MemorySearchController,
    ScratchpadController,
]


@dataclass(frozen=True)
class Job:
    """A periodic background job: `run(app_state)` every `interval(settings)` seconds
    (0 = disabled). Jobs must be safe with several replicas running them at once."""

    name: str
    interval: Callable[[Any], float]
    run: Callable[[Any], Awaitable[object]]


BACKGROUND_JOBS: list[Job] = []
