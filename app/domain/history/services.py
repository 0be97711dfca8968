"""`chat_history`: keyword search over a session's whole history, semantic search over
its recent messages (embedded lazily, on search), the most recent messages."""

from __future__ import annotations

import uuid

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.history.repositories import HistoryRepository
from app.domain.history.search import (
    NEIGHBOUR_SPAN_AFTER,
    NEIGHBOUR_SPAN_BEFORE,
    HistoryHit,
    HistoryResult,
    HistoryRow,
    ToolCall,
    merge_keyword,
    pick_neighbours,
)
from app.domain.kernel.runtime import Runtime
from app.domain.kernel.terms import query_terms
from app.llm.gateway import LLMError, LLMGateway

log = structlog.get_logger()

# Cosine distance under which a recent message counts as a semantic match.
SEMANTIC_MAX_DISTANCE = 0.6
EMBED_TEXT_CHARS = 4000  # of one message, for its vector
EMBED_BATCH = 64  # messages per gateway call (the gateway splits further)
SUBSTRING_MAX_CHARS = 200


class HistorySearch:
    def __init__(
        self,
        db: AsyncSession,
        llm: LLMGateway | None,
        settings: Settings,
        primary: AsyncSession | None = None,
    ) -> None:
        """`db` serves the reads; `primary` (default `db`) the semantic mode, which
        stores the embeddings it lacks."""
        self.repo = HistoryRepository(db)
        self.write_repo = HistoryRepository(primary) if primary is not None else self.repo
        self.llm = llm
        self.settings = settings

    @classmethod
    def of(
        cls,
        db: AsyncSession,
        runtime: Runtime,
        primary: AsyncSession | None = None,
        *,
        llm: LLMGateway | None = None,
    ) -> HistorySearch:
        """The search reading `db`; `primary` (default `db`) takes the semantic mode's
        writes when `db` is a read replica's. `llm` (default the runtime's): the gateway
        the semantic mode embeds through."""
        return cls(db, llm or runtime.llm, runtime.settings, primary)

    def embed_through(self, llm: LLMGateway) -> None:
        """The semantic mode embeds through `llm` from now on (the sealed gateway of the
        embeddings made ahead, with no connection held)."""
        self.llm = llm

    async def texts_ahead(self, user_id: str, session_id: uuid.UUID, call: ToolCall) -> list[str]:
        """What the semantic mode of `call` will embed (the recent messages without a
        vector, then the query), read only: the turn loop embeds them first, with no
        connection held, and runs the search after in its transaction. Nothing for a
        call that embeds nothing."""
        window = self.settings.history_embed_recent
        if call.mode != "search" or call.match != "semantic" or not call.query or window <= 0:
            return []
        floor = max(0, await self.repo.next_seq(user_id, session_id) - window)
        todo = await self.repo.unembedded(user_id, session_id, floor, window)
        return [*(content[:EMBED_TEXT_CHARS] for _, content in todo), call.query]

    async def run(self, user_id: str, session_id: uuid.UUID, call: ToolCall) -> HistoryResult:
        """The tool call on a session the caller may see (checked by the caller)."""
        if call.mode == "recent":
            rows = await self.repo.recent(user_id, session_id, call.limit)
            return HistoryResult(
                mode="recent",
                match=None,
                query="",
                limit=call.limit,
                hits=[HistoryHit(row=r, kind="recent") for r in rows],
            )
        if not call.query:
            return HistoryResult(
                mode="search",
                match=call.match,
                query="",
                limit=call.limit,
                fallback="empty query: pass `query`, or use mode=recent",
            )
        if call.match == "semantic":
            result = await self.semantic(user_id, session_id, call)
            if not isinstance(result, str):
                return result
            keyword = await self.keyword(user_id, session_id, call)
            keyword.fallback = f"semantic search unavailable ({result}); keyword results"
            return keyword
        return await self.keyword(user_id, session_id, call)

    async def keyword(self, user_id: str, session_id: uuid.UUID, call: ToolCall) -> HistoryResult:
        """Every word (websearch syntax) — or, when no message has them all, any of the
        words — then the literal substring to fill up to `limit`."""
        found = await self.repo.fulltext(user_id, session_id, call.query, call.limit)
        terms = query_terms(call.query)
        if not found and len(terms) > 1:  # no message has them all
            found = await self.repo.fulltext(
                user_id, session_id, call.query, call.limit, any_of=terms
            )
        substring: list[HistoryRow] = []
        if len(found) < call.limit and len(call.query) <= SUBSTRING_MAX_CHARS:
            substring = await self.repo.substring(
                user_id,
                session_id,
                call.query,
                call.limit - len(found),
                exclude=[r.sequence_number for r in found],
            )
        return HistoryResult(
            mode="search",
            match="keyword",
            query=call.query,
            limit=call.limit,
            hits=merge_keyword(found, substring, call.limit),
        )

    async def semantic(
        self, user_id: str, session_id: uuid.UUID, call: ToolCall
    ) -> HistoryResult | str:
        """Vector search over the newest HISTORY_EMBED_RECENT messages; the reason
        (a string) when it cannot run (disabled, embeddings failing) or finds nothing
        close enough — the caller then answers with keyword search."""
        window = self.settings.history_embed_recent
        if window <= 0 or self.llm is None:
            return "disabled"
        floor = max(0, await self.write_repo.next_seq(user_id, session_id) - window)
        try:
            await self.ensure_embeddings(user_id, session_id, floor, window)
            vector = await self.llm.embed_one(call.query)
        except LLMError as exc:
            log.info("history.semantic_unavailable", error=str(exc)[:200])
            return "embeddings unavailable"
        nearest = await self.write_repo.nearest(
            user_id, session_id, floor, vector, call.limit, SEMANTIC_MAX_DISTANCE
        )
        if not nearest:
            return "no recent message is close enough"
        centres = [seq for seq, _ in nearest]
        rows = await self.write_repo.around(
            user_id, session_id, centres, NEIGHBOUR_SPAN_BEFORE, NEIGHBOUR_SPAN_AFTER
        )
        by_seq = {r.sequence_number: r for r in rows}
        hits = []
        for seq, distance in nearest:
            row = by_seq.get(seq)
            if row is None:  # the message vanished (session being deleted)
                continue
            window_rows = [
                r
                for r in rows
                if seq - NEIGHBOUR_SPAN_BEFORE <= r.sequence_number <= seq + NEIGHBOUR_SPAN_AFTER
            ]
            before, after = pick_neighbours(seq, window_rows)
            hits.append(
                HistoryHit(
                    row=row,
                    kind="semantic",
                    score=round(1.0 - distance, 4),
                    before=before,
                    after=after,
                )
            )
        return HistoryResult(
            mode="search", match="semantic", query=call.query, limit=call.limit, hits=hits
        )

    async def ensure_embeddings(
        self, user_id: str, session_id: uuid.UUID, floor: int, window: int
    ) -> int:
        """Embed the recent messages that have no vector yet, in batches; drop vectors
        that fell out of the window. Batches already stored stay stored when a later one
        fails (the next search continues from there)."""
        assert self.llm is not None
        await self.write_repo.drop_embeddings_before(user_id, session_id, floor)
        todo = await self.write_repo.unembedded(user_id, session_id, floor, window)
        done = 0
        for start in range(0, len(todo), EMBED_BATCH):
            batch = todo[start : start + EMBED_BATCH]
            vectors = await self.llm.embed([content[:EMBED_TEXT_CHARS] for _, content in batch])
            await self.write_repo.add_embeddings(
                user_id,
                session_id,
                [(seq, vec) for (seq, _), vec in zip(batch, vectors, strict=True)],
            )
            done += len(batch)
        if done:
            log.info("history.embedded", session_id=str(session_id), messages=done)
        return done
