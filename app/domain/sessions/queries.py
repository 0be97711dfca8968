"""Statements of the session list, its search filter and the match positions — built here,
executed only by `SessionRepository` (app/domain/sessions/repositories.py). Plans and
figures: docs/performance.md, "Session store"."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Integer,
    Select,
    and_,
    bindparam,
    func,
    null,
    or_,
    select,
    text,
)
from sqlalchemy.sql.elements import TextClause

from app.db.models import Message, MessageArchive, Session
from app.domain.kernel.access import Viewer
from app.domain.sessions.cursor import ListCursor
from app.lib.sql import contains_pattern

SORT_COLUMNS = {
    "last_active": Session.last_active,
    "created_at": Session.created_at,
    "name": Session.name,
}

#: Columns of a sidebar row, in `SessionSummary` field order; the page query adds `total`.
SUMMARY_COLUMNS = (
    "id",
    "profile_id",
    "user_id",
    "name",
    "pinned",
    "created_at",
    "last_active",
    "display_message_count",
)


def search_filters(  # type: ignore[no-untyped-def]
    stmt, profile_id: str | None, search: str | None, *, per_session: bool
):
    """The list's `profile_id` and `search` filters on a statement over `sessions`."""
    if profile_id is not None:
        stmt = stmt.where(Session.profile_id == profile_id)
    if search:
        stmt = stmt.where(_contains(contains_pattern(search), per_session=per_session))
    return stmt


def _contains(pattern: str | BindParameter[str], *, per_session: bool) -> ColumnElement[bool]:
    """The session shows `pattern` in a display message, hot or archived.

    `per_session`: probe each candidate session's own rows (the EXISTS stops at its
    first hit), so one user's search reads that user's messages only. Without a
    trigram index PostgreSQL may otherwise turn the EXISTS into a hashed subplan over
    every message: a whole-table ILIKE scan (a rare term at 400 MB: ~4.4 s of CPU
    instead of ~0.3 s for the user's own rows). `OFFSET 0` is PostgreSQL's documented
    fence against that rewrite (tests/integration/sessions/test_fast_paths.py checks
    the plan shape). With the trigram index the planner's own choice is the better one
    (a hashed trigram bitmap for a rare term, ~10 ms, against ~85 ms of per-session
    scans; per-session probes for a common term either way), and the all-users view
    always keeps it."""
    hot = select(1).where(
        Message.session_id == Session.id,
        Message.user_id == Session.user_id,
        Message.display_index.is_not(None),
        Message.content.ilike(pattern, escape="\\"),
    )
    cold = select(1).where(
        MessageArchive.session_id == Session.id,
        MessageArchive.user_id == Session.user_id,
        MessageArchive.display_index.is_not(None),
        MessageArchive.content.ilike(pattern, escape="\\"),
    )
    if per_session:
        hot, cold = hot.offset(0), cold.offset(0)
    return hot.exists() | cold.exists()


def summaries_page(
    viewer: Viewer,
    *,
    limit: int,
    offset: int,
    profile_id: str | None,
    search: str | None,
    sort_by: str,
    sort_order: str,
    per_session: bool,
    after: ListCursor | None = None,
) -> tuple[Select[Any], dict[str, Any]]:
    """The statement of a sidebar page with its total, and its parameters. Built once
    per shape (building this Select costs ~0.5 ms of Python per request otherwise).
    `after`: the page after that cursor (keyset) instead of `offset`."""
    keyed = None if after is None else after.value is None
    stmt = _summaries_statement(
        viewer.all_users,
        profile_id is not None,
        bool(search),
        per_session,
        sort_by,
        sort_order,
        keyed,
    )
    params: dict[str, Any] = {"uid": viewer.user_id, "limit": limit, "offset": offset}
    if after is not None:
        params.update(cp=after.pinned, cv=after.value, cid=after.id)
    if profile_id is not None:
        params["profile_id"] = profile_id
    if search:
        params["pattern"] = contains_pattern(search)
    return stmt, params


PREVIEW_CHARS = 160


def previews(keys: list[tuple[Any, str]]) -> tuple[TextClause, dict[str, Any]]:
    """The head of the newest displayed message of each session (id, user id) of all
    users' sidebar page: one backward lookup of `ix_session_messages_display` per session,
    each naming the session's user (on Citus each branch is one shard)."""
    params: dict[str, Any] = {"n": PREVIEW_CHARS}
    parts = []
    for i, (sid, uid) in enumerate(keys):
        params[f"s{i}"], params[f"u{i}"] = sid, uid
        parts.append(
            f"(SELECT session_id, left(content, :n) AS preview FROM session_messages"
            f" WHERE session_id = :s{i} AND user_id = :u{i} AND display_index IS NOT NULL"
            " ORDER BY display_index DESC LIMIT 1)"
        )
    return text(" UNION ALL ".join(parts)), params


