"""HTTP: /memory (the caller's facts and summary), /admin/memory (every user's, with
navi.memory.read_all). The memory tool call (/tools/memory) is app/domain/forget's: its
`forget` with a `text` redacts every store."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec
from litestar import Controller, delete, get, patch, post, put
from litestar.params import Parameter

from app.domain.facts.deps import DEPENDENCIES
from app.domain.facts.history import fact_history, facts_as_of, restore_version
from app.domain.facts.schemas import (
    DEFAULT_FACT_SORT_BY,
    DEFAULT_FACT_SORT_ORDER,
    DEFAULT_SEARCH_LIMIT,
    MAX_QUERY,
    MAX_SEARCH_LIMIT,
    CategoriesOut,
    CategoryCount,
    FactHistoryPage,
    FactIn,
    FactOut,
    FactPatch,
    FactSortBy,
    RestoreIn,
    SearchOut,
    SortOrder,
    SummaryIn,
    SummaryOut,
)
from app.domain.facts.services import FactService, fact_out, summary_fields
from app.domain.facts.versions import fact_as_of, version_out
from app.domain.kernel.deps import READ_ONLY
from app.domain.kernel.principal import Principal
from app.lib.errors import Forbidden, NotFound, Unprocessable
from app.lib.pagination import MAX_LIMIT, Limit, Offset, Page, page, page_of

SearchLimit = Annotated[int, Parameter(ge=1, le=MAX_SEARCH_LIMIT)]
QueryText = Annotated[str, Parameter(max_length=MAX_QUERY)]
ListSearch = Annotated[str | None, Parameter(max_length=200)]
#: An exact category or key of `GET /memory/facts` (matched as a save stores it:
#: trimmed, lower-cased, inner whitespace as `_`).
ExactName = Annotated[str | None, Parameter(min_length=1, max_length=200)]


class FactSaved(FactOut, kw_only=True):
    merged: list[int]  # ids hidden behind this fact by `dedupe`


def _fact_id(raw: str) -> int:
    """A fact id of a path (parsed here: a typed path parameter would answer an
    unauthenticated request with a non-numeric id 404 before the auth guard's 401)."""
    if not raw.isdigit() or len(raw) > 18:
        raise Unprocessable("fact_id: expected a fact id (an integer)")
    return int(raw)


def _term(value: str | None) -> str | None:
    return value if value and value.strip() else None


def _require_read_all(principal: Principal) -> None:
    if not principal.can_read_all_memory:
        raise Forbidden("needs the navi.memory.read_all permission")


class MemoryController(Controller):
    path = "/memory"
    tags = ["memory"]
    dependencies = DEPENDENCIES

    @get("/facts")
    async def list_facts(
        self,
        principal: Principal,
        facts: FactService,
        limit: Limit = 50,
        offset: Offset = 0,
        search: ListSearch = None,
        sort_by: FactSortBy = DEFAULT_FACT_SORT_BY,
        sort_order: SortOrder = DEFAULT_FACT_SORT_ORDER,
        category: ExactName = None,
        key: ExactName = None,
        as_of: datetime | None = None,
    ) -> Page[FactOut]:
        """`as_of`: the values true at that time instead (deleted facts too, while they
        were valid), newest value first (`sort_by` does not apply)."""
        exact_category, exact_key = _term(category), _term(key)
        if as_of is not None:
            if as_of.tzinfo is None:
                raise Unprocessable("as_of: give a time zone (e.g. 2026-05-01T12:00:00Z)")
            versions, count = await facts_as_of(
                facts,
                principal.id,
                as_of,
                limit=limit,
                offset=offset,
                search=_term(search),
                category=exact_category,
                key=exact_key,
            )
            return page([fact_as_of(v) for v in versions], count, limit, offset)
        rows = await facts.get_all_facts(
            principal.id,
            limit=limit,
            offset=offset,
            search=_term(search),
            sort_by=sort_by,
            sort_order=sort_order,
            category=exact_category,
            key=exact_key,
        )
        total = await facts.fact_count(
            principal.id, search=_term(search), category=exact_category, key=exact_key
        )
        return page([fact_out(r) for r in rows], total, limit, offset)

    @post("/facts")
    async def save_fact(self, data: FactIn, principal: Principal, facts: FactService) -> FactSaved:
        result = await facts.upsert_fact(
            principal.id,
            data.category,
            data.key,
            data.value,
            source=data.source,
            confidence=data.confidence,
            expires_days=data.expires_days,
            source_context=data.source_context,
            source_session_id=data.source_session_id,
            dedupe=data.dedupe,
        )
        out = msgspec.structs.asdict(fact_out(result.fact))
        return FactSaved(**out, merged=result.merged)

    @delete("/facts/{key:str}", status_code=204)
    async def delete_fact(
        self,
        key: str,
        principal: Principal,
        facts: FactService,
        category: Annotated[str | None, Parameter(max_length=100)] = None,
    ) -> None:
        if not await facts.delete_fact(principal.id, key, _term(category)):
            raise NotFound(f"key: no fact {key!r}" + (f" in {category!r}" if category else ""))

    @get("/facts/{fact_id:str}/history")
    async def fact_history(
        self,
        fact_id: str,
        principal: Principal,
        facts: FactService,
        limit: Limit = 50,
        cursor: Annotated[str | None, Parameter(max_length=32)] = None,
    ) -> FactHistoryPage:
        """The fact's versions, newest first (a deleted fact's too); 404 when the caller
        has no fact of that id."""
        rows, total, has_more = await fact_history(
            facts, principal.id, _fact_id(fact_id), limit=limit, cursor=cursor
        )
        return FactHistoryPage(
            items=[version_out(r) for r in rows],
            total=total,
            limit=limit,
            has_more=has_more,
            next_cursor=str(rows[-1].id) if has_more else None,
        )

    @post("/facts/{fact_id:str}/restore", status_code=200)
    async def restore_fact(
        self, fact_id: str, data: RestoreIn, principal: Principal, facts: FactService
    ) -> FactSaved:
        """Make an old version's value current again: a new version."""
        result = await restore_version(facts, principal.id, _fact_id(fact_id), data.version_id)
        out = msgspec.structs.asdict(fact_out(result.fact))
        return FactSaved(**out, merged=result.merged)

    @get("/facts/search", dependencies=READ_ONLY)
    async def search_facts(
        self,
        principal: Principal,
        facts: FactService,
        q: QueryText,
        limit: SearchLimit = DEFAULT_SEARCH_LIMIT,
    ) -> SearchOut:
        if not q.strip():
            raise Unprocessable("q: must not be empty")
        found = await facts.search_facts(q, principal.id, limit)
        return SearchOut(query=q, mode=found.mode, items=found.hits)  # type: ignore[arg-type]

    @get("/categories")
    async def categories(
        self,
        principal: Principal,
        facts: FactService,
        limit: Limit = MAX_LIMIT,
        offset: Offset = 0,
    ) -> CategoriesOut:
        rows = await facts.categories(principal.id)
        shown = page_of(rows, limit, offset)
        return CategoriesOut(
            categories=[CategoryCount(c, n) for c, n in shown.items],
            total=sum(n for _, n in rows),
            category_count=shown.total,
            limit=limit,
            offset=offset,
            has_more=shown.has_more,
        )

    @get("/summary")
    async def get_summary(self, principal: Principal, facts: FactService) -> SummaryOut:
        return SummaryOut(**summary_fields(await facts.get_summary(principal.id)))

    @put("/summary")
    async def put_summary(
        self, data: SummaryIn, principal: Principal, facts: FactService
    ) -> SummaryOut:
        row = await facts.set_summary(principal.id, data.content)
        return SummaryOut(**summary_fields(row))


class AdminMemoryController(Controller):
    path = "/admin/memory"
    tags = ["memory"]
    dependencies = DEPENDENCIES

    @get("/")
    async def list_all(
        self,
        principal: Principal,
        facts: FactService,
        include_merged: bool = False,
        user_id: str | None = None,
        limit: Limit = 50,
        offset: Offset = 0,
        search: ListSearch = None,
        sort_by: FactSortBy = DEFAULT_FACT_SORT_BY,
        sort_order: SortOrder = DEFAULT_FACT_SORT_ORDER,
    ) -> Page[FactOut]:
        _require_read_all(principal)
        rows = await facts.get_all_facts(
            user_id,
            all_users=True,
            limit=limit,
            offset=offset,
            search=_term(search),
            sort_by=sort_by,
            sort_order=sort_order,
            include_merged=include_merged,
        )
        total = await facts.fact_count(
            user_id, all_users=True, search=_term(search), include_merged=include_merged
        )
        return page([fact_out(r) for r in rows], total, limit, offset)

    @get("/search", dependencies=READ_ONLY)
    async def search_all(
        self,
        principal: Principal,
        facts: FactService,
        q: QueryText,
        user_id: str | None = None,
        limit: SearchLimit = DEFAULT_SEARCH_LIMIT,
    ) -> SearchOut:
        _require_read_all(principal)
        if not q.strip():
            raise Unprocessable("q: must not be empty")
        found = await facts.search_facts(q, user_id, limit, all_users=True)
        return SearchOut(query=q, mode=found.mode, items=found.hits)  # type: ignore[arg-type]

    # `str`, parsed here: a typed path parameter would answer an unauthenticated request
    # with a non-numeric id 404 before the auth guard runs (401 must come first).
    @patch("/{fact_id:str}")
    async def patch_fact(
        self, fact_id: str, data: FactPatch, principal: Principal, facts: FactService
    ) -> FactOut:
        if isinstance(data.merged_into, msgspec.UnsetType):
            raise Unprocessable("merged_into: required (null restores a merged fact)")
        row = await facts.set_merged_into(
            _fact_id(fact_id),
            data.merged_into,
            user_id=principal.id,
            is_admin=principal.is_admin,
            can_read_all=principal.can_read_all_memory,
        )
        return fact_out(row)
