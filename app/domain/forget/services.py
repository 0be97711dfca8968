"""Forget a text: every occurrence in everything the user owns becomes `[forgotten]`, in
the request's one transaction (flushed here, committed by the request handler).

Stores and what happens to them (docs/memory.md, "Forgetting a text"): messages hot and
archived (content, thinking, tool calls, metadata; their chat_history vectors dropped),
raw chunks (content, breadcrumbs, hash; segment vectors dropped, then embedded anew when
the embedder answers), facts holding it
(deleted, with the rows hidden behind them), the memory summary, rolling summaries,
scratchpad sections, error memory (re-embedded, or left without a vector), session names
and planning logs, the background jobs' failure notes (`last_error`). Session files holding it are listed. The log and metrics carry a
hash of the text, never the text."""

from __future__ import annotations

import anyio
import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.domain.error_memory.services import embed_text
from app.domain.forget.memory_repository import ErrorChange, ForgetMemoryRepository
from app.domain.forget.redact import Needle, check_text, text_hash
from app.domain.forget.repositories import ForgetSessionRepository
from app.domain.forget.scan import files_holding
from app.domain.forget.schemas import STORES, ForgetOut, ForgottenFile
from app.domain.kernel.runtime import Runtime
from app.domain.raw_history.indexer import embed_chunks
from app.lib.errors import NotFound
from app.lib.metrics import FORGETS, FORGOTTEN_ROWS
from app.llm.gateway import LLMError, LLMGateway

log = structlog.get_logger()


class ForgetService:
    def __init__(self, db: AsyncSession, llm: LLMGateway | None, settings: Settings) -> None:
        self.db = db
        self.llm = llm
        self.settings = settings
        self.sessions = ForgetSessionRepository(db)
        self.memory = ForgetMemoryRepository(db)

    @classmethod
    def of(cls, db: AsyncSession, runtime: Runtime) -> ForgetService:
        """The service on `db`, embedding (redacted error entries) through the runtime's gateway."""
        return cls(db, runtime.llm, runtime.settings)

    async def forget_for_admin(
        self, user_id: str, raw: str, *, dry_run: bool, actor: str
    ) -> ForgetOut:
        if not await self.memory.user_exists(user_id):
            raise NotFound(f"user_id: no user {user_id!r}")
        return await self.forget(user_id, raw, dry_run=dry_run, via="admin", actor=actor)

    async def forget(
        self,
        user_id: str,
        raw: str,
        *,
        dry_run: bool = False,
        via: str = "api",
        actor: str | None = None,
    ) -> ForgetOut:
        """Redact `raw` (checked: `redact.check_text`) from everything `user_id` owns;
        `via` and `actor` (who asked, when not the user) are logged."""
        text = check_text(raw)
        needle = Needle(text)
        write = not dry_run
        session_ids = await self.sessions.session_ids(user_id, lock=write)
        changed = dict.fromkeys(STORES, 0)

        for table, store in (
            ("session_messages", "messages"),
            ("session_messages_archive", "archived_messages"),
        ):
            messages = await self.sessions.find_messages(table, user_id, needle)
            changed[store] = len(messages)
            if write:
                await self.sessions.write_messages(table, user_id, messages)
                await self.sessions.drop_message_vectors(user_id, messages)

        chunks = await self.memory.find_chunks(user_id, needle)
        facts = await self.memory.find_facts(user_id, needle)
        summary = await self.memory.find_summary(user_id, needle)
        rolling = await self.sessions.find_rolling(user_id, needle)
        sketches = await self.memory.find_sketches(user_id, needle)
        errors = await self.memory.find_errors(user_id, needle)
        sessions = await self.sessions.find_sessions(user_id, needle)
        job_errors = await self.sessions.find_job_errors(user_id, needle)
        changed.update(
            chunks=len(chunks),
            facts=len(facts),
            memory_summary=int(summary is not None),
            rolling_summaries=len(rolling),
            sketches=len(sketches),
            errors=len(errors),
            sessions=len(sessions),
            job_errors=len(job_errors),
        )
        if write:
            await self.memory.write_chunks(user_id, chunks)
            if self.llm is not None and chunks:  # else (or failing): the background embedder
                segments = await embed_chunks(self.llm, [c.content for c in chunks])
                await self.memory.write_segments(user_id, chunks, segments)
            await self.memory.delete_facts(user_id, facts)
            await self.memory.write_summary(user_id, summary)
            await self.sessions.write_rolling(user_id, rolling)
            await self.memory.write_sketches(user_id, sketches)
            await self.memory.write_errors(user_id, errors, await self._embed(errors))
            await self.sessions.write_sessions(user_id, sessions)
            await self.sessions.write_job_errors(user_id, job_errors)
            await self.db.flush()

        found = await anyio.to_thread.run_sync(files_holding, self.settings, session_ids, needle)
        out = ForgetOut(
            dry_run=dry_run,
            changed=changed,
            files=[ForgottenFile(f.session_id, f.path) for f in found],
            total=sum(changed.values()),
        )
        self._record(user_id, text, out, via, actor or user_id)
        return out

    async def _embed(self, errors: list[ErrorChange]) -> list[list[float] | None]:
        """New vectors of the redacted error entries; without an embedder, None (the
        entry is found by its words, as one written while the embedder was down)."""
        if not errors:
            return []
        if self.llm is not None:
            try:
                return list(
                    await self.llm.embed([embed_text(e.tool, e.error_text) for e in errors])
                )
            except LLMError as exc:
                log.info("memory.forget_embedding_unavailable", error=str(exc)[:200])
        return [None] * len(errors)

    @staticmethod
    def _record(user_id: str, text: str, out: ForgetOut, via: str, actor: str) -> None:
        FORGETS.labels("true" if out.dry_run else "false").inc()
        if not out.dry_run:
            for store, n in out.changed.items():
                if n:
                    FORGOTTEN_ROWS.labels(store).inc(n)
        log.info(
            "memory.forgotten",
            user_id=user_id,
            actor=actor,
            text_sha256=text_hash(text),
            dry_run=out.dry_run,
            via=via,
            total=out.total,
            files=len(out.files),
            **{k: v for k, v in out.changed.items() if v},
        )
