"""The rolling-summary job: incremental, chunked, safe with several replicas.

Every ROLLING_SUMMARY_INTERVAL_SECONDS, sessions whose profile has
`context_mode: rolling` and whose history is newer than their cursor (sessions and
profiles named `temp-…` excepted) are summarised further:

1. a session with a summary but no cursor only gets the cursor set to its newest
   message — no LLM call; a cursor that is only a time (`cursor_at`, from an older
   release or export) becomes the newest message at or before that time;
2. the messages after the cursor (by sequence number: clients set message times, so a
   time cannot be the cursor) are cut into chunks (≤ ROLLING_SUMMARY_CHUNK_CHARS,
   never ending on a user message);
3. optionally (ROLLING_SUMMARY_NOISE_FILTER) one decision call per chunk drops noise
   exchanges (confidence ≥ 0.7) and the entries of the previous summary they overturn;
   when it fails everything is kept; when nothing is left, the trimmed summary and the
   cursor are saved without a summary call;
4. one LLM call per chunk, with the previous summary in the prompt;
5. summary and cursor are committed after each chunk; a failed or unparseable chunk
   stops the session's run (later chunks are not sent) and the next tick retries it.

Replicas: each chunk is one transaction holding the session's `rolling_summaries` row
`FOR UPDATE SKIP LOCKED`, and the cursor is read under that lock — a second worker
skips a session being summarised, and one that comes in between two chunks continues
from the committed cursor. No chunk is summarised twice.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import transaction
from app.domain.kernel.hooks import DemotionHooks
from app.domain.kernel.profiles import Profiles
from app.domain.kernel.runtime import Runtime
from app.domain.rolling.repositories import Cursor, RollingRepository
from app.domain.rolling.summary import (
    EMPTY_SUMMARY,
    SummaryParseError,
    TranscriptMessage,
    chunk_messages,
    exchanges,
    normalize_summary,
    numbered_exchanges,
    parse_noise,
    parse_summary,
    render_transcript,
)
from app.llm.gateway import LLMError, LLMGateway

log = structlog.get_logger()

PROMPTS = Path(__file__).resolve().parents[2] / "llm" / "prompts"
SUMMARY_PROMPT = PROMPTS / "rolling_summary.txt"
NOISE_PROMPT = PROMPTS / "rolling_noise.txt"
SESSIONS_PER_TICK = 100
ROWS_PER_LOAD = 2000  # messages after the cursor read per chunk (a chunk needs far fewer)
SUMMARY_MAX_TOKENS = 2048
ROLLING = "rolling"


def reply_lang_rule(reply_lang: str) -> str:
    lang = (reply_lang or "auto").strip()
    if lang.lower() == "auto":
        return (
            "Write the text of every field in the language the conversation is mostly "
            "in; Chinese always as Traditional Chinese (Taiwan). The markers stay English."
        )
    return f"Write the text of every field in {lang}. The markers stay English."


def summary_prompt(previous: dict[str, Any] | None, reply_lang: str) -> str:
    doc = normalize_summary(previous) if previous else EMPTY_SUMMARY
    return (
        SUMMARY_PROMPT.read_text(encoding="utf-8")
        .replace("{{SUMMARY}}", json.dumps(doc, ensure_ascii=False, indent=1))
        .replace("{{REPLY_LANG}}", reply_lang_rule(reply_lang))
    )


def noise_prompt(previous: dict[str, Any] | None) -> str:
    doc = normalize_summary(previous) if previous else EMPTY_SUMMARY
    numbered = {
        "key_decisions": {str(i): d for i, d in enumerate(doc["key_decisions"], 1)},
        "past_discussions": {str(i): p for i, p in enumerate(doc["past_discussions"], 1)},
        "current_discussion": doc["current_discussion"],
    }
    return NOISE_PROMPT.read_text(encoding="utf-8").replace(
        "{{SUMMARY}}", json.dumps(numbered, ensure_ascii=False, indent=1)
    )


@dataclass(frozen=True)
class RollingProfile:
    """What the job needs of a profile."""

    id: str
    reply_lang: str = "auto"
    model: str | None = None  # None = the gateway's chat model


class RollingSummarizer:
    """The LLM calls of the rolling summary (through the gateway)."""

    def __init__(self, llm: LLMGateway, settings: Settings) -> None:
        self.llm = llm
        self.settings = settings

    async def summarise(
        self,
        previous: dict[str, Any] | None,
        msgs: list[TranscriptMessage],
        profile: RollingProfile,
    ) -> dict[str, Any]:
        """One call: previous summary + new messages → the new summary. Raises LLMError
        or SummaryParseError."""
        result = await self.llm.chat(
            [
                {"role": "system", "content": summary_prompt(previous, profile.reply_lang)},
                {"role": "user", "content": "New messages:\n\n" + render_transcript(msgs)},
            ],
            model=profile.model,
            temperature=0.2,
            max_tokens=SUMMARY_MAX_TOKENS,
            think=False,
        )
        return parse_summary(result.content)

    async def filter_noise(
        self,
        previous: dict[str, Any] | None,
        msgs: list[TranscriptMessage],
        profile: RollingProfile,
    ) -> tuple[list[TranscriptMessage], dict[str, Any] | None]:
        """(messages kept, previous summary trimmed). Any failure keeps everything."""
        groups = exchanges(msgs)
        try:
            result = await self.llm.chat(
                [
                    {"role": "system", "content": noise_prompt(previous)},
                    {"role": "user", "content": numbered_exchanges(groups)},
                ],
                model=profile.model,
                temperature=0.0,
                max_tokens=512,
                think=False,
            )
            drop, trimmed = parse_noise(result.content, len(groups), normalize_summary(previous))
        except (LLMError, SummaryParseError) as exc:
            log.info("rolling.noise_filter_failed", error=str(exc)[:200])
            return msgs, previous
        kept = [m for n, g in enumerate(groups, 1) if n not in drop for m in g]
        return kept, (trimmed if previous is not None else None)


@dataclass
class SessionRun:
    session_id: uuid.UUID
    chunks: int = 0  # summary calls that succeeded
    cursor_only: bool = False
    skipped: bool = False  # another worker holds the session
    failed: str | None = None


async def summarise_session(
    factory: async_sessionmaker[AsyncSession],
    summarizer: RollingSummarizer,
    settings: Settings,
    user_id: str,
    session_id: uuid.UUID,
    profile: RollingProfile,
    hooks: DemotionHooks | None = None,
) -> SessionRun:
    """Bring one session's rolling summary up to date, chunk by chunk. Each chunk is also
    given to `hooks` (the raw-history index: docs/raw-history.md), so what rolling mode
    summarises is searchable verbatim, as what compression demotes is."""
    run = SessionRun(session_id)
    async with transaction(factory) as db:  # short: the row must exist to be locked
        await RollingRepository(db).ensure_row(user_id, session_id)
    job = _SessionJob(summarizer, settings, user_id, session_id, profile, hooks, run)
    while True:
        async with transaction(factory) as db:
            if not await job.next_chunk(RollingRepository(db)):
                return run


@dataclass(frozen=True)
class _SessionJob:
    """One `summarise_session` run: a chunk per transaction, its outcome in `run`."""

    summarizer: RollingSummarizer
    settings: Settings
    user_id: str
    session_id: uuid.UUID
    profile: RollingProfile
    hooks: DemotionHooks | None
    run: SessionRun

    async def next_chunk(self, repo: RollingRepository) -> bool:
        """The next chunk after the locked row's cursor, summarised and saved; False
        when the run ends (nothing left, the row gone or held, a failure)."""
        user_id, session_id, run = self.user_id, self.session_id, self.run
        state = await repo.lock(user_id, session_id)
        if state is None:
            run.skipped = run.chunks == 0
            return False
        cursor_seq = state.cursor_seq
        if cursor_seq is None and state.cursor_at is not None:  # a time cursor: convert it
            found = await repo.cursor_at_time(user_id, session_id, state.cursor_at)
            cursor_seq = found.seq if found is not None else -1
        elif cursor_seq is None and state.summary is not None:
            latest = await repo.latest_message(user_id, session_id)
            if latest is not None:
                await repo.set_cursor(user_id, session_id, latest)
            else:
                await repo.touch(user_id, session_id)
            run.cursor_only = True
            return False
        msgs = await repo.messages_after(user_id, session_id, cursor_seq, ROWS_PER_LOAD)
        chunks = chunk_messages(msgs, self.settings.rolling_summary_chunk_chars)
        if not chunks:
            if run.chunks == 0:
                await repo.touch(user_id, session_id)
            return False
        chunk = chunks[0]
        cursor = Cursor(chunk[-1].sequence_number, chunk[-1].created_at)
        # the chunk, noise included, goes to the raw-history index as compression's
        # demoted messages do (a failure is logged there, never raised here)
        if self.hooks is not None and len(self.hooks):
            await self.hooks.run(repo.session, user_id, session_id, chunk, ())  # type: ignore[arg-type]
        kept, previous = chunk, state.summary
        if self.settings.rolling_summary_noise_filter:
            kept, previous = await self.summarizer.filter_noise(previous, chunk, self.profile)
            if not kept:  # all noise: save the trimmed summary and move on
                await repo.save(user_id, session_id, previous, cursor)
                return True
        return await self.summarise(repo, state.attempts, previous, kept, cursor)

    async def summarise(
        self,
        repo: RollingRepository,
        attempts: int,
        previous: dict[str, Any] | None,
        kept: list[TranscriptMessage],
        cursor: Cursor,
    ) -> bool:
        """`kept` folded into `previous` and saved with the new cursor; on a failure the
        row records it and the run ends (False)."""
        try:
            summary = await self.summarizer.summarise(previous, kept, self.profile)
        except (LLMError, SummaryParseError) as exc:
            await repo.fail(self.user_id, self.session_id, f"{type(exc).__name__}: {exc}")
            self.run.failed = str(exc)[:300]
            log.warning(
                "rolling.chunk_failed",
                session_id=str(self.session_id),
                attempt=attempts + 1,
                error=self.run.failed,
            )
            return False
        await repo.save(self.user_id, self.session_id, summary, cursor)
        self.run.chunks += 1
        log.info(
            "rolling.chunk_summarised",
            session_id=str(self.session_id),
            messages=len(kept),
            decisions=len(summary["key_decisions"]),
        )
        return True


@dataclass
class TickReport:
    sessions: int = 0
    chunks: int = 0
    failed: int = 0
    skipped: int = 0
    runs: list[SessionRun] = field(default_factory=list)


def rolling_profiles(
    profiles: Profiles,
) -> tuple[list[str] | None, list[str], dict[str, RollingProfile]]:
    """(include, exclude, by id) for the candidate query. When the default profile is
    rolling, every unknown profile id is too (it resolves to default)."""
    include: list[str] = []
    exclude: list[str] = []
    by_id: dict[str, RollingProfile] = {}
    for pid in profiles.ids():
        p = profiles.get(pid)
        if p.context_mode == ROLLING:
            include.append(pid)
            by_id[pid] = RollingProfile(id=pid, reply_lang=p.reply_lang, model=p.summary_model)
        else:
            exclude.append(pid)
    default = profiles.get(None)
    if default.context_mode == ROLLING:
        return None, exclude, by_id
    return include, [], by_id


async def run_rolling_summaries(runtime: Runtime) -> TickReport:
    """The periodic job (BACKGROUND_JOBS)."""
    settings, profiles = runtime.settings, runtime.profiles
    include, exclude, by_id = rolling_profiles(profiles)
    report = TickReport()
    if include is not None and not include:
        return report
    async with transaction(runtime.session_factory) as db:
        todo = await RollingRepository(db).candidates(
            include=include, exclude=exclude, limit=SESSIONS_PER_TICK
        )
    summarizer = RollingSummarizer(runtime.llm, settings)
    default = by_id.get(profiles.get(None).id)
    for session_id, user_id, profile_id in todo:
        profile = by_id.get(profile_id) or default or RollingProfile(id=profile_id)
        run = await summarise_session(
            runtime.session_factory,
            summarizer,
            settings,
            user_id,
            session_id,
            profile,
            runtime.demotion_hooks,
        )
        report.sessions += 1
        report.chunks += run.chunks
        report.failed += run.failed is not None
        report.skipped += run.skipped
        report.runs.append(run)
    if report.chunks or report.failed:
        log.info(
            "rolling.tick",
            sessions=report.sessions,
            chunks=report.chunks,
            failed=report.failed,
            skipped=report.skipped,
        )
    return report
