"""What one turn of ``TurnLoop`` (``turns.py``) carries from step to step: its runtime,
its session and lease, its toolbox and profile, the prompt, the round count and the one
deadline every model call of the turn spends; and the step (a transaction of its own)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import transaction
from app.domain.agents.prompt import Prompt
from app.domain.agents.toolbox import Toolbox
from app.domain.agents.turn_lease import TurnLease
from app.domain.context.services import ContextService
from app.domain.kernel.access import Viewer
from app.domain.kernel.jobs import LIVE_INDEX_JOB, wake
from app.domain.kernel.principal import Principal
from app.domain.kernel.profiles import Profile
from app.domain.kernel.runtime import Runtime
from app.llm.deadline import llm_deadline_at

TURN_BUDGET = "TURN_DEADLINE_SECONDS"


class TurnState:
    def __init__(
        self,
        runtime: Runtime,
        principal: Principal,
        session_id: uuid.UUID,
        client_tools: list[dict[str, Any]],
    ) -> None:
        self.runtime, self.settings, self.session_id = runtime, runtime.settings, session_id
        self.principal = principal
        self.viewer = Viewer.editor(principal)  # a turn writes
        self.client_tools = client_tools
        self.toolbox: Toolbox | None = None
        self.profile: Profile | None = None
        self.prompt = Prompt()
        self.rounds = self.tool_call_count = 0
        self.tokens = 0  # the last prepare's estimate of the context (for image_view)
        self.started = time.monotonic()
        # One budget for every model call of the turn, the pre-turn prepare included.
        self.deadline = self.started + self.settings.turn_deadline_seconds
        self.content = ""
        self.thinking = ""
        self.interrupted = False
        self.streaming = False
        self.unnamed: tuple[str, bool] = ("", False)
        #: the turn's lease on the session (`TurnLease.claim`)
        self.lease = TurnLease(runtime, session_id, self.viewer)

    @asynccontextmanager
    async def _step(self) -> AsyncIterator[tuple[AsyncSession, ContextService]]:
        """One step's transaction, committed when the step ends; what it appended is then
        taken by the live raw index at once (`kernel.jobs.wake`)."""
        async with transaction(self.runtime.session_factory) as db:
            yield db, ContextService.of(db, self.runtime)
        wake(self.runtime.jobs, LIVE_INDEX_JOB)

    def _budget(self) -> AbstractContextManager[None]:
        """The turn's deadline (`TURN_DEADLINE_SECONDS` from its start) in place of the
        request's."""
        return llm_deadline_at(self.deadline, TURN_BUDGET)

    @property
    def tools(self) -> Toolbox:
        assert self.toolbox is not None, "begin() first"
        return self.toolbox

    @property
    def model(self) -> str:
        assert self.profile is not None
        return self.profile.model
