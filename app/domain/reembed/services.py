"""`python -m app.cli reembed` (`make reembed`): vectors for the configured embedder.

After a change of embedding provider or model (another dimension), and whenever rows were
stored without a vector (the embedder was down):

1. probe the embedder (nothing is changed when it does not answer with the configured
   dimension);
2. when the database's vector columns have another dimension than the configured one
   (`settings.vector_dim`), change them to `vector(N)`: their values become NULL, the HNSW
   indexes are dropped and re-created (one transaction, serialised between runs);
3. embed every live fact (`"{category} {key}: {value}"`; facts merged into another are
   hidden and skipped) whose vector is NULL and every raw chunk without segment vectors
   (its segments into `memory_chunk_vectors`), in batches, one transaction each. Claims use `FOR UPDATE SKIP LOCKED`, so two runs at once
   share the work, and an interrupted run is resumed by running it again.

Progress goes to stderr, the final count to stdout. An embedding failure stops the run
(exit 1); what was committed stays.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.engine import transaction
from app.domain.raw_history.indexer import segment_texts, segment_vectors
from app.domain.reembed.repositories import Claimed, ColumnChange, EmbeddingRepository
from app.llm.gateway import LLMError, LLMGateway

log = structlog.get_logger()

Progress = Callable[[str], None]


class ReembedError(Exception):
    """The run could not start (the embedder does not answer); nothing was changed."""


@dataclass
class ReembedResult:
    dim: int
    changes: list[ColumnChange] = field(default_factory=list)
    embedded: dict[str, int] = field(default_factory=dict)
    remaining: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None

    @property
    def total_embedded(self) -> int:
        return sum(self.embedded.values())

    def summary(self) -> str:
        parts = [f"{n} {table}" for table, n in self.embedded.items()]
        left = sum(self.remaining.values())
        rate = self.total_embedded / self.seconds if self.seconds > 0 else 0.0
        return (
            f"reembed: vector({self.dim}); embedded {self.total_embedded} row(s) "
            f"({', '.join(parts) or 'none'}) in {self.seconds:.1f}s ({rate:.1f}/s); "
            f"{left} still without a vector"
        )


async def reembed(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    *,
    batch_size: int = 32,
    limit: int | None = None,
    progress: Progress | None = None,
    probe_timeout: float = 60.0,
) -> ReembedResult:
    """Align the vector columns to `llm.embed_dim` and fill the missing vectors (at most
    `limit` rows when given). Raises ReembedError when the embedder is not usable."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    say = progress or (lambda _: None)
    started = time.perf_counter()
    dim = llm.embed_dim
    await _probe(llm, probe_timeout)
    result = ReembedResult(dim=dim)
    result.changes = await _align(factory, dim, say)
    done = 0
    for table in EmbeddingRepository.TABLES:
        count = await _embed_table(factory, llm, table, result, batch_size, done, limit, say)
        result.embedded[table] = count
        done += count
        if result.error is not None:
            break
    async with transaction(factory) as db:
        repo = EmbeddingRepository(db)
        for table in EmbeddingRepository.TABLES:
            result.remaining[table] = await repo.count_pending(table)
    result.seconds = time.perf_counter() - started
    log.info(
        "memory.reembed_done",
        dim=dim,
        embedded=result.embedded,
        remaining=result.remaining,
        seconds=round(result.seconds, 1),
    )
    return result


async def _probe(llm: LLMGateway, timeout: float) -> None:  # noqa: ASYNC109
    """Step 1: ReembedError unless the embedder answers with its configured dimension."""
    health = await llm.check_embedding(timeout=timeout)
    if not health.ok:
        raise ReembedError(
            f"the {llm.embed_provider} embedding model {health.model!r} is not usable "
            f"({health.error or 'unreachable'}); nothing was changed"
        )


