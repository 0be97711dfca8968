"""`/console/sessions/{id}`: one session — its facts, its history with the compression
record drawn on it, the context the model sees now, the planning log, a chart of the
context's size, and the forms that rename, pin, share and delete it.

Reads and writes go through the services as the REST controllers do
(`sessions/controllers.py`, `shares/controllers.py`): `Viewer.of` to read (a session the
caller may not see is 404), `Viewer.editor` to write (a `navi.sessions.read_all` reader
gets 403 from the service; the page only hides the forms it would refuse).

How a compression is recorded (`context/writer.py`), and how it is drawn here:

- a displayed `is_compression` system marker at the point it took effect, its metadata
  holding reason, method, `tokens_before`/`tokens_after`, messages before/after and the
  number demoted: the summary block of the history is drawn at the marker;
- with the `summary` method, the summary row appended just before the marker
  (`is_summary`, not displayed): its text, its KEYS (`metadata.breadcrumbs`) and the
  sequence range of what it replaced (`metadata.summarized`);
- the replaced rows keep their text but leave the context (`is_context = false`).

A displayed message out of the context is "compressed" by the first summary whose range
holds it; one no range holds, by the first hard truncate after it (a truncate records
how many it dropped, not which). Rows that never reached the model are not marked.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from litestar import Controller, Request, get, post
from litestar.params import Parameter
from litestar.response import Redirect, Template
from markupsafe import Markup
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncSession

from app.console.charts import Mark, line_chart
from app.console.web import form_text, page
from app.db.models import Session
from app.domain.compression.calibration import FALLBACK_CHARS_PER_TOKEN
from app.domain.kernel.access import Viewer, reaches_llm
from app.domain.kernel.commits import after_commit
from app.domain.kernel.messages import MessageOut
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.kernel.session_files import remove_session_dirs
from app.domain.rolling.editing import read_rolling_summary
from app.domain.sessions.services import MAX_NAME, SessionService
from app.domain.shares.services import ShareService, may_publish
from app.lib.errors import Unprocessable
from app.lib.pagination import MAX_LIMIT, BeforeSeq

PAGE_SIZE = 50
MAX_TEXT = 20_000  # characters of one message shown; the rest is cut, with a note
PLANNING_SHOWN = 50  # newest planning entries shown (at most PLANNING_LOGS_KEPT are kept)
SERIES_MAX = 10_000  # displayed messages the chart reads (the newest)
COMPRESSIONS_MAX = 2_000  # compression rows read (markers and summaries, the newest)
# context messages drawn unless ?context=true (with the summaries before them): a context
# of thousands of messages would make the page megabytes for a section that opens closed
CONTEXT_SHOWN = 60
CHART_POINTS = 300  # message points drawn at most (compressions always are)
PIN_VALUES = {"true": True, "false": False}


@dataclass(frozen=True)
class Compression:
    """One compression as its marker and (for `summary`) its summary row recorded it."""

    number: int
    seq: int  # the marker's sequence number
    position: int | None  # the marker's display position, 1-based
    created_at: datetime
    reason: str
    method: str
    tokens_before: int | None
    tokens_after: int | None
    messages_before: int | None
    messages_after: int | None
    demoted: int | None
    summary: str
    keys: list[str]
    from_seq: int | None  # the sequence range the summary replaced
    to_seq: int | None
    replaced: int | None

    @property
    def label(self) -> str:
        tokens = f"{self.tokens_before} → {self.tokens_after} tokens"
        replaced = f", {self.replaced} messages summarized" if self.replaced else ""
        return f"Compression {self.number} ({self.reason}, {self.method}): {tokens}{replaced}"


@dataclass(frozen=True)
class Shown:
    shown: str
    cut: int  # characters not shown


@dataclass(frozen=True)
class Item:
    """A history entry: a message, or a compression's marker (the page's `markers`
    has the compression; `text` is then its summary)."""

    msg: MessageOut
    position: int
    text: Shown
    replaced_by: Compression | None = None
    thinking: Shown | None = None
    calls: Shown | None = None  # the tool calls as JSON


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def capped(text: str | None, limit: int = MAX_TEXT) -> Shown:
    text = text or ""
    return Shown(text[:limit], max(0, len(text) - limit))


def compressions_of(rows: Sequence[Row[Any]]) -> list[Compression]:
    """The compressions of a session's records (`SessionService.compression_records`),
    oldest first. A summary row is its marker's: appended just before it, in one call."""
    summaries = {r.sequence_number: r for r in rows if r.is_summary}
    out: list[Compression] = []
    for r in rows:
        if not r.is_compression:
            continue
        meta = r.message_metadata or {}
        summary = summaries.get(r.sequence_number - 1)
        smeta = (summary.message_metadata or {}) if summary is not None else {}
        raw = smeta.get("summarized")
        span: dict[str, Any] = raw if isinstance(raw, dict) else {}
        out.append(
            Compression(
                number=len(out) + 1,
                seq=r.sequence_number,
                position=None if r.display_index is None else r.display_index + 1,
                created_at=r.created_at,
                reason=_str(meta.get("reason"), "unknown"),
                method=_str(meta.get("method"), "unknown"),
                tokens_before=_int(meta.get("tokens_before")),
                tokens_after=_int(meta.get("tokens_after")),
                messages_before=_int(meta.get("messages_before")),
                messages_after=_int(meta.get("messages_after")),
                demoted=_int(meta.get("demoted")),
                summary=summary.content if summary is not None else r.content,
                keys=[k for k in smeta.get("breadcrumbs") or [] if isinstance(k, str)],
                from_seq=_int(span.get("from_seq")),
                to_seq=_int(span.get("to_seq")),
                replaced=_int(span.get("count")),
            )
        )
    return out


