from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.domain.kernel.hits import MemoryHit
from app.domain.kernel.terms import clamp_k, normalize_scope, query_terms
from app.domain.search.merge import (
    mark_freshness,
    merge_tiered,
    recall_filter,
    recall_query,
    shared_terms,
)
from app.domain.search.render import format_hits

NOV6 = datetime(2026, 11, 6, 18, 41)
NOV9 = datetime(2026, 11, 9, 12, 0)


def fact(key: str, value: str, at: datetime | None = NOV9, **kw: object) -> MemoryHit:
    return MemoryHit("fact", f"{key}: {value}", timestamp=at, key=key, **kw)  # type: ignore[arg-type]


def raw(text: str, at: datetime | None = NOV6, **kw: object) -> MemoryHit:
    kw.setdefault("session_id", "s1")
    return MemoryHit("raw", text, timestamp=at, **kw)  # type: ignore[arg-type]


# --- scope and k


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ("all", "all"),
        ("facts", "facts"),
        ("raw", "raw"),
        ("sketches", "sketches"),
        ("errors", "errors"),
        (" Facts ", "facts"),
        ("RAW", "raw"),
        ("everything", "all"),
        ("fact", "all"),
        ("", "all"),
        (None, "all"),
        (3, "all"),
    ],
)
def test_normalize_scope(scope: object, expected: str) -> None:
    assert normalize_scope(scope) == expected


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        (None, 5),
        (0, 5),
        (1, 1),
        (7, 7),
        (20, 20),
        (21, 20),
        (1000, 20),
        (-3, 1),
        (3.9, 3),
        ("4", 4),
        (" 12 ", 12),
        ("99", 20),
        ("abc", 5),
        ("", 5),
        (float("nan"), 5),
        (float("inf"), 5),
        (True, 5),
        ([3], 5),
    ],
)
def test_clamp_k(k: object, expected: int) -> None:
    assert clamp_k(k) == expected


# --- terms


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did we decide about the server port?", ["server", "port"]),
        ("server_port nginx.conf", ["server", "port", "nginx", "conf"]),
        ("Какой порт мы выбрали для сервера?", ["порт", "выбрали", "сервера"]),
        ("port PORT Port", ["port"]),
        ("a 8 x 80", ["8", "80"]),
        ("", []),
        ("the and of", []),
    ],
)
def test_query_terms(query: str, expected: list[str]) -> None:
    assert query_terms(query) == expected


def test_shared_terms_counts_fact_words_longer_than_two() -> None:
    assert shared_terms("server_port: 8099", "the server listens on port 8099") == 3
    assert shared_terms("db: pg", "db pg") == 0


# --- freshness


def test_newer_fact_supersedes_overlapping_raw() -> None:
    f = fact("server_port", "8099")
    r = raw("User: let's run the server on port 8098")
    [marked] = mark_freshness([f], [r], None, None)
    # the seed's label: the fact's key and its updated_at (naive read as UTC)
    assert marked.superseded_by == "server_port (updated 2026-11-09 12:00)"
    assert r.superseded_by is None  # input untouched


def test_superseded_label_is_the_fact_time_in_utc() -> None:
    from datetime import timedelta, timezone

    berlin = timezone(timedelta(hours=1))
    f = fact("server_port", "8099", at=datetime(2026, 11, 9, 13, 30, tzinfo=berlin))
    [marked] = mark_freshness(
        [f], [raw("server port 8098", at=NOV6.replace(tzinfo=UTC))], None, None
    )
    assert marked.superseded_by == "server_port (updated 2026-11-09 12:30)"


def test_older_fact_does_not_supersede_newer_raw() -> None:
    f = fact("server_port", "8099", at=NOV6)
    r = raw("User: server port is now 8100", at=NOV9)
    [marked] = mark_freshness([f], [r], None, None)
    assert marked.superseded_by is None


def test_a_raw_that_states_the_current_value_is_not_superseded() -> None:
    f = fact("server_port", "8099")  # confirmed (or restored) after the excerpt was said
    [said] = mark_freshness([f], [raw("User: the server port is 8099 again")], None, None)
    assert said.superseded_by is None
    [other] = mark_freshness([f], [raw("User: the server port is 8098 again")], None, None)
    assert other.superseded_by == "server_port (updated 2026-11-09 12:00)"
    assert other.superseded_value == "8099"  # which value replaced it
    text = format_hits("server port", "raw", [other])
    assert "— server_port (updated 2026-11-09 12:00), now: 8099. Trust the fact" in text


def test_one_shared_word_is_not_enough() -> None:
    [marked] = mark_freshness([fact("editor", "neovim")], [raw("my editor is emacs")], None, None)
    assert marked.superseded_by is None


def test_newest_qualifying_fact_wins_even_if_not_newest_overall() -> None:
    newest_unrelated = fact("city", "Berlin", at=datetime(2026, 12, 1))
    older_related = fact("server_port", "8099", at=NOV9)
    oldest_related = fact("port_server_old", "8097", at=datetime(2026, 11, 7))
    r = raw("server port 8098")
    [marked] = mark_freshness([oldest_related, newest_unrelated, older_related], [r], None, None)
    assert marked.superseded_by == "server_port (updated 2026-11-09 12:00)"