async def _align(
    factory: async_sessionmaker[AsyncSession], dim: int, say: Progress
) -> list[ColumnChange]:
    """Step 2: the vector columns to `vector(dim)`, each change reported and logged."""
    async with transaction(factory) as db:
        changes = await EmbeddingRepository(db).align_dimensions(dim)
    for change in changes:
        what = (
            f"{change.deleted_rows} row(s) deleted"
            if change.deleted_rows
            else f"{change.cleared_rows} vector(s) cleared"
        )
        say(
            f"{change.table}.{change.column}: vector({change.old_dim}) -> vector({dim}), "
            f"{what}, index(es) re-created: {', '.join(change.indexes) or 'none'}"
        )
        log.info(
            "memory.reembed_column_changed",
            table=change.table,
            column=change.column,
            old_dim=change.old_dim,
            new_dim=dim,
            deleted=change.deleted_rows,
            cleared=change.cleared_rows,
        )
    return changes


async def _embed_table(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    table: str,
    result: ReembedResult,
    batch_size: int,
    done: int,
    limit: int | None,
    say: Progress,
) -> int:
    """Step 3 for one table: batches until none is left (or `limit` rows in all, `done`
    of them before this table); how many rows it embedded. An embedding failure ends it
    with `result.error` set."""
    async with transaction(factory) as db:
        pending = await EmbeddingRepository(db).count_pending(table)
    count = 0
    after: Any = None
    table_started = time.perf_counter()
    while limit is None or done + count < limit:
        want = batch_size if limit is None else min(batch_size, limit - done - count)
        try:
            rows = await _embed_batch(factory, llm, table, after, want)
        except LLMError as exc:
            result.error = f"{type(exc).__name__}: {exc}"
            log.error("memory.reembed_failed", table=table, embedded=done + count, error=str(exc))
            break
        if not rows:
            if after is None:
                break  # nothing left that no other run holds
            after = None  # one more pass from the start: rows skipped while locked
            continue
        after = rows[-1].id
        count += len(rows)
        rate = count / max(time.perf_counter() - table_started, 1e-9)
        say(f"{table}: {count}/{max(pending, count)} embedded ({rate:.1f}/s)")
    return count


async def _embed_batch(
    factory: async_sessionmaker[AsyncSession],
    llm: LLMGateway,
    table: str,
    after: Any,
    want: int,
) -> list[Claimed]:
    """One transaction: claim up to `want` rows of `table` past `after`, embed and store
    their vectors; the rows claimed."""
    async with transaction(factory) as db:
        repo = EmbeddingRepository(db)
        rows = await repo.claim(table, after, want)
        if rows and table == "memory_chunks":
            await _embed_chunks(repo, llm, rows)
        elif rows:
            vectors = await llm.embed([row.text for row in rows])
            await repo.set_fact_embeddings(
                [(row.user_id, row.id, vec) for row, vec in zip(rows, vectors, strict=True)]
            )
    return rows


async def _embed_chunks(repo: EmbeddingRepository, llm: LLMGateway, rows: list[Claimed]) -> None:
    """A raw chunk gets its segments' vectors (see `memory_chunk_vectors`)."""
    texts, spans = segment_texts([row.text for row in rows])
    segments = segment_vectors(spans, await llm.embed(texts))
    await repo.replace_chunk_segments(
        [(row.user_id, row.id, segs) for row, segs in zip(rows, segments, strict=True)]
    )


async def dimension_mismatch(factory: async_sessionmaker[AsyncSession], dim: int) -> str | None:
    """A message naming the vector columns that do not have `dim` dimensions, or None."""
    async with transaction(factory) as db:
        wrong = await EmbeddingRepository(db).mismatched_columns(dim)
    if not wrong:
        return None
    found = ", ".join(f"{c.table}.{c.column} vector({c.dim})" for c in wrong)
    return (
        f"the database's vector columns ({found}) do not have the {dim} dimensions of the "
        "configured embedder (EMBEDDING_PROVIDER / EMBEDDING_DIM): run `make reembed` "
        "(python -m app.cli reembed) to convert them and re-embed, or restore the previous "
        "EMBEDDING_PROVIDER / EMBEDDING_DIM"
    )
