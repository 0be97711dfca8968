"""What a built-in tool is handed (:class:`ToolContext`) and what it answers
(:class:`ToolResult`); apart from the registry (``tools.py``) so the tool modules can
import them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.llm.gateway import LLMGateway

__all__ = ["ToolContext", "ToolImage", "ToolResult"]


@dataclass(frozen=True)
class ToolContext:
    db: AsyncSession  # the transaction the tool runs in (the caller owns commit/rollback)
    runtime: Runtime  # what the tool's services are built from (`Service.of(db, runtime)`)
    principal: Principal
    session_id: uuid.UUID | None  # the current session (ownership checked by the caller), or None
    #: the gateway a tool that embeds uses (default the runtime's); the turn loop hands
    #: the tools that say what they embed (`ToolSpec.ahead`) a sealed one, filled ahead
    llm: LLMGateway | None = None

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @property
    def gateway(self) -> LLMGateway | None:
        return self.llm or self.runtime.llm


@dataclass(frozen=True)
class ToolImage:
    """An image a tool hands the model (`image_view`): the turn loop attaches it to the
    next model call, MCP answers it as image content."""

    data: bytes
    media_type: str


@dataclass(frozen=True)
class ToolResult:
    text: str  # what the model reads (the HTTP tool endpoint's `text`)
    data: dict[str, Any] | None = None  # the structured result (the endpoint's JSON body)
    is_error: bool = False  # bad arguments from the model: `text` names the problem
    images: tuple[ToolImage, ...] = ()
