"""Embedders: who turns texts into vectors (the gateway delegates embeddings to one).

The :class:`Embedder` protocol, :class:`OllamaEmbedder` (Ollama's ``/api/embed``, through
the gateway's retries), :class:`NoEmbedder` (``EMBEDDING_PROVIDER=none``), and
:func:`build_embedder`, which picks the one ``EMBEDDING_PROVIDER`` names. The in-process
model, ``app.llm.local_embedder.LocalEmbedder``, lives in its own module (its
dependencies are an optional extra). The gateway (``app.llm.gateway``) adds batching and
the dimension check on top of whichever it is given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import httpx
import ollama

from app.llm.errors import EmbeddingDisabledError, MalformedResponseError, describe
from app.llm.probe import EmbedProbe

if TYPE_CHECKING:  # the gateway imports this module and stays free of the app's settings
    from app.config import Settings

__all__ = [
    "CallWithRetries",
    "EmbedProbe",
    "Embedder",
    "NoEmbedder",
    "OllamaEmbedder",
    "build_embedder",
]

_HEALTH_PROBE_TEXT = "navi embedding health check"


class Embedder(Protocol):
    """Turns texts into vectors. The gateway batches (``embed_batch_size``) and checks
    every vector's dimension; an embedder only computes, and raises
    ``app.llm.errors.LLMError`` subclasses when it cannot."""

    @property
    def provider(self) -> str:
        """``ollama`` | ``local`` | ``none``."""
        ...

    @property
    def model(self) -> str: ...

    @property
    def fixed_dim(self) -> int | None:
        """The dimension when it is known without asking the model (local), else None."""
        ...

    async def embed_batch(self, texts: list[str]) -> list[list[float]]: ...

    # ASYNC109: like the gateway's probes, a verdict within the caller's deadline.
    async def probe(self, timeout: float) -> EmbedProbe:  # noqa: ASYNC109
        """One un-retried embedding of a fixed text; never raises (except cancellation)."""
        ...

    async def aclose(self) -> None: ...


class NoEmbedder:
    """``EMBEDDING_PROVIDER=none``: every embedding call fails at once, without I/O."""

    provider = "none"
    model = "none"
    fixed_dim: int | None = None
    MESSAGE = "embeddings are disabled (EMBEDDING_PROVIDER=none)"

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        raise EmbeddingDisabledError(self.MESSAGE)

    async def probe(self, timeout: float) -> EmbedProbe:  # noqa: ASYNC109
        return EmbedProbe(reachable=True, error=self.MESSAGE)

    async def aclose(self) -> None:
        return None


CallWithRetries = Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[Any]]


class OllamaEmbedder:
    """Embeddings from Ollama's ``/api/embed`` (``EMBEDDING_PROVIDER=ollama``).

    ``call`` is the gateway's call policy (``app.llm.gateway.LLMGateway._call``), which
    turns the client's failures into the gateway's errors."""

    provider = "ollama"
    fixed_dim: int | None = None

    def __init__(self, client: ollama.AsyncClient, model: str, call: CallWithRetries) -> None:
        self._client = client
        self.model = model
        self._call = call

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        async def do() -> list[list[float]]:
            resp = await self._client.embed(model=self.model, input=texts)
            if len(resp.embeddings) != len(texts):
                raise MalformedResponseError(
                    f"expected {len(texts)} embeddings, got {len(resp.embeddings)}"
                )
            return [[float(x) for x in vec] for vec in resp.embeddings]

        vectors: list[list[float]] = await self._call("embed", do)
        return vectors

    async def probe(self, timeout: float) -> EmbedProbe:  # noqa: ASYNC109
        try:
            async with asyncio.timeout(timeout):
                resp = await self._client.embed(model=self.model, input=[_HEALTH_PROBE_TEXT])
        except ollama.ResponseError as exc:
            return EmbedProbe(True, error=f"HTTP {exc.status_code}: {exc.error}")
        except (TimeoutError, httpx.TimeoutException):
            return EmbedProbe(False, error=f"timed out after {timeout}s")
        except (httpx.TransportError, ConnectionError) as exc:
            return EmbedProbe(False, error=describe(exc))
        except Exception as exc:  # malformed body etc.: it answered, but not sensibly
            return EmbedProbe(True, error=f"malformed response: {describe(exc)}")
        if not resp.embeddings:
            return EmbedProbe(True, error="malformed response: no embeddings returned")
        return EmbedProbe(True, dim=len(resp.embeddings[0]))

    async def aclose(self) -> None:
        await self._client.close()


def build_embedder(settings: Settings) -> Embedder | None:
    """`ollama` → None (the gateway builds its Ollama embedder from the embed_* arguments),
    `local` → the in-process model, `none` → embeddings disabled.

    `local` raises `LocalModelError` when the `local` extra is not installed, so a service
    configured for it fails at start-up rather than at the first search."""
    if settings.embedding_provider == "local":
        from app.llm.local_embedder import LocalEmbedder

        return LocalEmbedder(index_threads=settings.indexer_threads)
    if settings.embedding_provider == "none":
        return NoEmbedder()
    return None
