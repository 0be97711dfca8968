"""The agents domain's dependencies: the turn loop of one request."""

from __future__ import annotations

import uuid

from litestar.di import Provide

from app.domain.agents.schemas import TurnRequest
from app.domain.agents.turns import TurnLoop
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime

__all__ = ["DEPENDENCIES", "TurnLoopFactory", "provide_turn_loops"]


class TurnLoopFactory:
    """Builds the loop of one turn (its steps open their own transactions)."""

    def __init__(self, runtime: Runtime, principal: Principal) -> None:
        self.runtime, self.principal = runtime, principal

    def __call__(self, session_id: uuid.UUID, req: TurnRequest) -> TurnLoop:
        return TurnLoop(self.runtime, self.principal, session_id, list(req.tools))


def provide_turn_loops(runtime: Runtime, principal: Principal) -> TurnLoopFactory:
    return TurnLoopFactory(runtime, principal)


DEPENDENCIES = {"turn_loops": Provide(provide_turn_loops, sync_to_thread=False)}