def replaced_by(m: MessageOut, compressions: Sequence[Compression]) -> Compression | None:
    """The compression that took `m` out of the context (the module docstring's rule)."""
    if m.is_compression or m.is_context or not reaches_llm(m.role, True, m.metadata):
        return None
    seq = m.sequence_number
    for c in compressions:
        if c.from_seq is not None and c.to_seq is not None and c.from_seq <= seq <= c.to_seq:
            return c
    return next((c for c in compressions if c.method == "truncate" and c.seq > seq), None)


def history_items(msgs: Sequence[MessageOut], compressions: Sequence[Compression]) -> list[Item]:
    by_seq = {c.seq: c for c in compressions}
    items = []
    for m in msgs:
        position = (m.display_index or 0) + 1
        if m.is_compression and m.sequence_number in by_seq:
            c = by_seq[m.sequence_number]
            items.append(Item(m, position, capped(c.summary)))
        else:
            calls = json.dumps(m.tool_calls, indent=2, ensure_ascii=False) if m.tool_calls else None
            items.append(
                Item(
                    m,
                    position,
                    capped(m.content),
                    replaced_by=replaced_by(m, compressions),
                    thinking=capped(m.thinking) if m.thinking else None,
                    calls=capped(calls) if calls else None,
                )
            )
    return items


def series_window(display_count: int) -> tuple[int, int]:
    """(first display index, bucket width) of the chart's series: the newest SERIES_MAX
    displayed messages in at most CHART_POINTS buckets."""
    first = max(0, display_count - SERIES_MAX)
    return first, max(1, math.ceil((display_count - first) / CHART_POINTS))


def token_chart(
    buckets: Sequence[tuple[int, int, int | None]],
    compressions: Sequence[Compression],
    first: int,
) -> str:
    """The context's size over the displayed messages: each bucket of messages adds the
    tokens they gave the model (`SessionService.size_buckets`); at a compression the line
    drops from the recorded `tokens_before` to the recorded `tokens_after` and goes on
    from there (a bucket that holds a compression adds its tokens after it: the line is
    an estimate at the bucket's resolution). A bucket with a turn the model counted
    (`metadata.usage` of a chat answer: prompt + answer tokens) and no compression ends
    at that count instead: the estimate is corrected by what the model measured. When
    the series starts past the session's first message, the line starts at the first
    compression or measured turn in it, or at 0 when there is none."""
    marks_at = sorted(
        ((c.position - 1, c) for c in compressions if c.position is not None),
        key=lambda item: item[0],
    )
    marks_at = [
        (i, c)
        for i, c in marks_at
        if i >= first and c.tokens_before is not None and c.tokens_after is not None
    ]
    points: list[tuple[float, float]] = []
    marks: list[Mark] = []
    running = 0
    pending = iter(marks_at)
    nxt = next(pending, None)
    started = first == 0
    for last, tokens, measured in buckets:
        compressed = False
        while nxt is not None and nxt[0] <= last:
            c = nxt[1]
            x = float(nxt[0] + 1)
            points += [(x, float(c.tokens_before or 0)), (x, float(c.tokens_after or 0))]
            marks.append(Mark(x, c.label))
            running, started = c.tokens_after or 0, True
            compressed = True
            nxt = next(pending, None)
        running += tokens
        if measured is not None and not compressed:
            running, started = measured, True
        if started:
            point = (float(last + 1), float(running))
            if points and points[-1][0] == point[0]:  # a bucket ending at its compression
                points[-1] = point
            else:
                points.append(point)
    return line_chart(
        points,
        title="Context tokens over the session's messages",
        x_label="message number",
        y_label="context tokens",
        marks=marks,
        chart_id="tokens-chart",
    )


def _may_edit(principal: Principal, session: Session) -> bool:
    """`Viewer.editor`'s scope (own sessions; every one for an admin): only which forms
    the page shows — every write is still the service's to refuse."""
    return principal.is_admin or session.user_id == principal.id


