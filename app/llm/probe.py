"""What an embedder says about itself: shared by every embedder module."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EmbedProbe:
    """What an :class:`~app.llm.embedders.Embedder` says about itself (the gateway checks
    the dimension)."""

    reachable: bool
    dim: int | None = None
    error: str | None = None
