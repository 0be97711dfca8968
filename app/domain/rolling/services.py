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
   stops the session's run (later chunks are not sent) and the session backs off: not
   retried before one interval, doubling per failure (at most
   ROLLING_SUMMARY_RETRY_MAX_SECONDS), and after ROLLING_SUMMARY_MAX_ATTEMPTS failures
   in a row it is parked until its next append. An unreachable model is not counted
   (the tick stops; the next one retries).

Finding the work: the append marks a session of a rolling profile
(`sessions.rolling_pending`); the job reads the marked sessions through a partial index
and clears the mark of a session it has brought up to date (unless an append came
meanwhile), of one it parks, and of one that is no longer in rolling mode.

Replicas: each chunk is one transaction holding the session's `rolling_summaries` row
`FOR UPDATE SKIP LOCKED`, and the cursor is read under that lock — a second worker
skips a session being summarised, and one that comes in between two chunks continues
from the committed cursor. No chunk is summarised twice.

The LLM calls themselves (the summary call, the noise filter's) and their prompts are
`RollingSummarizer`'s (summarizer.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import transaction
from app.domain.kernel.forgotten_repository import ForgottenRepository
from app.domain.kernel.hooks import DemotionHooks
from app.domain.kernel.profiles import ROLLING, Profiles
from app.domain.kernel.runtime import Runtime
from app.domain.rolling.repositories import TEMP_PREFIX, Candidate, Cursor, RollingRepository
from app.domain.rolling.summarizer import RollingProfile, RollingSummarizer
from app.domain.rolling.summary import SummaryParseError, TranscriptMessage, chunk_messages
from app.llm.errors import LLMUnavailableError
from app.llm.gateway import LLMError

log = structlog.get_logger()

SESSIONS_PER_TICK = 100
ROWS_PER_LOAD = 2000  # messages after the cursor read per chunk (a chunk needs far fewer)
MIN_RETRY_SECONDS = 60  # the backoff's first step when the job's interval is shorter


def retry_delay(attempts: int, settings: Settings) -> timedelta:
    """How long a session waits after its `attempts`-th failure in a row: one job
    interval, doubled per failure, at most ROLLING_SUMMARY_RETRY_MAX_SECONDS."""
    base = max(settings.rolling_summary_interval_seconds, MIN_RETRY_SECONDS)
    cap = settings.rolling_summary_retry_max_seconds
    return timedelta(seconds=min(cap, base * 2 ** min(max(attempts - 1, 0), 30)))


@dataclass
class SessionRun:
    session_id: uuid.UUID
    chunks: int = 0  # summary calls that succeeded
    cursor_only: bool = False
    skipped: bool = False  # another worker holds the session
    held: bool = False  # another worker took it over (at the start or between chunks)
    failed: str | None = None
    attempts: int = 0  # failures in a row, this run's included
    parked: bool = False  # failed ROLLING_SUMMARY_MAX_ATTEMPTS times: waits for an append
    unavailable: bool = False  # the model could not be reached (not counted)


async def summarise_session(
    factory: async_sessionmaker[AsyncSession],
    summarizer: RollingSummarizer,
    settings: Settings,
    user_id: str,
    session_id: uuid.UUID,
    profile: RollingProfile,
    hooks: DemotionHooks | None = None,
    now: datetime | None = None,
) -> SessionRun:
    """Bring one session's rolling summary up to date, chunk by chunk. Each chunk is also
    given to `hooks` (the raw-history index: docs/raw-history.md), so what rolling mode
    summarises is searchable verbatim, as what compression demotes is."""
    run = SessionRun(session_id)
    async with transaction(factory) as db:  # short: the row must exist to be locked
        await RollingRepository(db).ensure_row(user_id, session_id)
    job = _SessionJob(
        summarizer, settings, user_id, session_id, profile, hooks, run, now or datetime.now(UTC)
    )
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
    now: datetime  # the tick's time: a failure's next attempt is counted from it

    async def failed(self, repo: RollingRepository, attempts: int, exc: Exception) -> None:
        """Record a failed chunk: counted and backed off (`retry_delay`), parked after
        ROLLING_SUMMARY_MAX_ATTEMPTS; an unreachable model is not counted."""
        run, settings = self.run, self.settings
        run.failed = str(exc)[:300]
        run.unavailable = isinstance(exc, LLMUnavailableError)
        run.attempts = attempts if run.unavailable else attempts + 1
        run.parked = run.attempts >= settings.rolling_summary_max_attempts
        due = None
        if not (run.unavailable or run.parked):
            due = self.now + retry_delay(run.attempts, settings)
        await repo.fail(
            self.user_id,
            self.session_id,
            f"{type(exc).__name__}: {exc}",
            attempts=run.attempts,
            next_attempt_at=due,
        )
        log.warning(
            "rolling.chunk_failed",
            session_id=str(self.session_id),
            attempt=run.attempts,
            counted=not run.unavailable,
            next_attempt_at=due.isoformat() if due is not None else None,
            error=run.failed,
        )

    async def next_chunk(self, repo: RollingRepository) -> bool:
        """The next chunk after the locked row's cursor, summarised and saved; False
        when the run ends (nothing left, the row gone or held, a failure)."""
        user_id, session_id, run = self.user_id, self.session_id, self.run
        state = await repo.lock(user_id, session_id)
        if state is None:
            run.skipped = run.chunks == 0
            run.held = True
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
        kept, previous = chunk, state.summary
        if self.settings.rolling_summary_noise_filter:
            kept, previous = await self.summarizer.filter_noise(previous, chunk, self.profile)
        if kept:
            more = await self.summarise(repo, state.attempts, previous, kept, cursor)
        else:  # all noise: save the trimmed summary and move on
            await self.save(repo, previous, cursor)
            more = True
        # the chunk, noise included, goes to the raw-history index as compression's
        # demoted messages do (a failure is logged there, never raised here); after the
        # model calls: its writes hold the user's forget records in share mode, which a
        # forget must not wait on for a model's answer
        if self.hooks is not None and len(self.hooks):
            await self.hooks.run(repo.session, user_id, session_id, chunk, ())  # type: ignore[arg-type]
        return more

    async def save(
        self, repo: RollingRepository, summary: dict[str, Any] | None, cursor: Cursor
    ) -> None:
        """Save under the user's forget records (share-locked until the chunk commits): a
        text forgotten while the model wrote is stored as the marker (kernel/forgotten)."""
        forgotten = await ForgottenRepository(repo.session).guard(self.user_id)
        await repo.save(self.user_id, self.session_id, forgotten.redact_json(summary), cursor)

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
            await self.failed(repo, attempts, exc)
            return False
        await self.save(repo, summary, cursor)
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


def rolling_profiles(profiles: Profiles) -> dict[str, RollingProfile]:
    """The rolling profiles by id (an unknown id resolves to the default profile)."""
    by_id: dict[str, RollingProfile] = {}
    for pid in profiles.ids():
        p = profiles.get(pid)
        if p.context_mode == ROLLING:
            by_id[pid] = RollingProfile(id=pid, reply_lang=p.reply_lang, model=p.summary_model)
    return by_id


def is_rolling(candidate: Candidate, profiles: Profiles) -> bool:
    """Whether a marked session is still the job's: its profile in rolling mode (an
    unknown id: the default's), neither it nor the session `temp-…`."""
    return (
        profiles.get(candidate.profile_id).context_mode == ROLLING
        and not candidate.profile_id.startswith(TEMP_PREFIX)
        and not (candidate.name or "").startswith(TEMP_PREFIX)
    )


async def run_rolling_summaries(runtime: Runtime, now: datetime | None = None) -> TickReport:
    """The periodic job (BACKGROUND_JOBS). `now`: the tick's time (the backoff's clock)."""
    settings, profiles = runtime.settings, runtime.profiles
    now = now or datetime.now(UTC)
    report = TickReport()
    all_but, ids = profiles.rolling_marks
    if not all_but and not ids:
        return report  # no profile is rolling: the append marks no session
    async with transaction(runtime.session_factory) as db:
        todo = await RollingRepository(db).candidates(now, limit=SESSIONS_PER_TICK)
    summarizer = RollingSummarizer(runtime.llm, settings)
    by_id = rolling_profiles(profiles)
    default = by_id.get(profiles.get(None).id)
    for cand in todo:
        if not is_rolling(cand, profiles):  # a profile changed, a session renamed
            await _unmark(runtime, cand)
            continue
        profile = by_id.get(cand.profile_id) or default or RollingProfile(id=cand.profile_id)
        run = await summarise_session(
            runtime.session_factory,
            summarizer,
            settings,
            cand.user_id,
            cand.session_id,
            profile,
            runtime.demotion_hooks,
            now,
        )
        report.sessions += 1
        report.chunks += run.chunks
        report.failed += run.failed is not None
        report.skipped += run.skipped
        report.runs.append(run)
        if run.parked:
            await _unmark(runtime, cand)
            log.warning(
                "rolling.parked",
                session_id=str(cand.session_id),
                attempts=run.attempts,
                error=run.failed,
            )
        elif run.failed is None and not run.held:  # up to date
            await _unmark(runtime, cand)
        if run.unavailable:
            log.warning("rolling.model_unavailable", error=run.failed)
            break  # every session would fail alike: the next tick retries
    if report.chunks or report.failed:
        log.info(
            "rolling.tick",
            sessions=report.sessions,
            chunks=report.chunks,
            failed=report.failed,
            skipped=report.skipped,
        )
    return report


async def _unmark(runtime: Runtime, cand: Candidate) -> None:
    async with transaction(runtime.session_factory) as db:
        await RollingRepository(db).unmark(cand.user_id, cand.session_id, cand.last_active)
