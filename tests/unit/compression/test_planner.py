from __future__ import annotations

from app.domain.compression import Msg, split_turns, tool_units
from app.domain.compression.planner import (
    is_acknowledgement,
    partition_current_turn,
    plan_compression,
    turn_importance,
    would_compress,
)

from .convo import asst, est, ids, system, tool_group, turn, user


def test_split_turns_with_leading_group_and_summaries() -> None:
    lead = asst("hello, I am Navi")
    conv = [lead, user("a"), asst("b"), Msg("user", "S", is_summary=True), user("c")]
    turns = split_turns(conv)
    assert [len(t) for t in turns] == [1, 2, 1, 1]
    assert turns[0].is_leading and turns[0].request is None
    assert turns[2].is_summary
    assert [t.start for t in turns] == [0, 1, 3, 4]


def test_tool_units_keep_calls_with_results() -> None:
    g = tool_group(3)
    orphan = Msg("tool", "orphan")
    units = tool_units([asst("x"), *g, asst("y"), orphan, *tool_group(1)])
    assert [len(u) for u in units] == [1, 4, 1, 1, 2]
    assert ids(units[1]) == ids(g)
    # Without call ids, a tool message right after a group's results joins that group.
    assert [len(u) for u in tool_units([*tool_group(1), orphan])] == [3]
    units = tool_units([orphan, Msg("tool", "again")])
    assert [len(u) for u in units] == [1, 1]


def test_nothing_to_compress_with_few_turns() -> None:
    ctx = turn() + turn()
    plan = plan_compression(ctx, keep_recent=4, window=100_000, estimate=est)
    assert not plan.would_compress
    assert plan.to_keep == ctx
    assert plan.mode == "none"
    assert not would_compress(ctx, keep_recent=4, window=100_000, estimate=est)


def test_keeps_last_n_turns_and_pulls_system_out() -> None:
    turns = [turn(f"q{i}") for i in range(6)]
    sys1, sys2 = system("a"), system("b")
    ctx = [sys1, *turns[0], *turns[1], sys2, *[m for t in turns[2:] for m in t]]
    plan = plan_compression(ctx, keep_recent=4, window=100_000, estimate=est)
    assert ids(plan.system) == ids([sys1, sys2])
    assert ids(plan.to_summarize) == ids(turns[0] + turns[1])
    assert ids(plan.to_keep) == ids([m for t in turns[2:] for m in t])
    assert plan.kept_turns == 4 and plan.mode == "turns"
    assert would_compress(ctx, keep_recent=4, window=100_000, estimate=est)


def test_shrinks_keep_recent_until_the_target_fits() -> None:
    turns = [turn("q" * 100, "a" * 100) for _ in range(6)]  # 240 tokens each
    ctx = [m for t in turns for m in t]
    # target 0.65 × 1000 = 650 → two turns (480) fit, three (720) do not.
    plan = plan_compression(ctx, keep_recent=4, window=1000, estimate=est)
    assert plan.kept_turns == 2
    assert est(plan.kept) <= 650
    assert ids(plan.to_keep) == ids(turns[4] + turns[5])


def test_system_messages_count_against_the_target() -> None:
    turns = [turn("q" * 100, "a" * 100) for _ in range(4)]
    ctx = [system("s" * 250), *[m for t in turns for m in t]]
    plan = plan_compression(ctx, keep_recent=4, window=1000, estimate=est)
    assert plan.kept_turns == 1  # 260 + 2×220 = 700 > 650
    assert plan_compression(ctx[1:], keep_recent=4, window=1000, estimate=est).kept_turns == 2


def test_single_oversized_last_turn_is_kept_whole() -> None:
    big = turn("q", "a" * 5000)
    ctx = turn() + turn() + big
    plan = plan_compression(ctx, keep_recent=3, window=1000, estimate=est)
    assert ids(plan.to_keep) == ids(big)
    assert est(plan.kept) > 650
    assert plan.would_compress


def test_one_turn_without_intra_turn_mode_is_not_compressed() -> None:
    ctx = [user("go"), *tool_group(1, 5000), *tool_group(1, 5000), asst("done")]
    assert not would_compress(ctx, keep_recent=4, window=1000, estimate=est)


