"""The agents domain's dependencies: the turn loop of one request."""

from __future__ import annotations

import uuid

from litestar.datastructures import State
from litestar.di import Provide

from app.config import Settings
from app.domain.agents.schemas import TurnRequest
from app.domain.agents.turns import TurnLoop
from app.domain.kernel.principal import Principal

__all__ = ["DEPENDENCIES", "TurnLoopFactory", "provide_turn_loops"]


class TurnLoopFactory:
    """Builds the loop of one turn (its steps open their own transactions)."""

    def __init__(self, state: State, settings: Settings, principal: Principal) -> None:
        self.state, self.settings, self.principal = state, settings, principal

    def __call__(self, session_id: uuid.UUID, req: TurnRequest) -> TurnLoop:
        return TurnLoop(self.state, self.settings, self.principal, session_id, list(req.tools))


def provide_turn_loops(state: State, settings: Settings, principal: Principal) -> TurnLoopFactory:
    return TurnLoopFactory(state, settings, principal)


DEPENDENCIES = {"turn_loops": Provide(provide_turn_loops, sync_to_thread=False)}
