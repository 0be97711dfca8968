"""Automatic extraction: learn durable facts about users from their stale sessions.

A session is *stale* when it has been idle for `MEMORY_EXTRACTION_STALE_MINUTES` and is
pending: an append marked it (`sessions.memory_pending`, in the append's own UPDATE of
the session row) once it held a user message, and no extraction read it since. One pass:

1. lists the quietest pending stale sessions through the partial index
   `ix_sessions_memory_pending` (work found by an index, not by a scan of every
   session), then, one session at a time, claims the next with `SELECT … FOR UPDATE
   SKIP LOCKED` on its `session_memory_state` row — the claim, the LLM calls, the fact
   writes and the mark all happen in that one transaction, so several workers
   (replicas) never process the same session twice and a crash leaves the session
   pending;
2. renders the transcript, asks the LLM for facts (prompt `extract_facts.txt`), parses
   the reply (`transcript.parse_facts`: lenient about prose and fences around the JSON,
   strict about the facts: all of a reply's facts or none); an unusable reply
   (`not_json`, `cut_off`, `invalid_item`) is asked again with a note on what was
   wrong, as is an empty list for a transcript in which the user states a fact about
   themselves ("I live in …": `states_facts`) — `EXTRACTION_ATTEMPTS` calls in all;
   an empty list on the last call is then accepted, counted (`empty_accepted`) and
   noted in the session's `last_error`;
3. upserts every fact with `dedupe=True` (confidence by source), embeddings in one batch;
4. marks the session extracted and clears its pending mark (unless it was active again
   meanwhile: then it stays pending); the claim commits;
5. regenerates the user's summary from all their live facts (prompt
   `summarize_facts.txt`; on failure a deterministic bullet list), its model call with
   no transaction open.

A fact holding a text the user forgot while the model read the transcript is not saved,
and the summary is written with such a text redacted (the forget records,
app/domain/kernel/forgotten.py, checked in the writing transaction).

When every attempt fails, nothing of the session's replies is stored (the claim's
transaction writes no fact before the reply is taken whole), the session's `attempts`
grows and `last_error` says why (`reason: …`), `navi_memory_extraction_failures_total
{reason}` counts it, and the session stays pending: the next pass tries it again, until
`MEMORY_EXTRACTION_MAX_ATTEMPTS` failures in a row: then it is *parked* (its mark
cleared, `memory.extraction_parked` logged, `navi_memory_extraction_parked_total`) and
costs no more model calls until its next append marks it again. The console's system
page lists such sessions (`ExtractionRepository.troubled`). A model call that timed out
or broke off mid-reply (`timeout`) or that the server answered with an error
(`model_error`) counts against the session; an unreachable server or a missing model
(`unavailable`) does not. An unreachable model, a timeout or a server error (5xx)
ends the pass early (the model is struggling: the next pass tries again). Each pass ends by purging facts that expired more than
`PURGE_GRACE` ago.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.engine import transaction
from app.domain.facts.extraction_repository import ExtractionRepository
from app.domain.facts.render import fact_lines, fallback_summary
from app.domain.facts.repositories import FactRepository, SummaryRepository
from app.domain.facts.schemas import MAX_SUMMARY
from app.domain.facts.services import FactService, embedding_text, normalise_name
from app.domain.facts.transcript import (
    ExtractedFact,
    ReplyFormatError,
    clip_middle,
    parse_facts,
    render_transcript,
    said_at,
    states_facts,
    strip_think,
)
from app.domain.kernel.forgotten_repository import ForgottenRepository
from app.domain.kernel.jobs import unless_running
from app.domain.kernel.runtime import Runtime
from app.lib.errors import Unprocessable
from app.lib.metrics import EXTRACTION_FAILURES, EXTRACTION_PARKED, EXTRACTION_REPLIES
from app.llm.gateway import LLMError, LLMGateway, LLMUnavailableError

log = structlog.get_logger()

PROMPTS = Path(__file__).resolve().parents[2] / "llm" / "prompts"
EXTRACTION_ATTEMPTS = 2
SUMMARY_FACTS = 200
MAX_SESSIONS_PER_PASS = 50
PURGE_GRACE = timedelta(days=7)


@cache
def prompt(name: str) -> str:
    return (PROMPTS / name).read_text(encoding="utf-8").strip()


@dataclass
class PassResult:
    extracted: int = 0
    failed: int = 0
    facts_saved: int = 0
    purged: int = 0
    stopped_early: bool = False


@dataclass
class SessionOutcome:
    ok: bool
    facts_saved: int = 0
    unavailable: bool = False


# The failure kinds of the call policy (`app.llm.policy.failure_kind`) that say the
# model is not there at all: not the session's fault, not counted against it.
UNAVAILABLE_KINDS = frozenset({"connect", "breaker_open", "deadline", "http404"})
TIMEOUT_KINDS = frozenset({"timeout", "transport"})
REPLY_ECHO_CHARS = 2000  # of an unusable reply, sent back with the note on what was wrong

_CORRECTIONS = {
    "not_json": "Your answer held no JSON array of facts.",
    "cut_off": "Your answer was cut off: its JSON never closed.",
    "invalid_item": "Some items of your answer cannot be stored ({detail}).",
}


def failure_reason(exc: Exception) -> str:
    """The label a failed extraction is counted and recorded under."""
    if isinstance(exc, ReplyFormatError):
        return exc.reason
    kind = str(getattr(exc, "failure_kind", "") or "")
    if kind in UNAVAILABLE_KINDS:
        return "unavailable"
    return "timeout" if kind in TIMEOUT_KINDS else "model_error"


@dataclass
class Reply:
    facts: list[ExtractedFact]
    note: str | None = None  # an empty list accepted although the user stated a fact


def _again(messages: list[dict[str, str]], reply: str, note: str) -> list[dict[str, str]]:
    """The first two messages, the unusable reply and what to do about it."""
    return [
        *messages[:2],
        {"role": "assistant", "content": reply[:REPLY_ECHO_CHARS]},
        {
            "role": "user",
            "content": note + " Answer again with the JSON array only, one object per fact"
            ' with "category", "key" and "value" as strings; [] only if nothing is worth'
            " remembering.",
        },
    ]


async def _ask_for_facts(llm: LLMGateway, transcript: str) -> Reply:
    """Facts from the LLM; an unusable reply, or an empty list for a transcript whose
    user states a fact, is asked again (`EXTRACTION_ATTEMPTS` calls in all). Raises
    ReplyFormatError (the last reply unusable too) or LLMError (the gateway retries
    those itself)."""
    stated = states_facts(transcript)
    messages = [
        {"role": "system", "content": prompt("extract_facts.txt")},
        {"role": "user", "content": transcript},
    ]
    for attempt in range(1, EXTRACTION_ATTEMPTS + 1):
        last = attempt == EXTRACTION_ATTEMPTS
        content = (await llm.chat(messages, temperature=0.1)).content
        try:
            facts = parse_facts(content)
        except ReplyFormatError as exc:
            EXTRACTION_REPLIES.labels(exc.reason).inc()
            log.warning(
                "memory.extraction_malformed_reply",
                attempt=attempt,
                reason=exc.reason,
                error=str(exc)[:300],
            )
            if last:
                raise ReplyFormatError(
                    f"{EXTRACTION_ATTEMPTS} unusable replies; last: {exc}", exc.reason
                ) from exc
            detail = str(exc).partition(": ")[2][:300]
            messages = _again(messages, content, _CORRECTIONS[exc.reason].format(detail=detail))
            continue
        if facts or stated is None:
            EXTRACTION_REPLIES.labels("ok" if facts else "empty").inc()
            return Reply(facts)
        if last:
            EXTRACTION_REPLIES.labels("empty_accepted").inc()
            log.warning("memory.extraction_empty_accepted", statement=stated)
            return Reply([], f"empty_accepted: no fact although the user said {stated!r} …")
        EXTRACTION_REPLIES.labels("empty_retried").inc()
        log.info("memory.extraction_empty_retried", attempt=attempt, statement=stated)
        messages = _again(
            messages,
            content,
            f"Your answer was an empty list, but the user says {stated!r} … about themselves."
            " Extract what they state about themselves that will still hold later.",
        )
    raise AssertionError("unreachable: the last attempt returns or raises")


async def regenerate_summary(
    factory: async_sessionmaker[AsyncSession], llm: LLMGateway | None, user_id: str
) -> str:
    """Rewrite the user's summary from all their live facts; never fails on the LLM.
    The facts are read in one short transaction, the model asked with none open, and
    the summary written in another, checked against the user's forget records under
    their share lock (a forget never waits for this model call)."""
    async with transaction(factory) as db:
        facts = await FactRepository(db).live_facts(user_id, SUMMARY_FACTS)
    text = ""
    if facts and llm is not None:
        try:
            reply = await llm.chat(
                [
                    {"role": "system", "content": prompt("summarize_facts.txt")},
                    {"role": "user", "content": fact_lines(facts, datetime.now(UTC))},
                ],
                temperature=0.3,
            )
            text = strip_think(reply.content)
        except LLMError as exc:
            log.warning("memory.summary_llm_failed", user_id=user_id, error=str(exc)[:300])
    if not text:
        text = fallback_summary(facts)
    async with transaction(factory) as db:
        text = (await ForgottenRepository(db).guard(user_id)).redact(text)
        await SummaryRepository(db).put(user_id, text[:MAX_SUMMARY])
    return text


async def extract_session(service: FactService, claim: Any, max_attempts: int) -> SessionOutcome:
    """Extract one claimed session (`claim`: `ExtractionRepository.claim`'s row) inside
    the claiming transaction (`service.db`)."""
    session_id, user_id, seen = claim.session_id, claim.user_id, claim.last_active
    db, llm = service.db, service.llm
    assert llm is not None  # the runtime's gateway
    repo = ExtractionRepository(db)
    messages = await repo.transcript_messages(user_id, session_id)
    transcript = clip_middle(render_transcript(messages))
    try:
        reply = await _ask_for_facts(llm, transcript)
    except (ReplyFormatError, LLMError) as exc:
        return await _record_failure(repo, claim, exc, max_attempts)
    items = reply.facts

    texts = [
        embedding_text(normalise_name(f.category), normalise_name(f.key), f.value) for f in items
    ]
    vectors = await service.embed(texts) if items else None
    # a forget that went by while the model read the transcript: a fact holding its text
    # is not saved (the forget deletes such facts); checked under the records' share lock,
    # taken after the last model call (a forget never waits for one)
    forgotten = await ForgottenRepository(db).guard(user_id)
    saved = 0
    where = said_at(messages, items)
    for i, fact in enumerate(items):
        if forgotten and any(map(forgotten.holds, _fact_texts(fact))):
            log.info("memory.extraction_item_forgotten", session_id=str(session_id))
            continue
        try:
            await service.upsert_fact(
                user_id,
                fact.category,
                fact.key,
                fact.value,
                source=fact.source,
                source_context=fact.source_context,
                source_session_id=session_id,
                dedupe=True,
                embedding=vectors[i] if vectors else None,
                message_seq=spot.sequence_number if (spot := where[i]) else None,
                said_at=spot.at if spot else None,
            )
            saved += 1
        except Unprocessable as exc:
            log.warning(
                "memory.extraction_item_skipped", session_id=str(session_id), problem=exc.detail
            )
    await repo.mark_extracted(user_id, session_id, seen, note=reply.note)
    log.info("memory.session_extracted", session_id=str(session_id), facts=saved)
    return SessionOutcome(ok=True, facts_saved=saved)


async def _record_failure(
    repo: ExtractionRepository, claim: Any, exc: Exception, max_attempts: int
) -> SessionOutcome:
    """Record, count and log a failed extraction; park the session at `max_attempts`."""
    session_id, user_id = claim.session_id, claim.user_id
    reason = failure_reason(exc)
    EXTRACTION_FAILURES.labels(reason).inc()
    error = f"{reason}: {type(exc).__name__}: {exc}"
    attempts = await repo.record_failure(
        user_id, session_id, error, max_attempts, counts=reason != "unavailable"
    )
    log.error(
        "memory.extraction_failed",
        session_id=str(session_id),
        reason=reason,
        error_type=type(exc).__name__,
        error=str(exc)[:300],
        attempts=attempts,
    )
    if attempts >= max_attempts:
        await repo.settle(user_id, session_id, claim.last_active)  # its next append unparks it
        EXTRACTION_PARKED.inc()
        log.warning(
            "memory.extraction_parked",
            session_id=str(session_id),
            user_id=user_id,
            attempts=attempts,
            reason=reason,
            error=str(exc)[:300],
            hint="no further extraction until the session's next append",
        )
    return SessionOutcome(ok=False, unavailable=isinstance(exc, LLMUnavailableError))


def _fact_texts(fact: Any) -> tuple[str | None, ...]:
    return (fact.category, fact.key, fact.value, fact.source_context)


async def _claim_next(repo: ExtractionRepository, stale_before: datetime, tried: list[Any]) -> Any:
    """The next pending stale session this pass has not tried, its state row locked
    until commit; None when there is none (or every candidate is held elsewhere).

    Two steps, so it works the same on one server and on Citus (where a locking read
    must stay on one shard): the candidates, read across every user without a lock
    (an index range scan), then each in turn claimed by its key with `SKIP LOCKED`."""
    for candidate in await repo.candidates(stale_before, tried):
        claim = await repo.claim(candidate.user_id, candidate.session_id, stale_before)
        if claim is not None:
            return claim
    return None


async def run_extraction_pass(
    runtime: Runtime,
    *,
    max_sessions: int = MAX_SESSIONS_PER_PASS,
    now: datetime | None = None,
) -> PassResult:
    now = now or datetime.now(UTC)
    factory = runtime.session_factory
    stale_before = now - timedelta(minutes=runtime.settings.extraction_stale_minutes)
    max_attempts = runtime.settings.extraction_max_attempts
    result = PassResult()
    tried: list[Any] = []
    while len(tried) < max_sessions:
        async with transaction(factory) as db:
            claim = await _claim_next(ExtractionRepository(db), stale_before, tried)
            if claim is None:
                break
            tried.append(claim.session_id)
            facts = FactService.of(db, runtime)
            outcome = await extract_session(facts, claim, max_attempts)
        if outcome.ok:
            result.extracted += 1
            result.facts_saved += outcome.facts_saved
            if outcome.facts_saved:  # after the claim's commit: no lock held meanwhile
                await regenerate_summary(factory, runtime.llm, claim.user_id)
        else:
            result.failed += 1
            if outcome.unavailable:
                result.stopped_early = True
                break
    async with transaction(factory) as db:
        result.purged = await FactRepository(db).purge_expired(now - PURGE_GRACE)
    if result.extracted or result.failed or result.purged:
        log.info("memory.extraction_pass", **vars(result))
    return result


async def get_extraction_state(
    factory: async_sessionmaker[AsyncSession], session_id: Any, user_id: str
) -> Any:
    """`(extracted_at, attempts, last_error)` of one of the user's sessions, or None."""
    async with transaction(factory) as db:
        return await ExtractionRepository(db).state(session_id, user_id, all_users=False)


async def extract_stale_sessions(runtime: Runtime) -> PassResult | None:
    """The job: one pass, unless this process is already running one (then None)."""
    return await unless_running(
        runtime.jobs, "facts_extraction_lock", lambda: run_extraction_pass(runtime)
    )
