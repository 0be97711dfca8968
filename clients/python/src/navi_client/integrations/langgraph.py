"""A LangGraph `BaseStore` backed by Navi's facts and its unified memory search.

    from navi_client import AsyncNavi, Navi
    from navi_client.integrations.langgraph import NaviStore

    store = NaviStore(Navi(url, token), AsyncNavi(url, token))
    graph = builder.compile(store=store)
    store.put(("users", "u1", "prefs"), "editor", {"name": "vim"})
    store.search(("users", "u1"), query="which editor?")   # Navi's memory search

- An item is a fact of the token's user: the namespace is its category (the labels
  joined by `/`), the key its key, the value its JSON text. Navi stores categories and
  keys as a save normalises them (trimmed, lower-cased, inner whitespace as `_`), so
  namespaces and keys read back in that form.
- `search` with a `query` is Navi's memory search over the facts (vector first, then
  words; `score` is the similarity when there is one); without one, the facts under the
  namespace prefix. `filter` keeps the items whose value has those fields equal.
- `put(..., value=None)` (LangGraph's delete) deletes the fact; `ttl` (minutes) becomes
  the fact's `expires_days` (rounded up).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from navi_client._async import AsyncNavi
from navi_client._errors import NotFound
from navi_client._sync import Navi

__all__ = ["NaviStore"]

SEP = "/"
PAGE = 200  # facts per list call
MAX_SCAN = 5_000  # facts read at most for a search without a query


def category_of(namespace: tuple[str, ...]) -> str:
    return SEP.join(namespace)


def namespace_of(category: str) -> tuple[str, ...]:
    return tuple(category.split(SEP))


def _value(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"value": text}  # a fact saved by something else than this store
    return value if isinstance(value, dict) else {"value": value}


def _item(fact: Any) -> Item:
    return Item(
        value=_value(fact.value),
        key=fact.key,
        namespace=namespace_of(fact.category),
        created_at=fact.created_at,
        updated_at=fact.updated_at,
    )


def _matches(value: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return all(value.get(k) == v for k, v in (wanted or {}).items())


def _under(category: str, prefix: tuple[str, ...]) -> bool:
    parts = namespace_of(category)
    return parts[: len(prefix)] == tuple(p.lower() for p in prefix)


def _expires_days(ttl: float | None) -> int | None:
    return None if ttl is None else max(1, math.ceil(ttl / (24 * 60)))


class _Now:
    """The sync client with the async client's face: each call runs at once and returns
    a coroutine that never suspends, so one implementation (`_run`) serves both."""

    def __init__(self, client: Navi) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        return call


def _drive(coro: Any) -> Any:
    """Run a coroutine that never suspends (over `_Now`) to its result."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("NaviStore: a sync call suspended")


class NaviStore(BaseStore):
    """LangGraph's long-term memory in Navi. Give a sync client for `batch` (graphs run
    with `invoke`) and/or an async one for `abatch` (`ainvoke`, `astream`)."""

    def __init__(self, client: Navi | None = None, aclient: AsyncNavi | None = None) -> None:
        if client is None and aclient is None:
            raise ValueError("NaviStore: give a Navi client, an AsyncNavi client or both")
        self.client, self.aclient = client, aclient

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self.client is None:
            raise RuntimeError("NaviStore: no sync client (use abatch, or give `client`)")
        now = _Now(self.client)
        return [_drive(_run(now, op)) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if self.aclient is None:
            return await asyncio.to_thread(self.batch, list(ops))
        return [await _run(self.aclient, op) for op in ops]


async def _run(c: Any, op: Op) -> Result:
    """One operation on the client `c` (an AsyncNavi, or the sync one behind `_Now`)."""
    if isinstance(op, GetOp):
        page = await c.list_facts(category=category_of(op.namespace), key=op.key, limit=1)
        return _item(page.items[0]) if page.items else None
    if isinstance(op, PutOp):
        category = category_of(op.namespace)
        if op.value is None:
            try:
                await c.delete_fact(op.key, category=category)
            except NotFound:
                pass
            return None
        await c.save_fact(
            category, op.key, json.dumps(op.value), expires_days=_expires_days(op.ttl)
        )
        return None
    if isinstance(op, SearchOp):
        return _window(await (_by_query(c, op) if op.query else _by_listing(c, op)), op)
    if isinstance(op, ListNamespacesOp):
        return _namespaces(await _categories(c), op)
    raise TypeError(f"NaviStore: unknown operation {type(op).__name__}")


async def _categories(c: Any) -> list[str]:
    out: list[str] = []
    while True:
        page = await c.list_categories(limit=PAGE, offset=len(out))
        out += [x.category for x in page.categories]
        if not page.has_more or not page.categories:
            return out


async def _by_query(c: Any, op: SearchOp) -> list[SearchItem]:
    """Navi's memory search over the facts, then each hit's fact (its JSON value)."""
    assert op.query is not None
    out: list[SearchItem] = []
    for hit in (await c.search_memory(op.query, scope="facts", k=_k(op))).hits:
        if hit.source_type != "fact" or hit.category is None or hit.key is None:
            continue
        if _under(hit.category, op.namespace_prefix):
            page = await c.list_facts(category=hit.category, key=hit.key, limit=1)
            out += _search_items(page.items, op, hit.score)
    return out


async def _by_listing(c: Any, op: SearchOp) -> list[SearchItem]:
    """The facts under the prefix, newest first (at most MAX_SCAN read)."""
    found: list[SearchItem] = []
    offset = 0
    while offset < MAX_SCAN:
        page = await c.list_facts(
            limit=PAGE, offset=offset, sort_by="updated_at", sort_order="desc"
        )
        found += _search_items(
            [f for f in page.items if _under(f.category, op.namespace_prefix)], op
        )
        if not page.has_more or len(found) >= op.offset + op.limit:
            break
        offset += PAGE
    return found


def _k(op: SearchOp) -> int:
    return max(1, min(50, op.limit + op.offset))


def _search_items(
    facts: Iterable[Any], op: SearchOp, score: float | None = None
) -> list[SearchItem]:
    out = []
    for fact in facts:
        value = _value(fact.value)
        if not _matches(value, op.filter):
            continue
        out.append(
            SearchItem(
                namespace_of(fact.category),
                fact.key,
                value,
                fact.created_at,
                fact.updated_at,
                score,
            )
        )
    return out


def _window(items: list[SearchItem], op: SearchOp) -> list[SearchItem]:
    return items[op.offset : op.offset + op.limit]


def _fits(ns: tuple[str, ...], path: tuple[str, ...], kind: str) -> bool:
    """A namespace against one match condition (`*` matches any label)."""
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if kind == "prefix" else ns[len(ns) - len(path) :]
    return all(p in ("*", q) for p, q in zip(path, part, strict=True))


def _namespaces(categories: list[str], op: ListNamespacesOp) -> list[tuple[str, ...]]:
    spaces = sorted({namespace_of(c) for c in categories})
    for cond in op.match_conditions or ():
        path = tuple(str(p).lower() for p in cond.path)
        spaces = [ns for ns in spaces if _fits(ns, path, cond.match_type)]
    if op.max_depth is not None:
        spaces = sorted({ns[: op.max_depth] for ns in spaces})
    return spaces[op.offset : op.offset + op.limit]
