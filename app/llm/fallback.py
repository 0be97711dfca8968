"""`navi serve` / `make run` without Ollama: the offline `local` embedder instead.

When neither EMBEDDING_PROVIDER nor EMBEDDING_DIM is set (environment or `.env`) and the
`local` extra is installed, `serve` picks the embedder before anything reads the
settings' vector dimension (models, migrations):

* the database's vector columns are already the local model's 384 dimensions → `local`
  (the database was made by it, e.g. by an earlier fallback: Ollama's 768-dimension
  vectors could not be stored there);
* the database is new (no vector column yet) and the Ollama embedding host does not
  answer `GET /api/version` within a second → `local`;
* otherwise nothing changes: with existing 768-dimension vectors and Ollama absent the
  service stays on Ollama (searches are text-only until it answers; the circuit breaker
  keeps that cheap) — switching would leave every stored vector unusable.

The choice is logged and shown by `/health` (`embedding_provider`, `embedding_fallback`).
Leaving it: `EMBEDDING_PROVIDER=ollama make reembed` (docs/operations.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import httpx
import structlog

from app.config import LOCAL_EMBEDDING_DIM, Settings, get_settings, read_dotenv

log = structlog.get_logger()

#: Hands the reason to the app (and to `serve`'s worker processes): not a setting.
FALLBACK_ENV = "NAVI_EMBEDDING_FALLBACK_REASON"


def fallback_reason() -> str | None:
    return os.environ.get(FALLBACK_ENV) or None


def _chosen_explicitly(environ: Mapping[str, str], dotenv: Path) -> bool:
    env = {**read_dotenv(dotenv), **environ}
    return any(env.get(name, "").strip() for name in ("EMBEDDING_PROVIDER", "EMBEDDING_DIM"))


def ollama_answers(host: str, timeout: float = 1.0) -> bool:
    try:
        return httpx.get(f"{host.rstrip('/')}/api/version", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def offline_reason(
    settings: Settings,
    vector_dims: set[int],
    *,
    environ: Mapping[str, str] | None = None,
    dotenv: Path = Path(".env"),
) -> str | None:
    """Why `serve` should use the `local` embedder, or None. `vector_dims`: the
    dimensions of the database's vector columns (empty for a new database)."""
    if _chosen_explicitly(os.environ if environ is None else environ, dotenv):
        return None
    from app.llm.local_embedder import local_model_available  # the optional extra: only when asked

    if not local_model_available():
        return None
    if vector_dims == {LOCAL_EMBEDDING_DIM}:
        return f"the database's vectors have the local model's {LOCAL_EMBEDDING_DIM} dimensions"
    if vector_dims:
        if not ollama_answers(settings.embed_host):
            log.warning(
                "embedding.ollama_unreachable",
                host=settings.embed_host,
                hint="the database has Ollama's vectors: staying on Ollama; searches are "
                "text-only until it answers",
            )
        return None
    if ollama_answers(settings.embed_host):
        return None
    return f"Ollama at {settings.embed_host} did not answer at start-up (new database)"


def apply_offline_fallback(reason: str) -> None:
    """Switch this process (and the workers it starts) to the `local` embedder."""
    os.environ["EMBEDDING_PROVIDER"] = "local"
    os.environ[FALLBACK_ENV] = reason
    get_settings.cache_clear()
    log.warning(
        "embedding.offline_fallback",
        provider="local",
        reason=reason,
        hint="set EMBEDDING_PROVIDER to choose; `EMBEDDING_PROVIDER=ollama make reembed` "
        "moves the vectors to Ollama later",
    )
