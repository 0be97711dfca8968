"""The embedder that `EMBEDDING_PROVIDER` names (the gateway delegates embeddings to it)."""

from __future__ import annotations

from app.config import Settings
from app.llm.gateway import Embedder, NoEmbedder


def build_embedder(settings: Settings) -> Embedder | None:
    """`ollama` → None (the gateway builds its Ollama embedder from the embed_* arguments),
    `local` → the in-process model, `none` → embeddings disabled.

    `local` raises `LocalModelError` when the `local` extra is not installed, so a service
    configured for it fails at start-up rather than at the first search."""
    if settings.embedding_provider == "local":
        from app.llm.local_embedder import LocalEmbedder

        return LocalEmbedder()
    if settings.embedding_provider == "none":
        return NoEmbedder()
    return None