def test_importance_scores() -> None:
    [t_ack] = split_turns([user("ok"), asst("Sure.")])
    [t_plain] = split_turns([user("what time is it?"), asst("noon")])
    [t_long] = split_turns([user("x " * 300), asst("fine")])
    [t_remember] = split_turns([user("Remember: deploy only on Fridays"), asst("Noted")])
    [t_code] = split_turns([user("fix"), asst("```py\nprint(1)\n```")])
    [t_crit] = split_turns([user("run"), *tool_group(1, critical=True), asst("done")])
    assert turn_importance(t_ack) < 0 <= turn_importance(t_plain)
    for t in (t_long, t_remember, t_code, t_crit):
        assert turn_importance(t) >= 2.0
    assert turn_importance(t_remember) >= turn_importance(t_ack) + 3


def test_acknowledgements() -> None:
    for text in ["ok", "OK!", "thanks", "Thank you.", "👍", "спасибо", "got it", "", "  k "]:
        assert is_acknowledgement(text), text
    for text in ["ok, now deploy to staging", "why?", "thanks, but use port 8080"]:
        assert not is_acknowledgement(text), text


def test_important_turn_swaps_with_filler() -> None:
    important = turn("Remember: the prod DB password rotates on Mondays", "Noted")
    filler = [user("ok"), asst("👍")]
    recent = [turn(f"q{i}") for i in range(3)]
    old = [turn("old1"), turn("old2")]
    ctx = [m for t in old for m in t] + important + filler + [m for t in recent for m in t]
    plan = plan_compression(ctx, keep_recent=4, window=100_000, estimate=est)
    assert plan.swapped
    assert ids(plan.to_keep) == ids(important + [m for t in recent for m in t])
    assert ids(plan.to_summarize) == ids([m for t in old for m in t] + filler)


def test_no_swap_when_the_oldest_kept_turn_is_not_filler() -> None:
    important = turn("Remember: the prod DB password rotates on Mondays", "Noted")
    normal = turn("what is the disk usage?", "42%")
    ctx = turn("old") + important + normal + turn("q1") + turn("q2") + turn("q3")
    plan = plan_compression(ctx, keep_recent=4, window=100_000, estimate=est)
    assert not plan.swapped
    assert ids(plan.to_keep) == ids(normal + turn_msgs(ctx, 4))


def turn_msgs(ctx: list[Msg], last_n: int) -> list[Msg]:
    return [m for t in split_turns(ctx)[-last_n + 1 :] for m in t.messages]


def test_no_swap_when_it_would_break_the_target() -> None:
    important = turn("Remember: " + "x" * 2000, "Noted")
    filler = [user("ok"), asst("k")]
    ctx = turn("old") + important + filler + turn("q1") + turn("q2")
    plan = plan_compression(ctx, keep_recent=3, window=1000, estimate=est)
    assert not plan.swapped
    assert ids(plan.to_keep[:2]) == ids(filler)


def test_never_swaps_the_newest_turn_away() -> None:
    important = turn("Remember: always use UTC", "Noted")
    ctx = turn("old") + important + [user("ok"), asst("k")]
    plan = plan_compression(ctx, keep_recent=1, window=100_000, estimate=est)
    assert not plan.swapped
    assert plan.to_keep[-1] is ctx[-1]


def test_intra_turn_single_long_turn() -> None:
    request = user("refactor the whole repo")
    groups = [tool_group(1, 100) for _ in range(10)]
    ctx = [system(), request, *[m for g in groups for m in g]]
    plan = plan_compression(
        ctx, keep_recent=4, keep_recent_messages=4, window=100_000, estimate=est
    )
    assert plan.mode == "intra_turn"
    assert plan.to_keep[0] is request
    assert ids(plan.to_keep[1:]) == ids(groups[-2] + groups[-1])
    assert ids(plan.to_summarize) == ids([m for g in groups[:-2] for m in g])
    assert would_compress(ctx, keep_recent=4, keep_recent_messages=4, window=100_000, estimate=est)


def test_intra_turn_rounds_up_to_whole_tool_groups() -> None:
    request = user("go")
    g1, g2 = tool_group(1), tool_group(3)  # 2 and 4 messages
    ctx = [request, *g1, *g2]
    plan = plan_compression(ctx, keep_recent=4, keep_recent_messages=2, window=10**6, estimate=est)
    assert ids(plan.to_keep) == ids([request, *g2])
    assert ids(plan.to_summarize) == ids(g1)


