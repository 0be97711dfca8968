"""Plain message type shared by the compression package.

The compression code never touches the database or the LLM client; callers
convert their stored rows into :class:`Msg` objects and back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["Msg", "ROLES"]

ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})


@dataclass
class Msg:
    """One message of an LLM context (or of the display history).

    ``tool_calls`` uses the Ollama shape
    ``[{"function": {"name": ..., "arguments": {...}}}]``; ``images`` holds
    raw image bytes (never base64).
    """

    role: str
    content: str = ""
    sequence_number: int = -1
    is_context: bool = True
    is_display: bool = True
    is_summary: bool = False
    is_compression: bool = False
    is_compression_critical: bool = False
    is_plan: bool = False
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    images: list[bytes] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None

    @property
    def has_tool_calls(self) -> bool:
        """True for an assistant message that requests at least one tool."""
        return self.role == "assistant" and bool(self.tool_calls)