def test_fact_without_timestamp_or_raw_without_timestamp_ignored() -> None:
    [a] = mark_freshness([fact("server_port", "8099", at=None)], [raw("server port 1")], None, None)
    [b] = mark_freshness([fact("server_port", "8099")], [raw("server port 1", at=None)], None, None)
    assert a.superseded_by is None and b.superseded_by is None


def test_fact_without_key_gets_generic_label() -> None:
    f = MemoryHit("fact", "server port 8099", timestamp=NOV9)
    [marked] = mark_freshness([f], [raw("server port 8098")], None, None)
    assert marked.superseded_by == "a newer fact (updated 2026-11-09 12:00)"


def test_before_summary_only_for_current_session() -> None:
    summary_at = datetime(2026, 11, 7)
    old_here = raw("x", at=NOV6, session_id="s1")
    new_here = raw("y", at=NOV9, session_id="s1")
    old_other = raw("z", at=NOV6, session_id="s2")
    marked = mark_freshness([], [old_here, new_here, old_other], summary_at, "s1")
    assert [m.before_summary for m in marked] == [True, False, False]
    unscoped = mark_freshness([], [old_here], summary_at, None)
    assert unscoped[0].before_summary is False


def test_before_summary_by_the_turns_the_summary_covers() -> None:
    """With the summary's last turn known, a chunk is before the summary when its turns
    are all summarised — a chunk of turns still in the live context (written by the
    idle-session index, older in time than the summary) is not."""
    summary_at = datetime(2026, 11, 7)
    summarised = raw("x", at=NOV6, session_id="s1", start_seq=0, end_seq=9)
    live = raw("y", at=NOV6, session_id="s1", start_seq=10, end_seq=19)
    astride = raw("z", at=NOV6, session_id="s1", start_seq=8, end_seq=12)
    other = raw("w", at=NOV6, session_id="s2", start_seq=0, end_seq=3)
    marked = mark_freshness(
        [], [summarised, live, astride, other], summary_at, "s1", summary_through=9
    )
    assert [m.before_summary for m in marked] == [True, False, False, False]
    # without the summary's range the time decides, as before
    by_time = mark_freshness([], [live], summary_at, "s1")
    assert by_time[0].before_summary is True


def test_mixed_naive_and_aware_timestamps_compare() -> None:
    f = fact("server_port", "8099", at=datetime(2026, 11, 9, 12, 0, tzinfo=UTC))
    r = raw("server port 8098", at=NOV6)  # naive: read as UTC
    [marked] = mark_freshness([f], [r], datetime(2026, 11, 7, tzinfo=UTC), "s1")
    assert marked.superseded_by == "server_port (updated 2026-11-09 12:00)"
    assert marked.before_summary is True


# --- tiered merge


def test_merge_tiered_order() -> None:
    f1, f2 = fact("a", "1"), fact("b", "2")
    r_vec_low = raw("r1", score=0.4, chunk_id="c1")
    r_vec_high = raw("r2", score=0.9, chunk_id="c2")
    r_text_many = raw("r3", terms_hit=5, chunk_id="c3")
    r_text_few = raw("r4", terms_hit=1, chunk_id="c4")
    r_vec_tie = raw("r5", score=0.9, terms_hit=3, chunk_id="c5")
    e1 = MemoryHit("error", "e1", terms_hit=1)
    e2 = MemoryHit("error", "e2", terms_hit=4)
    s1, s2 = MemoryHit("sketch", "s1"), MemoryHit("sketch", "s2")
    merged = merge_tiered(
        [f1, f2], [r_vec_low, r_text_few, r_vec_high, r_text_many, r_vec_tie], [s1, s2], [e1, e2]
    )
    assert [h.text for h in merged] == [
        "a: 1",
        "b: 2",
        "r5",
        "r2",
        "r1",
        "r3",
        "r4",
        "e2",
        "e1",
        "s1",
        "s2",
    ]


def test_merge_tiered_errors_default_empty() -> None:
    assert merge_tiered([], [], []) == []


# --- rendering


