from app.domain.sessions.compaction import CHECK_EVERY, HotRow, compaction_cut, should_check


def rows(*spec: tuple[str, int], context_from: int | None = None) -> list[HotRow]:
    return [
        HotRow(i, role, n, context_from is not None and i >= context_from)
        for i, (role, n) in enumerate(spec)
    ]


def test_under_the_limit_nothing_moves() -> None:
    assert compaction_cut(rows(("user", 10), ("assistant", 10)), limit=20) is None
    assert compaction_cut(rows(("user", 10), ("assistant", 10)), limit=0) is None


def test_cut_before_the_first_user_message_that_reaches_80_percent() -> None:
    hist = rows(
        ("user", 100),  # 0
        ("assistant", 100),  # 1
        ("user", 100),  # 2
        ("assistant", 300),  # 3
        ("tool", 100),  # 4
        ("assistant", 100),  # 5
        ("user", 100),  # 6
        ("assistant", 100),  # 7
    )  # total 1000
    # limit 900 → target 720: cutting before #2 leaves 800 (too much), before #6 leaves 200
    assert compaction_cut(hist, limit=900) == 6
    # limit 999 → target 799: before #2 leaves 800, still > 799 → #6
    assert compaction_cut(hist, limit=999) == 6
    # limit 990 with ratio 0.9 → target 891: before #2 leaves 800 → #2
    assert compaction_cut(hist, limit=990, ratio=0.9) == 2


def test_never_cuts_between_a_user_message_and_its_reply() -> None:
    hist = rows(
        ("user", 10), ("assistant", 500), ("assistant", 500), ("user", 10), ("assistant", 10)
    )
    cut = compaction_cut(hist, limit=600)
    assert cut == 3 and hist[cut].role == "user"


def test_unreachable_target_cuts_before_the_newest_exchange() -> None:
    # one huge final answer: the best is to keep only the last exchange
    hist = rows(("user", 10), ("assistant", 10), ("user", 10), ("assistant", 5000))
    assert compaction_cut(hist, limit=1000) == 2
    # no user message after the first row: no valid boundary
    assert compaction_cut(rows(("user", 10), ("assistant", 5000)), limit=100) is None
    assert compaction_cut(rows(("assistant", 5000), ("tool", 10)), limit=100) is None


def test_context_rows_stay_and_count() -> None:
    # rows 0-3 in context: nothing before a user boundary can move → no cut
    hist = rows(
        ("user", 400), ("assistant", 400), ("user", 400), ("assistant", 400), context_from=0
    )
    assert compaction_cut(hist, limit=1000) is None
    # rows 0-1 movable, 2-5 in context: the cut removes what it can
    hist = rows(
        ("user", 300),
        ("assistant", 300),
        ("user", 300),
        ("assistant", 300),
        ("user", 10),
        ("assistant", 10),
        context_from=2,
    )
    assert compaction_cut(hist, limit=1000) == 2


def test_should_check_every_n_sequence_numbers_or_large_appends() -> None:
    limit = 64 * 1000
    assert not should_check(1, 2, 10, limit)
    assert should_check(CHECK_EVERY - 1, 1, 10, limit)  # crosses a multiple
    assert should_check(3, 1, 1000, limit)  # ≥ limit / 64
    assert not should_check(3, 1, 999, limit)
    assert not should_check(CHECK_EVERY - 1, 1, 10, 0)  # disabled
