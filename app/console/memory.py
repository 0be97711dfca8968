"""`/console/memory`: the signed-in user's own memory — facts by category (with what a
merge hid behind each, and its undo), the memory summary, the error memory, the
scratchpads, and a chart of the facts learned per day.

Every read and write is the caller's own (`principal.id`), whatever their permissions:
another user's memory is the admin page's (app/console/admin.py), which may reuse the
facts table (`memory_facts.html`, with `readonly=True`).

The forms are the REST API's, with its rules and limits (the same service calls):

- `POST /console/memory/facts/save` is `POST /memory/facts` (`FactIn`: category ≤ 100,
  key ≤ 200, value ≤ 10,000, source, confidence 0–100, expires_days 1–36,500,
  source_context ≤ 2,000, dedupe): an upsert of (category, key).
- `POST /console/memory/facts/delete` is `DELETE /memory/facts/{key}?category=`: 404 when
  there is no such fact; the rows merged into it go too.
- `POST /console/memory/facts/unmerge` is `PATCH /admin/memory/{id}` with
  `{"merged_into": null}` as the fact's owner: only the caller's own facts (404 for any
  other, an admin's included).
- `POST /console/memory/facts/restore` is `POST /memory/facts/{id}/restore`
  (`fact_id`, `version_id`): an earlier value of the caller's fact made current again, as
  a new version (each live fact's history, `HISTORY_SHOWN` newest versions, is on the page).
- `POST /console/memory/summary` is `PUT /memory/summary` (≤ 50,000 characters; empty
  clears it).

A form that is wrong answers with the console's error page and a 4xx naming the field;
one that worked redirects (303) back to the page with a message.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from litestar import Controller, Request, get, post
from litestar.params import Parameter
from litestar.response import Redirect, Template
from markupsafe import Markup
from sqlalchemy.ext.asyncio import AsyncSession

from app.console.charts import bar_chart
from app.console.web import form_text, page
from app.domain.error_memory.services import ErrorMemoryService
from app.domain.facts.history import restore_version
from app.domain.facts.schemas import (
    MAX_CATEGORY,
    MAX_EXPIRES_DAYS,
    MAX_KEY,
    MAX_SOURCE_CONTEXT,
    MAX_SUMMARY,
    MAX_VALUE,
    SOURCES,
)
from app.domain.facts.services import FactService, fact_out, normalise_name, summary_fields
from app.domain.facts.versions import version_out
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.sketches.services import SketchService
from app.lib.errors import NotFound, Unprocessable

PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
MAX_OFFSET = 1_000_000
CHART_DAYS = 30
ERRORS_SHOWN = 50
SECTIONS_SHOWN = 50
MAX_FACT_ID_DIGITS = 18  # as PATCH /admin/memory/{id}: a bigint
HISTORY_SHOWN = 10  # versions shown per fact (the API pages the rest)
#: How the page names a fact's `source` (the values are the API's).
SOURCE_LABELS = {
    "conversation": "Conversation",
    "tool_call": "Tool call",
    "auto_discovery": "Auto-discovery",
    "user_explicit": "Said by you",
}
#: The source of a fact added on the page: the user typed it.
CONSOLE_SOURCE = "user_explicit"
BASE = "/console/memory"
_WHOLE = re.compile(r"-?[0-9]{1,12}")
_FACT_ID = re.compile(rf"[0-9]{{1,{MAX_FACT_ID_DIGITS}}}")


def ago(ts: datetime | None, now: datetime) -> str:
    """How long ago `ts` was, roughly ("3 d ago"); "in 5 d" for a time to come."""
    if ts is None:
        return ""
    seconds = (now - ts).total_seconds()
    future = seconds < 0
    seconds = abs(seconds)
    if seconds < 60:
        span = "under a minute"
    elif seconds < 3600:
        span = f"{int(seconds // 60)} min"
    elif seconds < 86400:
        span = f"{int(seconds // 3600)} h"
    else:
        span = f"{int(seconds // 86400)} d"
    if span == "under a minute":
        return "in under a minute" if future else "just now"
    return f"in {span}" if future else f"{span} ago"


def days_left(ts: datetime | None, now: datetime) -> int | None:
    """An expiry as the `expires_days` that keeps it (rounded up), for the edit form."""
    if ts is None:
        return None
    return max(1, min(MAX_EXPIRES_DAYS, math.ceil((ts - now).total_seconds() / 86400)))


def _field(form: Any, name: str) -> str:
    """A form field as sent ("" when missing or not text)."""
    raw = form.get(name)
    return raw if isinstance(raw, str) else ""


def _int_field(form: Any, name: str, lo: int, hi: int) -> int | None:
    """An optional whole number of a form; None when blank, 422 naming it when not one
    in lo–hi."""
    raw = _field(form, name).strip()
    if not raw:
        return None
    if not _WHOLE.fullmatch(raw):
        raise Unprocessable(f"{name}: expected a whole number {lo}-{hi}")
    value = int(raw)
    if not lo <= value <= hi:
        raise Unprocessable(f"{name}: expected {lo}-{hi}")
    return value


def _back(message: str, form: Any) -> Redirect:
    """303 to the page (the category it was filtered by, when the form says), with
    `message` to show."""
    params = {"done": message}
    category = _field(form, "back_category").strip()
    if category and len(category) <= MAX_CATEGORY and "\x00" not in category:
        params["category"] = category
    return Redirect(BASE, query_params=params, status_code=303)


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


class MemoryPage(Controller):
    path = "/memory"

    @get("/")
    async def memory(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
        category: Annotated[str, Parameter(max_length=MAX_CATEGORY)] = "",
        offset: Annotated[int, Parameter(ge=0, le=MAX_OFFSET)] = 0,
        limit: Annotated[int, Parameter(ge=1, le=MAX_PAGE_SIZE)] = PAGE_SIZE,
    ) -> Template:
        """The page: `category` narrows the facts to one category (as stored, or as a
        save would store it); `offset`/`limit` page them."""
        chosen = normalise_name(category) or None  # as a save stores it
        user_id = principal.id
        facts = FactService.of(db, runtime)
        categories = await facts.categories(user_id)
        rows = await facts.get_all_facts(
            user_id, limit=limit, offset=offset, sort_by="category", category=chosen
        )
        total = await facts.fact_count(user_id, category=chosen)
        hidden = await facts.merged_under(user_id, [r.id for r in rows])
        histories: dict[int, list[Any]] = {}
        for v in await facts.versions.recent_of_facts(user_id, [r.id for r in rows], HISTORY_SHOWN):
            histories.setdefault(v.fact_id, []).append(version_out(v))
        per_day = await facts.learned_per_day(user_id, CHART_DAYS)
        chart = bar_chart(
            [(day.strftime("%m-%d"), float(n)) for day, n in per_day],
            title=f"Facts learned per day, the last {CHART_DAYS} days",
            y_label="Facts learned",
            chart_id="facts-chart",
        )
        summary = summary_fields(await facts.get_summary(user_id))
        errors, error_total = await ErrorMemoryService.of(db, runtime).browse(
            user_id, ERRORS_SHOWN, 0
        )
        sections, section_total = await SketchService.of(db, runtime).list_for_user(
            user_id, SECTIONS_SHOWN, 0
        )
        return page(
            request,
            "memory.html",
            nav="memory",
            facts=[fact_out(r) for r in [*rows, *hidden]],
            histories=histories,
            readonly=False,
            total=total,
            offset=offset,
            limit=limit,
            category=chosen or "",
            back_category=chosen or "",
            categories=categories,
            category_counts=dict(categories),
            learned=sum(n for _, n in per_day),
            chart=Markup(chart),  # markup built by charts.py, which escapes every text
            chart_days=CHART_DAYS,
            summary=summary,
            max_summary=MAX_SUMMARY,
            errors=errors,
            error_total=error_total,
            sections=sections,
            section_total=section_total,
            sources=[(s, SOURCE_LABELS.get(s, s)) for s in SOURCES],
            source_labels=SOURCE_LABELS,
            console_source=CONSOLE_SOURCE,
            limits={
                "category": MAX_CATEGORY,
                "key": MAX_KEY,
                "value": MAX_VALUE,
                "source_context": MAX_SOURCE_CONTEXT,
                "expires_days": MAX_EXPIRES_DAYS,
            },
            now=datetime.now(UTC),
            ago=ago,
            days_left=days_left,
        )

    @post("/facts/save")
    async def save_fact(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Redirect:
        """`POST /memory/facts` from a form: add a fact, or rewrite the one of
        (category, key)."""
        form = await request.form()
        category = form_text(form, "category", limit=MAX_CATEGORY)
        key = form_text(form, "key", limit=MAX_KEY)
        value = form_text(form, "value", limit=MAX_VALUE)
        source = _field(form, "source").strip() or "conversation"
        if source not in SOURCES:
            raise Unprocessable(f"source: expected one of {', '.join(SOURCES)}")
        confidence = _int_field(form, "confidence", 0, 100)
        expires_days = _int_field(form, "expires_days", 1, MAX_EXPIRES_DAYS)
        source_context = form_text(form, "source_context", limit=MAX_SOURCE_CONTEXT, required=False)
        result = await FactService.of(db, runtime).upsert_fact(
            principal.id,
            category,
            key,
            value,
            source=source,
            confidence=confidence,
            expires_days=expires_days,
            source_context=source_context or None,
            dedupe=_field(form, "dedupe") in ("on", "true", "1"),
        )
        fact = result.fact
        message = f"Saved {_short(fact.category)} / {_short(fact.key)}"
        if result.merged:
            message += f" (merged {len(result.merged)} near-duplicate(s) into it)"
        return _back(message + ".", form)

    @post("/facts/delete")
    async def delete_fact(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Redirect:
        """`DELETE /memory/facts/{key}?category=`: the fact under `key` (in `category`
        when given, else in any), and what was merged into it."""
        form = await request.form()
        key = form_text(form, "key", limit=MAX_KEY)
        category = form_text(form, "category", limit=MAX_CATEGORY, required=False) or None
        deleted = await FactService.of(db, runtime).delete_fact(principal.id, key, category)
        if not deleted:
            raise NotFound(f"key: no fact {key!r}" + (f" in {category!r}" if category else ""))
        return _back(f"Deleted {_short(key)}.", form)

    @post("/facts/unmerge")
    async def unmerge_fact(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Redirect:
        """Undo a merge: the hidden fact `fact_id` is live again (`PATCH
        /admin/memory/{id}` with `merged_into: null`, as its owner). Only the caller's
        own facts: any other id is 404, even for an admin (that is the admin's API)."""
        form = await request.form()
        raw = _field(form, "fact_id").strip()
        if not _FACT_ID.fullmatch(raw):
            raise Unprocessable("fact_id: expected a fact id (an integer)")
        row = await FactService.of(db, runtime).set_merged_into(
            int(raw), None, user_id=principal.id, is_admin=False, can_read_all=False
        )
        return _back(f"Restored {_short(row.key)}: it is a fact of its own again.", form)

    @post("/facts/restore")
    async def restore_fact(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Redirect:
        """`POST /memory/facts/{id}/restore`: the caller's fact `fact_id` takes the value
        of its version `version_id` again (a new version)."""
        form = await request.form()
        ids = []
        for name in ("fact_id", "version_id"):
            raw = _field(form, name).strip()
            if not _FACT_ID.fullmatch(raw):
                raise Unprocessable(f"{name}: expected an id (an integer)")
            ids.append(int(raw))
        service = FactService.of(db, runtime)
        result = await restore_version(service, principal.id, ids[0], ids[1])
        fact = result.fact
        return _back(f"Restored {_short(fact.key)} → {_short(fact.value)}.", form)

    @post("/summary")
    async def save_summary(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Redirect:
        """`PUT /memory/summary`: the summary replaced (an empty one clears it)."""
        form = await request.form()
        raw = form.get("summary")
        if not isinstance(raw, str):
            raise Unprocessable("summary: required (empty clears the summary)")
        if len(raw) > MAX_SUMMARY:
            raise Unprocessable(f"summary: at most {MAX_SUMMARY} characters")
        if "\x00" in raw:
            raise Unprocessable("summary: NUL characters are not allowed")
        row = await FactService.of(db, runtime).set_summary(principal.id, raw)
        return _back("Summary saved." if row.content else "Summary cleared.", form)
