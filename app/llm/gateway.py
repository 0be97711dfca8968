"""Gateway to Ollama (chat + embeddings): bounded retries, a deadline, a circuit breaker.

Wraps two ``ollama.AsyncClient`` instances (chat host, embedding host) and turns the
client's many failure shapes into the errors of ``app.llm.errors`` (re-exported here):
:class:`LLMUnavailableError` (unreachable, timeouts, 5xx, malformed bodies — after
``max_attempts`` attempts with exponential backoff + jitter), :class:`LLMRequestError`
(4xx, never retried), :class:`EmbeddingDimensionError`, :class:`EmbeddingDisabledError`.

Every call is bounded by the current request's deadline (``app.llm.deadline``) and goes
through its host's circuit breaker (``app.llm.breaker``): past the deadline, or while the
host is taken as absent, it fails at once with :class:`LLMUnavailableError`, and callers
degrade as when Ollama is down. That policy is ``app.llm.policy``; the chat request's
checks and its result are ``app.llm.chat``; the embedding probe's verdict ``app.llm.probe``.

Embeddings go through an ``app.llm.embedders.Embedder`` (Ollama, in-process ``local``,
or none); the gateway adds batching and the dimension check. No dependency on the app's
settings: everything is passed explicitly.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
import ollama

from app.llm.breaker import CircuitBreaker
from app.llm.chat import (
    ChatChunk,
    ChatResult,
    chat_chunk,
    chat_options,
    chat_result,
    validate_messages,
)
from app.llm.deadline import budget as deadline_budget
from app.llm.deadline import remaining as deadline_remaining
from app.llm.embedders import Embedder, OllamaEmbedder
from app.llm.errors import (
    EmbeddingDimensionError,
    EmbeddingDisabledError,
    LLMError,
    LLMRequestError,
    LLMUnavailableError,
    as_llm_error,
)
from app.llm.policy import CLIENT_ERRORS, CallPolicy
from app.llm.probe import EmbedHealth, embed_health

__all__ = [
    "ChatChunk",
    "ChatResult",
    "EmbedHealth",
    "EmbeddingDimensionError",
    "EmbeddingDisabledError",
    "LLMError",
    "LLMGateway",
    "LLMRequestError",
    "LLMUnavailableError",
]

T = TypeVar("T")


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default verifying context, built once: creating one costs tens of ms and
    every ``AsyncClient`` would otherwise build its own."""
    return httpx.create_ssl_context()


def _normalise_host(host: str) -> str:
    return host.strip().rstrip("/")


