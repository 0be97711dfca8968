"""A search's query embeddings, made once and shared by its stores, or made ahead of a
transaction and handed over sealed (no model call while a pooled connection is held)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import structlog

from app.llm.gateway import LLMError, LLMGateway

__all__ = ["QueryEmbeddings", "embedded_ahead"]

log = structlog.get_logger(__name__)


class QueryEmbeddings:
    """The gateway with the embeddings of one search remembered: the facts store and the
    raw index embed the same query, the model runs once (a failure is remembered too,
    so a down embedder costs one timeout, not one per store). The stores may ask at the
    same time (they run concurrently): the second waits for the first's answer."""

    def __init__(self, llm: LLMGateway) -> None:
        self._llm = llm
        self._done: dict[str, list[float] | LLMError] = {}
        self._lock = asyncio.Lock()
        self._sealed = False

    def seal(self) -> QueryEmbeddings:
        """From now on the model is never called: a text not embedded before answers
        an LLMError (its caller degrades as for a down embedder). What a tool of the
        turn loop is handed inside its transaction: the embeddings were made ahead,
        with no connection held (`Toolbox.embed_ahead`)."""
        self._sealed = True
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        async with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._done]
            if missing and self._sealed:
                log.warning("embeddings.not_made_ahead", texts=len(missing))
                raise LLMError("the text was not embedded ahead of the transaction")
            if missing:
                try:
                    self._done.update(zip(missing, await self._llm.embed(missing), strict=True))
                except LLMError as exc:
                    self._done.update(dict.fromkeys(missing, exc))
        out = []
        for t in texts:
            got = self._done[t]
            if isinstance(got, LLMError):
                raise got
            out.append(got)
        return out

    async def embed_one(self, text: str) -> list[float]:
        return (await self.embed([text]))[0]


async def embedded_ahead(llm: LLMGateway | None, texts: Sequence[str]) -> LLMGateway | None:
    """`texts` embedded now, before the caller's first statement (a request's session
    keeps its pooled connection from then to its end), as a sealed gateway that answers
    from them and never calls the model (a failure is remembered: the caller degrades as
    with a down embedder). None without an embedder or texts: nothing to hand over."""
    if llm is None or not texts:
        return None
    cached = QueryEmbeddings(llm)
    try:
        await cached.embed(texts)
    except LLMError:
        pass
    return cast(LLMGateway, cached.seal())
