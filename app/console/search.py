"""`/console/search`: the signed-in user's memory searched as an agent's `memory_search`
searches it, and a text forgotten everywhere (after a dry run shows what it would change).

- The search is `POST /memory/search`'s: `UnifiedSearch.of(db, runtime, primary=…)` on
  a READ_ONLY route, the caller's own memory (`user_id=principal.id`, whatever their
  permissions), the same limits (query ≤ 2,000 characters, an unknown scope is `all`,
  `k` clamped to 1–20) and the same answer (`result_out`: the hits with their
  provenance and freshness, and the text the model reads).
- Forgetting is `POST /memory/forget`'s `ForgetService.forget` for the caller: the first
  form is its dry run (the counts per store, the files listed), the second
  (`confirm=yes`) forgets and redirects to the page with a message that never repeats
  the text.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, get, post
from litestar.params import Parameter
from litestar.response import Redirect, Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.console.web import page
from app.domain.forget.redact import MARKER, MAX_TEXT, MIN_TEXT
from app.domain.forget.schemas import STORES, ForgetJobOut, ForgetOut
from app.domain.forget.services import ForgetService
from app.domain.kernel.deps import READ_ONLY
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.domain.kernel.terms import DEFAULT_K, MAX_K, SCOPES, clamp_k, normalize_scope
from app.domain.search.schemas import MemorySearchOut
from app.domain.search.services import UnifiedSearch
from app.domain.search.tool import MAX_QUERY, result_out
from app.lib.errors import Unprocessable

#: How the page names each scope of `memory_search` (the values are the API's).
SCOPE_LABELS = {
    "all": "Everything (facts, raw history, scratchpads)",
    "facts": "Facts",
    "raw": "Raw history",
    "sketches": "Scratchpads",
    "errors": "Error memory",
}
#: How the page names each kind of hit (`source_type`).
KIND_LABELS = {"fact": "Fact", "raw": "Raw chunk", "sketch": "Sketch", "error": "Error"}
#: How the dry run names each store it counts (`ForgetOut.changed`, in STORES order).
STORE_LABELS = {
    "messages": "Messages",
    "archived_messages": "Archived messages",
    "chunks": "Raw history chunks",
    "facts": "Facts (deleted)",
    "memory_summary": "Memory summary",
    "rolling_summaries": "Rolling summaries",
    "sketches": "Scratchpad sections",
    "errors": "Error memory entries",
    "sessions": "Session names and planning logs",
    "job_errors": "Background jobs' failure notes",
}
CONFIRMED = "yes"


def _search_page(
    request: Request[Any, Any, Any],
    *,
    status_code: int = 200,
    q: str = "",
    scope: str = "all",
    k: int = DEFAULT_K,
    result: MemorySearchOut | None = None,
    search_error: str | None = None,
    forget_text: str = "",
    forget_error: str | None = None,
    preview: ForgetOut | None = None,
) -> Template:
    return page(
        request,
        "search.html",
        nav="search",
        status_code=status_code,
        q=q,
        scope=scope,
        k=k,
        max_k=MAX_K,
        max_query=MAX_QUERY,
        scopes=[(s, SCOPE_LABELS.get(s, s)) for s in SCOPES],
        result=result,
        search_error=search_error,
        kinds=KIND_LABELS,
        forget_text=forget_text,
        forget_error=forget_error,
        min_text=MIN_TEXT,
        max_text=MAX_TEXT,
        marker=MARKER,
        preview=preview,
        stores=[(s, STORE_LABELS.get(s, s)) for s in STORES],
        confirmed=CONFIRMED,
    )


def _forgotten_message(out: ForgetOut) -> str:
    """The flash after a forget: the counts, never the text (it goes into a URL)."""
    text = (
        f"Forgot that text everywhere: {out.total} record(s) redacted or deleted"
        f" ({out.changed.get('facts', 0)} fact(s) deleted)."
    )
    if out.files:
        text += f" {len(out.files)} session file(s) still hold it (not changed)."
    return text


class SearchPage(Controller):
    path = "/search"

    @get("/", dependencies=READ_ONLY)
    async def search(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        primary_db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
        q: str = "",
        scope_of: Annotated[str, Parameter(query="scope")] = "all",
        k: str = "",
    ) -> Template:
        """`db` may be the read replica's (as `POST /memory/search`'s); the errors scope
        renews what it finds through `primary_db`. An empty query: the box alone."""
        scope_ = normalize_scope(scope_of)  # `scope` is Litestar's name of the ASGI scope
        k_ = clamp_k(k or None)
        if len(q) > MAX_QUERY:
            return _search_page(
                request,
                status_code=422,
                q=q[:MAX_QUERY],
                scope=scope_,
                k=k_,
                search_error=f"query: at most {MAX_QUERY} characters",
            )
        result = None
        if q.strip():
            search = UnifiedSearch.of(db, runtime, primary=primary_db)
            found = await search.search(q, user_id=principal.id, scope=scope_, k=k_)
            result = result_out(found)
        return _search_page(
            request,
            q=q,
            scope=scope_,
            k=k_,
            result=result,
            # a search for a secret is often followed by forgetting it
            forget_text=q.strip() if len(q.strip()) <= MAX_TEXT else "",
        )

    @post("/forget", status_code=200)
    async def forget(
        self,
        request: Request[Any, Any, Any],
        db: AsyncSession,
        runtime: Runtime,
        principal: Principal,
    ) -> Template | Redirect:
        """Without `confirm=yes`: the dry run, and the form that confirms it. With it:
        the text forgotten, and back to the page (303) with the counts."""
        form = await request.form()
        raw = form.get("text")
        text = raw if isinstance(raw, str) else ""
        confirmed = form.get("confirm") == CONFIRMED
        forget = ForgetService.of(db, runtime)
        try:
            if len(text) > MAX_TEXT:  # ForgetIn's bound, before anything runs
                raise Unprocessable(f"text: at most {MAX_TEXT} characters")
            answer = await forget.forget(principal.id, text, dry_run=not confirmed, via="console")
        except Unprocessable as exc:
            return _search_page(
                request, status_code=422, forget_text=text[:MAX_TEXT], forget_error=exc.detail
            )
        out = answer.result if isinstance(answer, ForgetJobOut) else answer
        if confirmed:
            done = _forgotten_message(out)
            if isinstance(answer, ForgetJobOut):
                done = f"Forgetting continues in the background (job {answer.job_id}). {done}"
            return Redirect("/console/search", query_params={"done": done}, status_code=303)
        return _search_page(request, forget_text=text.strip(), preview=out)
