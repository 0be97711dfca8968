"""Request and answer shapes of the turn endpoint (``POST /sessions/{id}/turns``)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

import msgspec

from app.domain.agents.stream import TurnEvent
from app.lib.inputs import NUL_PATTERN

__all__ = [
    "PendingCall",
    "ToolResultIn",
    "TurnMessage",
    "TurnOut",
    "TurnRequest",
    "TurnStatus",
]

MAX_IMAGES = 16
MAX_TOOL_RESULTS = 64
MAX_CLIENT_TOOLS = 64
CallId = Annotated[str, msgspec.Meta(min_length=1, max_length=100, pattern=NUL_PATTERN)]
TurnStatus = Literal["completed", "requires_action", "max_rounds", "interrupted", "failed"]


class TurnMessage(msgspec.Struct, forbid_unknown_fields=True):
    """The user's message: text and base64 images, as in appends."""

    content: str = ""
    images: Annotated[list[str], msgspec.Meta(max_length=MAX_IMAGES)] | None = None


class ToolResultIn(msgspec.Struct, forbid_unknown_fields=True):
    """The client's result of a call it was handed (``requires_action``)."""

    tool_call_id: CallId
    content: str = ""
    is_error: bool = False


class TurnRequest(msgspec.Struct, forbid_unknown_fields=True):
    """Either ``message`` (a new turn) or ``tool_results`` (resume a turn that asked for
    the client's tools), never both."""

    message: TurnMessage | None = None
    tool_results: (
        Annotated[list[ToolResultIn], msgspec.Meta(max_length=MAX_TOOL_RESULTS)] | None
    ) = None
    #: The client's own tools (Ollama's tool definitions); their calls come back as
    #: ``requires_action``. Sent again with every request of the turn.
    tools: Annotated[list[dict[str, Any]], msgspec.Meta(max_length=MAX_CLIENT_TOOLS)] = (
        msgspec.field(default_factory=list)
    )


class PendingCall(msgspec.Struct):
    """A tool call the service does not know: the client runs it and posts the result."""

    id: str
    name: str
    arguments: dict[str, Any]


class TurnOut(msgspec.Struct):
    """The JSON answer: what the event stream carries, the deltas joined."""

    session_id: uuid.UUID
    status: TurnStatus
    content: str
    thinking: str | None
    rounds: int
    tool_call_count: int
    elapsed_seconds: float
    pending: list[PendingCall]
    events: list[TurnEvent]