@lru_cache(maxsize=128)
def _summaries_statement(
    all_users: bool,
    by_profile: bool,
    searching: bool,
    per_session: bool,
    sort_by: str,
    sort_order: str,
    keyed: bool | None = None,
) -> Select[Any]:
    """One statement for a sidebar page and the total: the filtered sessions are counted
    by a window (`count(*) OVER ()`, before LIMIT) in an inner query that sorts and cuts
    the page; the preview (one index lookup per session) is taken for the page's rows
    only. Before, the page and the count were two statements, each planned and — with a
    search term — each probing every candidate session's messages. `keyed` (not None):
    the page after a cursor (`:cp`, `:cv`, `:cid`; True when its sort value is null)
    instead of OFFSET; the total still counts every filtered session."""
    col = SORT_COLUMNS[sort_by]
    order = col.asc().nulls_last() if sort_order == "asc" else col.desc().nulls_last()
    inner = select(
        Session.id,
        Session.profile_id,
        Session.user_id,
        Session.name,
        Session.pinned,
        Session.created_at,
        Session.last_active,
        Session.next_display_index.label("display_message_count"),
        func.count().over().label("total"),
    )
    if not all_users:
        inner = inner.where(Session.user_id == bindparam("uid"))
    if by_profile:
        inner = inner.where(Session.profile_id == bindparam("profile_id"))
    if searching:
        inner = inner.where(_contains(bindparam("pattern"), per_session=per_session))
    if keyed is None:
        page = (
            inner.order_by(Session.pinned.desc(), order, Session.id)
            .limit(bindparam("limit", type_=Integer))
            .offset(bindparam("offset", type_=Integer))
            .subquery("page")
        )
    else:
        # the window counts every filtered session; the cursor's condition applies after
        counted = inner.subquery("counted")
        kcol = counted.c[col.key]
        korder = kcol.asc().nulls_last() if sort_order == "asc" else kcol.desc().nulls_last()
        page = (
            select(counted)
            .where(_after_cursor(counted.c.pinned, kcol, counted.c.id, col, sort_order, keyed))
            .order_by(counted.c.pinned.desc(), korder, counted.c.id)
            .limit(bindparam("limit", type_=Integer))
            .subquery("page")
        )
    # One user's page names the user in the preview too: the page is a fenced subquery
    # (LIMIT), through which Citus does not see the user filter. All users' page takes
    # its previews from a second statement (`previews`): Citus plans no correlated
    # subquery over a subquery it cannot push down (the page spans shards).
    preview: ColumnElement[Any] = (
        null()
        if all_users
        else select(func.left(Message.content, PREVIEW_CHARS))
        .where(
            Message.session_id == page.c.id,
            Message.user_id == bindparam("uid"),
            Message.display_index.is_not(None),
        )
        .order_by(Message.display_index.desc())
        .limit(1)
        .scalar_subquery()
    )
    outer_col = page.c[col.key]
    outer_order = (
        outer_col.asc().nulls_last() if sort_order == "asc" else outer_col.desc().nulls_last()
    )
    return select(
        *(page.c[name] for name in SUMMARY_COLUMNS), preview.label("preview"), page.c.total
    ).order_by(page.c.pinned.desc(), outer_order, page.c.id)


def _after_cursor(
    pinned: Any, kcol: Any, sid: Any, col: Any, sort_order: str, null_value: bool
) -> ColumnElement[bool]:
    """The rows after the cursor (`:cp` pinned, `:cv` sort value, `:cid` id) in the order
    pinned DESC, the sort column (`sort_order`, NULLS LAST), id ASC."""
    cid = bindparam("cid", type_=Session.id.type)
    if null_value:  # the cursor is among the nulls, last in either direction
        same_pin = and_(kcol.is_(None), sid > cid)
    else:
        cv = bindparam("cv", type_=col.type)
        beyond = kcol > cv if sort_order == "asc" else kcol < cv
        same_pin = or_(beyond, kcol.is_(None), and_(kcol == cv, sid > cid))
    cp = bindparam("cp", type_=Session.pinned.type)
    return or_(pinned < cp, and_(pinned == cp, same_pin))