def test_format_hits_byte_for_byte() -> None:
    hits = [
        fact("server_port", "8099", session_id="s1", category="technical"),
        raw(
            "User: run it on port 8098\nAssistant: done",
            start_seq=12,
            end_seq=14,
            superseded_by="server_port (updated 2026-11-09 12:00)",
            breadcrumbs=("server_port", "8098"),
        ),
        raw(
            "User: the key is in ~/.ssh/id_ed25519\n\nAssistant: noted",
            at=datetime(2026, 11, 5, 9, 3),
            start_seq=7,
            end_seq=7,
            before_summary=True,
        ),
        MemoryHit(
            "error",
            "Tool result (shell): permission denied",
            session_id="s1",
            key="tool",
            start_seq=20,
            end_seq=20,
        ),
        MemoryHit("sketch", "- port: 8099 (decided)", session_id="s1", timestamp=NOV9),
        MemoryHit("fact", "editor: neovim", key="editor"),
        raw("orphan", at=None, session_id=None),
    ]
    expected = (
        'memory_search "server port" (scope=all): 7 hit(s)\n'
        "\n"
        "1. fact [technical] · session s1 · updated 2026-11-09 12:00\n"
        "   server_port: 8099\n"
        "2. raw · session s1 · turns 12–14 · 2026-11-06\n"
        "   ⚠ outdated: a newer curated fact overrides this — "
        "server_port (updated 2026-11-09 12:00). Trust the fact; quote this only as history.\n"
        "   keys: server_port, 8098\n"
        "   User: run it on port 8098\n"
        "   Assistant: done\n"
        "3. raw · session s1 · turn 7 · 2026-11-05\n"
        "   (verbatim record from before the current summary — exact details, "
        "but the summary is the curated version.)\n"
        "   User: the key is in ~/.ssh/id_ed25519\n"
        "\n"
        "   Assistant: noted\n"
        "4. error [tool] · session s1 · turn 20\n"
        "   Tool result (shell): permission denied\n"
        "5. sketch · session s1 · main · updated 2026-11-09 12:00\n"
        "   - port: 8099 (decided)\n"
        "6. fact [other]\n"
        "   editor: neovim\n"
        "7. raw · session unknown · turn unknown\n"
        "   orphan"
    )
    assert format_hits("server port", "all", hits) == expected


def test_format_zero_hits_and_scope_fallback() -> None:
    assert format_hits("nothing  here", "bogus", []) == (
        'memory_search "nothing here" (scope=all): 0 hit(s)\n'
        "No matches in any store. Try fewer, different words."
    )


def test_format_superseded_wins_over_before_summary_and_keys_capped() -> None:
    crumbs = tuple(f"k{i}" for i in range(20))
    hit = raw(
        "x", superseded_by="a", before_summary=True, breadcrumbs=crumbs, start_seq=1, end_seq=2
    )
    out = format_hits("q", "raw", [hit])
    assert "⚠ outdated" in out and "verbatim record" not in out
    assert f"   keys: {', '.join(crumbs[:12])}\n" in out


def test_format_head_excerpt_when_window_disabled() -> None:
    hit = MemoryHit("sketch", "word " * 400, session_id="s1", key="plan")
    out = format_hits("q", "sketches", [hit], best_window_enabled=False, text_chars=20)
    assert out.splitlines()[-1] == "   word word word word …"


# --- automatic recall


def test_recall_filter() -> None:
    hits = [
        raw("vector ok", score=0.8, chunk_id="a"),
        raw("vector weak", score=0.5, chunk_id="b"),
        raw("vector at threshold", score=0.55, chunk_id="c"),
        raw("text ok", terms_hit=2, chunk_id="d"),
        raw("text weak", terms_hit=1, chunk_id="e"),
        raw("superseded", score=0.99, chunk_id="f", superseded_by="server_port"),
        raw("already injected", score=0.99, chunk_id="g"),
        raw("duplicate", score=0.9, chunk_id="a"),
        raw("no id", terms_hit=3),
        fact("server_port", "8099", score=0.99),
        MemoryHit("sketch", "pad", score=0.99),
        raw("nan", score=float("nan"), chunk_id="h"),
    ]
    kept = recall_filter(hits, already_injected={"g"})
    assert [h.text for h in kept] == ["vector ok", "vector at threshold", "text ok", "no id"]


def test_recall_filter_thresholds_configurable() -> None:
    hits = [raw("v", score=0.6, chunk_id="a"), raw("t", terms_hit=2, chunk_id="b")]
    assert recall_filter(hits, min_similarity=0.7, min_terms=3) == []
    assert len(recall_filter(hits, min_similarity=0.6, min_terms=2)) == 2


def test_recall_query_last_four_plus_incoming() -> None:
    recent = [
        ("user", "one"),
        ("assistant", "two"),
        ("tool", "tool output"),
        ("system", "sys"),
        ("user", "three"),
        ("assistant", ""),
        ("Assistant", "four  words\nhere"),
        ("user", "five"),
    ]
    assert recall_query(recent, "incoming?") == "two\nthree\nfour words here\nfive\nincoming?"
    assert recall_query([], "  ") == ""
    assert recall_query([("user", "a")], "") == "a"


def test_recall_query_clips_long_messages() -> None:
    query = recall_query([("user", "word " * 1000)], "x", message_chars=50)
    first, last = query.split("\n")
    assert len(first) <= 50 and first.endswith("word") and last == "x"


def test_recall_leaves_out_the_live_context() -> None:
    from app.domain.compression import Msg
    from app.domain.search.recall import live_from

    context = [
        Msg(role="system", content="prompt", sequence_number=0),
        Msg(role="user", content="summary", sequence_number=31, is_summary=True),
        Msg(role="user", content="q", sequence_number=24),
        Msg(role="assistant", content="a", sequence_number=25),
        Msg(role="system", content="note", sequence_number=-1),
    ]
    assert live_from(context) == 24
    assert live_from(context[:2]) is None
