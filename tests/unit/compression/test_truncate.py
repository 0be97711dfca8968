from __future__ import annotations

from app.domain.compression import hard_truncate

from .convo import asst, est, ids, system, tool_group, turn, user


def test_keeps_system_and_newest_turns_within_half_the_window() -> None:
    s1, s2 = system("a"), system("b")
    turns = [turn("q" * 100, "a" * 100) for _ in range(5)]  # 220 each
    ctx = [s1, *turns[0], *turns[1], s2, *[m for t in turns[2:] for m in t]]
    kept, dropped = hard_truncate(ctx, window=1000, estimate=est)  # budget 500
    assert ids(kept) == ids([s1, s2, *turns[3], *turns[4]])
    assert ids(dropped) == ids([m for t in turns[:3] for m in t])
    assert est(kept) <= 500


def test_everything_fits_nothing_dropped() -> None:
    ctx = [system(), *turn(), *turn()]
    kept, dropped = hard_truncate(ctx, window=100_000, estimate=est)
    assert ids(kept) == ids(ctx) and dropped == []


def test_custom_fraction() -> None:
    turns = [turn("q" * 100, "a" * 100) for _ in range(5)]
    ctx = [m for t in turns for m in t]
    kept, _ = hard_truncate(ctx, window=1000, estimate=est, frac=0.9)
    assert len(kept) == 8  # four turns = 880 ≤ 900


def test_oversized_last_turn_keeps_request_and_newest_groups() -> None:
    old = turn("old")
    request = user("big job")
    groups = [tool_group(1, 150) for _ in range(6)]  # 180 per group
    ctx = old + [request, *[m for g in groups for m in g]]
    kept, dropped = hard_truncate(ctx, window=1000, estimate=est)  # budget 500
    assert ids(kept) == ids([request, *groups[-2], *groups[-1]])
    assert est(kept) <= 500
    assert ids(dropped) == ids(old + [m for g in groups[:-2] for m in g])


def test_request_and_newest_group_survive_even_over_budget() -> None:
    request = user("r" * 1000)
    big = tool_group(1, 5000)
    ctx = [system(), request, *tool_group(1), *big]
    kept, dropped = hard_truncate(ctx, window=100, estimate=est)
    assert ids(kept) == ids([ctx[0], request, *big])
    assert len(dropped) == 2


def test_leading_group_without_request() -> None:
    ctx = [asst("a" * 500), asst("b" * 500), asst("c")]
    kept, dropped = hard_truncate(ctx, window=100, estimate=est)
    assert ids(kept) == ids([ctx[2]])
    assert ids(dropped) == ids(ctx[:2])


def test_empty_context() -> None:
    assert hard_truncate([], window=100, estimate=est) == ([], [])
    s = system()
    assert hard_truncate([s], window=1, estimate=est) == ([s], [])