# For each requested session (all of one user, `:uid`: every read names it, so on Citus
# the statement stays on that user's shard): the first `:cap` matching display rows in
# display order,
# plus one more, which only says "there are more" (`truncated`). Archived rows all precede
# the hot ones, so the archive is read first (its (session_id, sequence_number) index; a
# display position grows with the sequence number) and the hot table only for what is
# still missing (ix_session_messages_display). Both are ordered index scans that stop at
# the cap instead of rechecking every candidate of the whole history.
#
# `strpos(lower(content), lower(term)) > 0` is what `content ILIKE '%term%'` (escaped)
# means in a UTF-8 database — ILIKE lower-cases both sides, then matches — and it keeps
# the planner on these scans: it cannot use the trigram index, and its default estimate
# (a third of the rows match) makes the ordered scan with LIMIT the cheap plan (with
# ILIKE it rebuilt the trigram bitmap for every session). A term that is rare in these
# sessions reads their whole display histories this way: when the trigram index exists
# and the planner estimates the term rare, the repository runs MATCHES_RARE_SQL instead.
# Measurements: docs/performance.md, "Measurements behind the code".
MATCHES_SQL: TextClause = text(
    """
    SELECT s.id AS session_id,
           (ar.positions || hot.positions)[1:CAST(:cap AS integer)] AS positions,
           coalesce(cardinality(ar.positions), 0) + coalesce(cardinality(hot.positions), 0)
               AS match_count,
           (SELECT substr(c.content,
                          greatest(1, strpos(lower(c.content), lower(:term)) - 60), 200)
            FROM (SELECT content FROM session_messages_archive
                  WHERE user_id = :uid AND id = ar.first_id
                  UNION ALL
                  SELECT content FROM session_messages
                  WHERE user_id = :uid AND id = hot.first_id AND ar.first_id IS NULL) c
            LIMIT 1) AS snippet
    FROM unnest(CAST(:ids AS uuid[])) AS s(id)
    CROSS JOIN LATERAL (
        SELECT array_agg(f.display_index ORDER BY f.sequence_number) AS positions,
               (array_agg(f.id ORDER BY f.sequence_number))[1] AS first_id
        FROM (
            SELECT a.sequence_number, a.display_index, a.id
            FROM session_messages_archive a
            WHERE a.user_id = :uid AND a.session_id = s.id AND a.display_index IS NOT NULL
              AND strpos(lower(a.content), lower(:term)) > 0
            ORDER BY a.sequence_number
            LIMIT CAST(:cap AS integer) + 1
        ) f
    ) ar
    CROSS JOIN LATERAL (
        SELECT array_agg(f.display_index ORDER BY f.display_index) AS positions,
               (array_agg(f.id ORDER BY f.display_index))[1] AS first_id
        FROM (
            SELECT m.display_index, m.id
            FROM session_messages m
            WHERE m.user_id = :uid AND m.session_id = s.id AND m.display_index IS NOT NULL
              AND strpos(lower(m.content), lower(:term)) > 0
            ORDER BY m.display_index
            LIMIT greatest(0, CAST(:cap AS integer) + 1 - coalesce(cardinality(ar.positions), 0))
        ) f
    ) hot
    WHERE ar.positions IS NOT NULL OR hot.positions IS NOT NULL
    """
)


# A rare term with the trigram index: its few candidates through one bitmap over the
# requested sessions (the index ANDed with the session index), positions aggregated.
MATCHES_RARE_SQL: TextClause = text(
    """
    WITH hits AS (
        SELECT m.session_id, m.display_index, m.id, false AS archived
        FROM session_messages m
        WHERE m.user_id = :uid AND m.session_id = ANY(CAST(:ids AS uuid[]))
          AND m.display_index IS NOT NULL
          AND m.content ILIKE :pattern ESCAPE '\\'
        UNION ALL
        SELECT a.session_id, a.display_index, a.id, true
        FROM session_messages_archive a
        WHERE a.user_id = :uid AND a.session_id = ANY(CAST(:ids AS uuid[]))
          AND a.display_index IS NOT NULL
          AND a.content ILIKE :pattern ESCAPE '\\'
    ), agg AS (
        SELECT session_id,
               (array_agg(display_index ORDER BY display_index))[1:CAST(:cap AS integer)]
                   AS positions,
               count(*) AS match_count,
               (array_agg(id ORDER BY display_index))[1] AS first_id,
               (array_agg(archived ORDER BY display_index))[1] AS first_archived
        FROM hits GROUP BY session_id
    )
    SELECT agg.session_id, agg.positions, agg.match_count,
           (SELECT substr(c.content,
                          greatest(1, strpos(lower(c.content), lower(:term)) - 60), 200)
            FROM (SELECT content FROM session_messages
                  WHERE user_id = :uid AND id = agg.first_id AND NOT agg.first_archived
                  UNION ALL
                  SELECT content FROM session_messages_archive
                  WHERE user_id = :uid AND id = agg.first_id AND agg.first_archived) c
            LIMIT 1) AS snippet
    FROM agg
    """
)

#: The planner's row estimate for `content ILIKE pattern` over session_messages (its
#: trigram statistics): below this, a term counts as rare for MATCHES_RARE_SQL.
RARE_TERM_ROWS = 5_000
ESTIMATE_MATCHES_SQL: TextClause = text(
    "EXPLAIN (FORMAT JSON) SELECT 1 FROM session_messages WHERE content ILIKE :pattern ESCAPE '\\'"
)
