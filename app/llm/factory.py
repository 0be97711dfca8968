"""The one place an `LLMGateway` is built from the settings (the app, the CLI commands)."""

from __future__ import annotations

from app.config import Settings
from app.llm.embedders import build_embedder
from app.llm.gateway import LLMGateway


def build_gateway(settings: Settings) -> LLMGateway:
    return LLMGateway(
        chat_host=settings.ollama_host,
        embed_host=settings.embedding_ollama_host or None,
        embed_api_key=settings.embedding_ollama_api_key or None,
        embed_model=settings.embedding_model,
        embed_dim=settings.vector_dim,
        chat_model=settings.ollama_model,
        timeout=settings.ollama_timeout,
        embed_batch_size=settings.embedding_batch_size,
        max_attempts=settings.llm_max_attempts,
        backoff_initial=settings.llm_backoff_initial,
        embedder=build_embedder(settings),
        breaker_failures=settings.llm_breaker_failures,
        breaker_reset_seconds=settings.llm_breaker_reset_seconds,
    )