def test_intra_turn_retries_with_two_messages() -> None:
    request = user("go")
    body = [asst("a1"), asst("a2"), asst("a3"), asst("a4")]
    ctx = [request, *body]
    plan = plan_compression(ctx, keep_recent=4, keep_recent_messages=12, window=10**6, estimate=est)
    assert ids(plan.to_keep) == ids([request, body[2], body[3]])
    assert ids(plan.to_summarize) == ids(body[:2])


def test_intra_turn_nothing_when_the_turn_is_tiny() -> None:
    ctx = [user("go"), asst("done")]
    plan = plan_compression(ctx, keep_recent=4, keep_recent_messages=12, window=10, estimate=est)
    assert not plan.would_compress
    assert plan.to_keep == ctx


def test_intra_turn_shrinks_the_tail_to_the_target() -> None:
    request = user("go")
    groups = [tool_group(1, 200) for _ in range(8)]  # 230 per group
    ctx = [request, *[m for g in groups for m in g]]
    plan = plan_compression(ctx, keep_recent=4, keep_recent_messages=12, window=1000, estimate=est)
    assert est(plan.kept) <= 650
    assert ids(plan.to_keep) == ids([request, *groups[-2], *groups[-1]])


def test_intra_turn_after_older_turns_when_last_turn_is_too_big() -> None:
    old = turn("old question")
    request = user("long task")
    groups = [tool_group(1, 300) for _ in range(6)]
    ctx = old + [request, *[m for g in groups for m in g]]
    no_intra = plan_compression(ctx, keep_recent=4, window=1000, estimate=est)
    assert ids(no_intra.to_summarize) == ids(old)  # turn mode: last turn still too big
    plan = plan_compression(ctx, keep_recent=4, keep_recent_messages=4, window=1000, estimate=est)
    assert plan.mode == "intra_turn"
    assert ids(plan.to_summarize) == ids(old + [m for g in groups[:-1] for m in g])
    assert ids(plan.to_keep) == ids([request, *groups[-1]])


def test_turn_mode_preferred_when_it_fits() -> None:
    ctx = [m for _ in range(6) for m in turn("q" * 100, "a" * 100)]
    with_intra = plan_compression(
        ctx, keep_recent=4, keep_recent_messages=12, window=1000, estimate=est
    )
    plain = plan_compression(ctx, keep_recent=4, window=1000, estimate=est)
    assert with_intra.mode == "turns"
    assert ids(with_intra.to_keep) == ids(plain.to_keep)


def test_partition_current_turn_leading_group() -> None:
    [lead] = split_turns([asst("a"), *tool_group(2), asst("b")])
    older, newest = partition_current_turn(lead, 1)
    assert [m.content for m in newest] == ["b"]
    assert len(older) == 4


def test_empty_and_system_only_contexts() -> None:
    assert not plan_compression([], keep_recent=4, window=100, estimate=est).would_compress
    s = system()
    plan = plan_compression([s], keep_recent=4, keep_recent_messages=2, window=1, estimate=est)
    assert plan.system == [s] and plan.to_keep == [] and not plan.would_compress


def test_input_is_not_mutated() -> None:
    ctx = [m for _ in range(6) for m in turn()]
    snapshot = list(ctx)
    plan_compression(ctx, keep_recent=2, keep_recent_messages=2, window=100, estimate=est)
    assert ctx == snapshot


def test_critical_tools_weigh_like_the_critical_flag() -> None:
    from app.domain.compression.planner import turn_importance
    from app.domain.compression.turns import split_turns
    from app.domain.compression.types import Msg

    def t(flag: bool) -> list[Msg]:
        return [
            Msg(role="user", content="run the build"),
            Msg(role="assistant", content="", tool_calls=[{"function": {"name": "build_log"}}]),
            Msg(role="tool", content="ok", name="build_log", is_compression_critical=flag),
            Msg(role="assistant", content="done"),
        ]

    (plain,) = split_turns(t(False))
    (flagged,) = split_turns(t(True))
    assert turn_importance(plain, ["build_log"]) == turn_importance(flagged)
    assert turn_importance(plain, ["build_log"]) > turn_importance(plain)