# --------------------------------------------------------------------------- gateway
class LLMGateway:
    """Async access to Ollama chat + embeddings with retries and typed errors."""

    def __init__(
        self,
        chat_host: str,
        embed_host: str | None,
        embed_api_key: str | None,
        embed_model: str,
        embed_dim: int,
        chat_model: str,
        timeout: float = 30.0,
        embed_batch_size: int = 32,
        max_attempts: int = 3,
        backoff_initial: float = 0.2,
        backoff_max: float = 5.0,
        embedder: Embedder | None = None,
        breaker_failures: int = 3,
        breaker_reset_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``embedder``: who computes embeddings; None = Ollama at ``embed_host`` with
        ``embed_model`` (the other embedders ignore those two and ``embed_api_key``).
        ``breaker_*``: the circuit breaker of each host (``app.llm.breaker``)."""
        if embed_dim <= 0:
            raise ValueError("embed_dim must be positive")
        if embed_batch_size <= 0:
            raise ValueError("embed_batch_size must be positive")
        self._policy = CallPolicy(max_attempts, backoff_initial, backoff_max)
        self.max_attempts = max_attempts  # the policy's, as given (read-only)
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.chat_host = _normalise_host(chat_host)
        self.embed_host = _normalise_host(embed_host) if embed_host else self.chat_host
        self.embed_dim = embed_dim
        self.chat_model = chat_model
        self.timeout = timeout
        self.embed_batch_size = embed_batch_size

        self._breakers = {
            host: CircuitBreaker(host, breaker_failures, breaker_reset_seconds, clock)
            for host in {self.chat_host, self.embed_host}
        }

        embed_headers = {"Authorization": f"Bearer {embed_api_key}"} if embed_api_key else None
        self._chat_client = ollama.AsyncClient(
            host=self.chat_host, timeout=timeout, verify=_ssl_context()
        )
        if embedder is None:
            embed_client = ollama.AsyncClient(
                host=self.embed_host, timeout=timeout, headers=embed_headers, verify=_ssl_context()
            )
            embedder = OllamaEmbedder(embed_client, embed_model, self._call)
        if embedder.fixed_dim is not None and embedder.fixed_dim != embed_dim:
            raise ValueError(
                f"the {embedder.provider} embedding model {embedder.model!r} gives "
                f"{embedder.fixed_dim} dimensions, not {embed_dim}: check EMBEDDING_DIM and "
                "EMBEDDING_PROVIDER"
            )
        self.embedder: Embedder = embedder
        self._closed = False

    @property
    def embed_provider(self) -> str:
        return self.embedder.provider

    @property
    def embed_model(self) -> str:
        return self.embedder.model

    def __repr__(self) -> str:  # never include the API key
        return (
            f"LLMGateway(chat_model={self.chat_model!r}, embed_provider={self.embed_provider!r}, "
            f"embed_model={self.embed_model!r}, embed_dim={self.embed_dim})"
        )

    # ------------------------------------------------------------------ lifecycle
    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._chat_client.close()
        await self.embedder.aclose()

    async def __aenter__(self) -> LLMGateway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ call policy
    def breaker(self, operation: str) -> CircuitBreaker:
        """The circuit breaker of the host `operation` goes to (``embed`` → embedding host)."""
        return self._breakers[self.embed_host if operation == "embed" else self.chat_host]

    def breaker_states(self) -> dict[str, str]:
        return {"chat": self.breaker("chat").state, "embed": self.breaker("embed").state}

    async def _call(self, operation: str, fn: Callable[[], Awaitable[T]]) -> T:
        """`fn` under the call policy (``app.llm.policy``) of the host `operation` goes
        to: retries, the request's deadline, its circuit breaker."""
        return await self._policy.call(operation, fn, self.breaker(operation))

    # ------------------------------------------------------------------ embeddings
    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` (in batches of ``embed_batch_size``), preserving order.

        Raises :class:`EmbeddingDimensionError` if any vector's length != ``embed_dim``.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings; use embed_one() for one text")
        items = list(texts)
        out: list[list[float]] = []
        for start in range(0, len(items), self.embed_batch_size):
            batch = items[start : start + self.embed_batch_size]
            out.extend(await self._embed_batch(batch))
        return out

    async def embed_one(self, text: str) -> list[float]:
        return (await self.embed([text]))[0]

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        vectors = await self.embedder.embed_batch(batch)
        if len(vectors) != len(batch):  # an embedder's bug, not a model's answer
            raise LLMUnavailableError(
                f"embed: expected {len(batch)} embeddings, got {len(vectors)}", operation="embed"
            )
        for vec in vectors:
            if len(vec) != self.embed_dim:
                raise EmbeddingDimensionError(self.embed_dim, len(vec), self.embed_model)
        return vectors

    # ------------------------------------------------------------------ chat
    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        think: bool | None = False,
        options: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        """Non-streaming chat completion."""
        validate_messages(messages)
        opts = chat_options(options, temperature, max_tokens)
        use_model = model or self.chat_model
        msgs = list(messages)

        async def do() -> ollama.ChatResponse:
            return await self._chat_client.chat(
                model=use_model,
                messages=msgs,
                stream=False,
                think=think,
                options=opts or None,
            )

        return chat_result(await self._call("chat", do), use_model)

    async def chat_stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str | None = None,
        think: bool | None = None,
        options: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> AsyncIterator[ChatChunk]:
        """Streaming chat completion, piece by piece.

        The connection phase (up to the first piece) runs under the call policy —
        retries, the request's deadline, the breaker — like :meth:`chat`; after it, each
        piece is awaited within what is left of the deadline (and ``OLLAMA_TIMEOUT``
        between reads), and a failure is an ``LLMError`` with no retry: pieces already
        handed out cannot be taken back."""
        validate_messages(messages)
        use_model = model or self.chat_model
        msgs, tool_defs = list(messages), list(tools) if tools else None

        async def connect() -> tuple[AsyncIterator[ollama.ChatResponse], ollama.ChatResponse]:
            stream = await self._chat_client.chat(
                model=use_model,
                messages=msgs,
                tools=tool_defs,
                stream=True,
                think=think,
                options=dict(options) if options else None,
            )
            try:
                return stream, await anext(stream)  # the request is sent here
            except StopAsyncIteration:
                raise ValueError("chat: the stream ended before its first piece") from None

        stream, first = await self._call("chat", connect)
        piece = chat_chunk(first, use_model)
        try:
            while True:
                yield piece
                if piece.done:
                    return
                piece = chat_chunk(await self._next_piece(stream), use_model)
        finally:  # a reader that stops early must not leave the HTTP response open
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    @staticmethod
    async def _next_piece(stream: AsyncIterator[ollama.ChatResponse]) -> ollama.ChatResponse:
        left = deadline_remaining()
        if left is not None and left <= 0:
            raise _passed_mid_stream()
        try:
            async with asyncio.timeout(left):
                return await anext(stream)
        except StopAsyncIteration:
            raise LLMUnavailableError(
                "chat: the stream ended without its final piece", operation="chat"
            ) from None
        except TimeoutError:
            raise _passed_mid_stream() from None
        except CLIENT_ERRORS as exc:
            raise as_llm_error("chat", 1, exc) from exc

    # ------------------------------------------------------------------ health
    # ASYNC109: a caller-side asyncio.timeout() would raise; health probes must instead
    # return a verdict within their own deadline, so the timeout is part of the API.
    async def ping(self, timeout: float = 1.0) -> bool:  # noqa: ASYNC109
        """True if the chat host answers ``GET /api/version`` within ``timeout`` seconds.

        Never raises (except on cancellation) and never blocks longer than ``timeout``.
        """
        try:
            async with asyncio.timeout(timeout):
                http = getattr(self._chat_client, "_client", None)
                if isinstance(http, httpx.AsyncClient):
                    resp = await http.get("/api/version", timeout=timeout)
                    return resp.status_code == 200
                await self._chat_client.list()  # fallback if ollama internals change
                return True
        except Exception:
            return False

    async def check_embedding(self, timeout: float = 5.0) -> EmbedHealth:  # noqa: ASYNC109
        """Single (un-retried) probe of the embedding model: reachable? right dimension?"""
        return embed_health(await self.embedder.probe(timeout), self.embed_model, self.embed_dim)


def _passed_mid_stream() -> LLMUnavailableError:
    return LLMUnavailableError(
        f"chat: the deadline for model calls ({deadline_budget()}) passed mid-stream",
        operation="chat",
    )
