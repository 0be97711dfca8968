"""Gateway to Ollama (chat + embeddings): bounded retries, a deadline, a circuit breaker.

Wraps two ``ollama.AsyncClient`` instances (chat host, embedding host) and turns the
client's many failure shapes into the errors of ``app.llm.errors`` (re-exported here):
:class:`LLMUnavailableError` (unreachable, timeouts, 5xx, malformed bodies — after
``max_attempts`` attempts with exponential backoff + jitter), :class:`LLMRequestError`
(4xx, never retried), :class:`EmbeddingDimensionError`, :class:`EmbeddingDisabledError`.

Every call is bounded by the current request's deadline (``app.llm.deadline``) and goes
through its host's circuit breaker (``app.llm.breaker``): past the deadline, or while the
host is taken as absent, it fails at once with :class:`LLMUnavailableError`, and callers
degrade as when Ollama is down.

Embeddings go through an ``app.llm.embedders.Embedder`` (Ollama, in-process ``local``,
or none); the gateway adds batching and the dimension check. No dependency on the app's
settings: everything is passed explicitly.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import ollama
import pydantic
import structlog
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from app.llm.breaker import CLOSED, CircuitBreaker, is_connection_failure
from app.llm.deadline import remaining as deadline_remaining
from app.llm.embedders import Embedder, OllamaEmbedder
from app.llm.errors import (
    MALFORMED_ERRORS,
    TRANSPORT_ERRORS,
    EmbeddingDimensionError,
    EmbeddingDisabledError,
    LLMError,
    LLMRequestError,
    LLMUnavailableError,
    as_llm_error,
    describe,
    error_kind,
    is_retryable,
)

__all__ = [
    "ChatResult",
    "EmbedHealth",
    "EmbeddingDimensionError",
    "EmbeddingDisabledError",
    "LLMError",
    "LLMGateway",
    "LLMRequestError",
    "LLMUnavailableError",
]

log = structlog.get_logger(__name__)

T = TypeVar("T")

#: What the ollama client raises that the gateway turns into an LLMError.
_CLIENT_ERRORS: tuple[type[BaseException], ...] = (
    ollama.ResponseError,
    ollama.RequestError,
    *TRANSPORT_ERRORS,
    *MALFORMED_ERRORS,
)


# --------------------------------------------------------------------------- results
@dataclass(frozen=True, slots=True)
class ChatResult:
    content: str
    prompt_eval_count: int
    eval_count: int
    model: str
    done_reason: str | None = None
    thinking: str | None = None


@dataclass(frozen=True, slots=True)
class EmbedHealth:
    """Outcome of :meth:`LLMGateway.check_embedding`.

    ``reachable``: the embedding host answered at all (even with an error status).
    ``ok``: the model answered and its dimension equals ``expected_dim``.
    """

    reachable: bool
    ok: bool
    model: str
    expected_dim: int
    dim: int | None = None
    error: str | None = None


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
        if max_attempts <= 0:
            raise ValueError("max_attempts must be >= 1")
        self.chat_host = _normalise_host(chat_host)
        self.embed_host = _normalise_host(embed_host) if embed_host else self.chat_host
        self.embed_dim = embed_dim
        self.chat_model = chat_model
        self.timeout = timeout
        self.embed_batch_size = embed_batch_size
        self.max_attempts = max_attempts
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max

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

    # ------------------------------------------------------------------ retry core
    def breaker(self, operation: str) -> CircuitBreaker:
        """The circuit breaker of the host `operation` goes to (``embed`` → embedding host)."""
        return self._breakers[self.embed_host if operation == "embed" else self.chat_host]

    def breaker_states(self) -> dict[str, str]:
        return {"chat": self.breaker("chat").state, "embed": self.breaker("embed").state}

    def _retrying(self, operation: str, breaker: CircuitBreaker) -> AsyncRetrying:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            log.warning(
                "llm.retry",
                operation=operation,
                attempt=state.attempt_number,
                max_attempts=self.max_attempts,
                error_kind=error_kind(exc) if exc is not None else "unknown",
                error=describe(exc) if exc is not None else None,
                sleep=round(state.upcoming_sleep, 3),
            )

        return AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=wait_exponential_jitter(
                multiplier=self.backoff_initial,
                max=self.backoff_max,
                jitter=self.backoff_initial,
            ),
            # No retry once the breaker has opened (or a probe failed): the host is absent.
            retry=retry_if_exception(lambda e: is_retryable(e) and breaker.state == CLOSED),
            before_sleep=before_sleep,
            reraise=True,
        )

    async def _call(self, operation: str, fn: Callable[[], Awaitable[T]]) -> T:
        """`fn` with retries, within the request's deadline (``app.llm.deadline``) and
        through the host's circuit breaker; every failure is an ``LLMError``."""
        left = deadline_remaining()
        if left is not None and left <= 0:
            raise self._out_of_time(operation)
        breaker = self.breaker(operation)
        if not breaker.allow():
            raise LLMUnavailableError(
                f"{operation}: Ollama at {breaker.host} is taken as absent (circuit breaker "
                f"open, next probe in {breaker.retry_in():.0f}s)",
                operation=operation,
            )
        try:
            async with asyncio.timeout(left) as scope:
                return await self._attempts(operation, fn, breaker)
        except TimeoutError:
            if not scope.expired():
                raise
            breaker.abandon()
            raise self._out_of_time(operation) from None
        except asyncio.CancelledError:
            breaker.abandon()
            raise

    @staticmethod
    def _out_of_time(operation: str) -> LLMUnavailableError:
        log.info("llm.deadline_passed", operation=operation)
        return LLMUnavailableError(
            f"{operation}: the request's deadline for model calls "
            "(LLM_REQUEST_DEADLINE_SECONDS) has passed",
            operation=operation,
        )

    async def _attempts(
        self, operation: str, fn: Callable[[], Awaitable[T]], breaker: CircuitBreaker
    ) -> T:
        attempts = 0

        async def attempt() -> T:
            nonlocal attempts
            attempts += 1
            try:
                result = await fn()
            except Exception as exc:
                if is_connection_failure(exc):
                    breaker.failure()
                else:  # it answered, if badly: the host is there
                    breaker.success()
                raise
            breaker.success()
            return result

        try:
            return await self._retrying(operation, breaker)(attempt)
        except _CLIENT_ERRORS as exc:
            error = as_llm_error(operation, attempts, exc)
            if isinstance(error, LLMUnavailableError) and breaker.state == CLOSED:
                # (an open breaker has said it in its own line)
                log.warning(
                    "llm.unavailable",
                    operation=operation,
                    attempts=attempts,
                    error_kind=error_kind(exc),
                )
            raise error from exc

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
        # Validate messages up front: a pydantic error *inside* the retry loop means a
        # malformed response (retried), so bad input must be caught here instead.
        for message in messages:
            try:
                ollama.Message.model_validate(dict(message))
            except (pydantic.ValidationError, TypeError, ValueError) as exc:
                raise LLMRequestError(
                    f"chat: invalid message: {exc}", operation="chat", cause=exc
                ) from exc

        opts: dict[str, Any] = dict(options or {})
        if temperature is not None:
            opts["temperature"] = temperature
        if max_tokens is not None:
            opts["num_predict"] = max_tokens
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

        resp = await self._call("chat", do)
        return ChatResult(
            content=resp.message.content or "",
            prompt_eval_count=resp.prompt_eval_count or 0,
            eval_count=resp.eval_count or 0,
            model=resp.model or use_model,
            done_reason=resp.done_reason,
            thinking=resp.message.thinking,
        )

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
        probe = await self.embedder.probe(timeout)
        error = probe.error
        if error is None and probe.dim is not None and probe.dim != self.embed_dim:
            error = f"dimension mismatch: model returned {probe.dim}, expected {self.embed_dim}"
        return EmbedHealth(
            reachable=probe.reachable,
            ok=probe.reachable and error is None and probe.dim == self.embed_dim,
            model=self.embed_model,
            expected_dim=self.embed_dim,
            dim=probe.dim,
            error=error,
        )
