"""Property-based checks of the partitioning invariants (planner + hard truncate)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.compression import Msg, hard_truncate, plan_compression, would_compress

from .convo import est

SETTINGS = settings(max_examples=200, deadline=None)

_block = st.one_of(
    st.tuples(st.just("user"), st.integers(0, 400), st.booleans()),
    st.tuples(st.just("assistant"), st.integers(0, 400), st.just(False)),
    st.tuples(st.just("tools"), st.integers(0, 3), st.integers(0, 600)),
    st.tuples(st.just("system"), st.integers(0, 200), st.just(False)),
    st.tuples(st.just("orphan"), st.integers(0, 200), st.just(False)),
    st.tuples(st.just("ack"), st.integers(0, 0), st.just(False)),
    st.tuples(st.just("remember"), st.integers(0, 100), st.just(False)),
)


def _build(blocks: list[tuple[str, int, Any]]) -> list[Msg]:
    out: list[Msg] = []
    for kind, a, b in blocks:
        if kind == "user":
            out.append(Msg("user", "u" * a, is_summary=bool(b)))
        elif kind == "assistant":
            out.append(Msg("assistant", "a" * a))
        elif kind == "tools":
            calls = [{"function": {"name": "f", "arguments": {"i": i}}} for i in range(max(a, 1))]
            out.append(Msg("assistant", "", tool_calls=calls))
            out += [Msg("tool", "r" * b, is_compression_critical=i == 0) for i in range(a)]
        elif kind == "system":
            out.append(Msg("system", "s" * a))
        elif kind == "orphan":
            out.append(Msg("tool", "o" * a))
        elif kind == "ack":
            out += [Msg("user", "ok"), Msg("assistant", "k")]
        else:
            out += [Msg("user", "Remember: " + "x" * a), Msg("assistant", "Noted")]
    return out


conversations = st.lists(_block, max_size=40).map(_build)


def _conversation(context: list[Msg]) -> list[Msg]:
    return [m for m in context if m.role != "system"]


def _tool_groups(context: list[Msg]) -> list[list[int]]:
    """Independent definition: tool-calling assistant + directly following tool msgs."""
    conv = _conversation(context)
    groups = []
    for i, m in enumerate(conv):
        if m.role == "assistant" and m.tool_calls:
            group = [id(m)]
            j = i + 1
            while j < len(conv) and conv[j].role == "tool":
                group.append(id(conv[j]))
                j += 1
            groups.append(group)
    return groups


def _last_turn(context: list[Msg]) -> list[Msg]:
    conv = _conversation(context)
    starts = [i for i, m in enumerate(conv) if m.role == "user"]
    return conv[starts[-1] :] if starts else conv


def _is_subsequence_in_order(part: list[Msg], order: dict[int, int]) -> bool:
    positions = [order[id(m)] for m in part]
    return positions == sorted(positions)


params = st.fixed_dictionaries(
    {
        "keep_recent": st.integers(1, 6),
        "keep_recent_messages": st.one_of(st.none(), st.integers(1, 14)),
        "window": st.integers(20, 6000),
        "target": st.sampled_from([0.3, 0.5, 0.65, 0.9]),
    }
)


@SETTINGS
@given(context=conversations, kw=params)
def test_plan_is_a_partition_in_original_order(context: list[Msg], kw: dict[str, Any]) -> None:
    plan = plan_compression(context, estimate=est, **kw)
    parts = plan.system + plan.to_summarize + plan.to_keep
    assert sorted(id(m) for m in parts) == sorted(id(m) for m in context)
    assert len(parts) == len(context)
    order = {id(m): i for i, m in enumerate(context)}
    for part in (plan.system, plan.to_summarize, plan.to_keep):
        assert _is_subsequence_in_order(part, order)


@SETTINGS
@given(context=conversations, kw=params)
def test_system_messages_are_never_summarized(context: list[Msg], kw: dict[str, Any]) -> None:
    plan = plan_compression(context, estimate=est, **kw)
    systems = [m for m in context if m.role == "system"]
    assert [id(m) for m in plan.system] == [id(m) for m in systems]
    assert all(m.role != "system" for m in plan.to_summarize + plan.to_keep)


@SETTINGS
@given(context=conversations, kw=params)
def test_tool_groups_are_never_split(context: list[Msg], kw: dict[str, Any]) -> None:
    plan = plan_compression(context, estimate=est, **kw)
    summarized = {id(m) for m in plan.to_summarize}
    for group in _tool_groups(context):
        sides = {i in summarized for i in group}
        assert len(sides) == 1


@SETTINGS
@given(context=conversations, kw=params)
def test_kept_region_fits_when_a_turn_partition_can(context: list[Msg], kw: dict[str, Any]) -> None:
    plan = plan_compression(context, estimate=est, **kw)
    budget = kw["window"] * kw["target"]
    systems = [m for m in context if m.role == "system"]
    if est(systems + _last_turn(context)) <= budget:
        assert est(plan.kept) <= budget


@SETTINGS
@given(context=conversations, kw=params)
def test_newest_message_is_always_kept(context: list[Msg], kw: dict[str, Any]) -> None:
    plan = plan_compression(context, estimate=est, **kw)
    conv = _conversation(context)
    if conv:
        assert plan.to_keep and plan.to_keep[-1] is conv[-1]
        last_turn = _last_turn(context)
        if last_turn[0].role == "user":
            assert any(m is last_turn[0] for m in plan.to_keep)
    else:
        assert not plan.to_keep and not plan.would_compress


@SETTINGS
@given(context=conversations, kw=params)
def test_summarized_history_precedes_kept_unless_swapped(
    context: list[Msg], kw: dict[str, Any]
) -> None:
    plan = plan_compression(context, estimate=est, **kw)
    kept = plan.to_keep
    if plan.mode == "intra_turn" and kept and kept[0].role == "user":
        kept = kept[1:]  # the turn's request stays ahead of its summarized tool work
    if plan.swapped or not plan.to_summarize or not kept:
        return
    order = {id(m): i for i, m in enumerate(context)}
    assert max(order[id(m)] for m in plan.to_summarize) < min(order[id(m)] for m in kept)


@SETTINGS
@given(context=conversations, kw=params)
def test_would_compress_matches_the_plan(context: list[Msg], kw: dict[str, Any]) -> None:
    plan = plan_compression(context, estimate=est, **kw)
    assert would_compress(context, estimate=est, **kw) is plan.would_compress
    assert plan.would_compress == bool(plan.to_summarize)


@SETTINGS
@given(
    context=conversations,
    window=st.integers(20, 6000),
    frac=st.sampled_from([0.25, 0.5, 0.8]),
)
def test_hard_truncate_invariants(context: list[Msg], window: int, frac: float) -> None:
    kept, dropped = hard_truncate(context, window=window, estimate=est, frac=frac)
    assert sorted(id(m) for m in kept + dropped) == sorted(id(m) for m in context)
    order = {id(m): i for i, m in enumerate(context)}
    assert _is_subsequence_in_order(kept, order)
    assert _is_subsequence_in_order(dropped, order)
    systems = [m for m in context if m.role == "system"]
    assert all(m.role != "system" for m in dropped)
    assert [id(m) for m in kept if m.role == "system"] == [id(m) for m in systems]
    dropped_ids = {id(m) for m in dropped}
    for group in _tool_groups(context):
        assert len({i in dropped_ids for i in group}) == 1
    conv = _conversation(context)
    if conv:
        assert kept[-1] is conv[-1] or kept[-1].role == "system"
        assert any(m is conv[-1] for m in kept)
    last_turn = _last_turn(context)
    if est(systems + last_turn) <= window * frac:
        assert est(kept) <= window * frac
        assert all(any(k is m for k in kept) for m in last_turn)
    if last_turn and last_turn[0].role == "user":
        assert any(m is last_turn[0] for m in kept)


@SETTINGS
@given(
    prefix=conversations,
    recent=st.lists(st.sampled_from(["plain", "code", "tools"]), min_size=1, max_size=5),
    window=st.integers(200, 20_000),
)
def test_swap_keeps_invariants(prefix: list[Msg], recent: list[str], window: int) -> None:
    """Important turn right before a filler turn at the edge of the kept region."""
    important = [Msg("user", "Remember: deploy on Fridays"), Msg("assistant", "Noted")]
    filler = [Msg("user", "thanks"), Msg("assistant", "k")]
    tail: list[Msg] = []
    for kind in recent:
        tail.append(Msg("user", "next?"))
        if kind == "tools":
            tail += _build([("tools", 1, 20)])
        tail.append(Msg("assistant", "```x```" if kind == "code" else "done"))
    context = [*prefix, *important, *filler, *tail]
    keep = len(recent) + 1
    plan = plan_compression(context, keep_recent=keep, window=window, estimate=est)
    budget = window * 0.65
    fits_unswapped = est([m for m in context if m.role == "system"] + filler + tail) <= budget
    if plan.swapped:
        kept_ids = {id(m) for m in plan.to_keep}
        assert all(id(m) in kept_ids for m in important)
        assert not any(id(m) in kept_ids for m in filler)
        assert est(plan.kept) <= budget
        assert plan.to_keep[-1] is context[-1]
    elif fits_unswapped:
        swapped_size = est([m for m in context if m.role == "system"] + important + tail)
        assert swapped_size > budget