def _planning(newest_first: Sequence[Any], total: int) -> list[tuple[int, Shown]]:
    """The newest entries (newest first) as JSON numbered by their place in the log."""
    return [
        (total - i, capped(json.dumps(entry, indent=2, ensure_ascii=False, default=str)))
        for i, entry in enumerate(newest_first)
    ]


def _back(session_id: uuid.UUID, done: str) -> Redirect:
    return Redirect(f"/console/sessions/{session_id}?{urlencode({'done': done})}", status_code=303)


class SessionPage(Controller):
    path = "/sessions"

    @get("/{session_id:uuid}")
    async def session(
        self,
        request: Request[Any, Any, Any],
        session_id: uuid.UUID,
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
        before: BeforeSeq = None,
        after: BeforeSeq = None,
        limit: Annotated[int, Parameter(ge=1, le=MAX_LIMIT)] = PAGE_SIZE,
        context_all: Annotated[bool, Parameter(query="context")] = False,
    ) -> Template:
        if before is not None and after is not None:
            raise Unprocessable("before, after: give one of them, not both")
        sessions = SessionService.of(db, runtime)
        viewer = Viewer.of(principal)
        session = await sessions.get(session_id, viewer)
        if after is not None:
            before = await sessions.newer_bound(session, after, limit)
        history = await sessions.history(session_id, viewer, before, limit)
        compressions = compressions_of(
            await sessions.compression_records(session, COMPRESSIONS_MAX)
        )
        first, width = series_window(session.next_display_index)
        buckets = await sessions.size_buckets(session, first, width, FALLBACK_CHARS_PER_TOKEN)
        if context_all:
            _, context = await sessions.context(session_id, viewer)
            context_total = len(context)
        else:
            context_total, context = await sessions.context_tail(session, CONTEXT_SHOWN)
        msgs = history.messages
        planning, planning_total = await sessions.planning_newest(session, PLANNING_SHOWN)
        return page(
            request,
            "session.html",
            nav="sessions",
            base=f"/console/sessions/{session_id}",
            s=session,
            can_edit=_may_edit(principal, session),
            can_share=may_publish(principal, session.user_id),
            share_token=await ShareService.of(db, runtime).link(session, principal),
            max_name=MAX_NAME,
            items=history_items(msgs, compressions),
            compressions=compressions,
            markers={c.seq: c for c in compressions},
            older=history.next_before_seq if history.has_more else None,
            newer=msgs[-1].sequence_number if before is not None and msgs else None,
            limit=limit,
            chart=Markup(token_chart(buckets, compressions, first)),  # it escapes its text
            chart_partial=first > 0,
            context=[(m, capped(m.content)) for m in context],
            context_total=context_total,
            context_all=context_all,
            planning=_planning(planning, planning_total),
            planning_total=planning_total,
            rolling=await read_rolling_summary(db, runtime.profiles, session),
        )

    @post("/{session_id:uuid}/rename")
    async def rename(
        self,
        request: Request[Any, Any, Any],
        session_id: uuid.UUID,
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Redirect:
        name = form_text(await request.form(), "name", limit=MAX_NAME)
        await SessionService.of(db, runtime).patch(
            session_id, Viewer.editor(principal), {"name": name}
        )
        return _back(session_id, f"Renamed to “{name}”")

    @post("/{session_id:uuid}/pin")
    async def pin(
        self,
        request: Request[Any, Any, Any],
        session_id: uuid.UUID,
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Redirect:
        value = form_text(await request.form(), "pinned", limit=100)
        if value not in PIN_VALUES:
            raise Unprocessable("pinned: 'true' or 'false'")
        pinned = PIN_VALUES[value]
        await SessionService.of(db, runtime).patch(
            session_id, Viewer.editor(principal), {"pinned": pinned}
        )
        return _back(session_id, "Pinned" if pinned else "Unpinned")

    @post("/{session_id:uuid}/share")
    async def share(
        self, session_id: uuid.UUID, db: AsyncSession, runtime: Runtime, principal: Principal
    ) -> Redirect:
        await ShareService.of(db, runtime).issue(session_id, principal)
        return _back(session_id, "Share link ready: anyone with it can read this session")

    @post("/{session_id:uuid}/delete")
    async def delete(
        self, session_id: uuid.UUID, db: AsyncSession, runtime: Runtime, principal: Principal
    ) -> Redirect:
        await SessionService.of(db, runtime).delete(session_id, Viewer.editor(principal))
        # the session's folder goes once the rows are gone for good (REST: delete_session)
        after_commit(db, lambda: remove_session_dirs(runtime.settings, [session_id]))
        return Redirect(f"/console?{urlencode({'done': 'Session deleted'})}", status_code=303)
