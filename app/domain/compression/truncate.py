"""Last-resort shrinking without any LLM call."""

from __future__ import annotations

from collections.abc import Sequence

from .planner import Estimator
from .turns import flatten, split_turns, tool_units
from .types import Msg

__all__ = ["HARD_TRUNCATE_TOKEN_FRAC", "hard_truncate"]

HARD_TRUNCATE_TOKEN_FRAC = 0.5


def hard_truncate(
    context: Sequence[Msg],
    *,
    window: int,
    estimate: Estimator,
    frac: float = HARD_TRUNCATE_TOKEN_FRAC,
) -> tuple[list[Msg], list[Msg]]:
    """Drop the oldest history until the context fits ``window × frac``.

    Returns ``(kept, dropped)``, both in the original order of ``context``.

    Rules:

    * every ``system`` message is kept (and counted in the budget);
    * the newest whole turns are kept while ``system + kept turns`` fits;
    * when even the newest turn alone is over the budget, that turn is cut
      inside: its user request is kept together with the newest tool units
      (an assistant tool call and its results are never separated) that fit,
      and its older units are dropped;
    * the request and the newest unit are kept in any case, even over the
      budget — a single message cannot be split here, and the per-message view
      truncation bounds what is actually sent.
    """
    budget = window * frac
    positions = [i for i, m in enumerate(context) if m.role != "system"]
    system = [m for m in context if m.role == "system"]
    conversation = [context[i] for i in positions]
    turns = split_turns(conversation)
    keep_conv: set[int] = set()
    if turns:
        k = len(turns)
        while k > 1 and estimate(system + flatten(turns[-k:])) > budget:
            k -= 1
        kept_turns = turns[-k:]
        for turn in kept_turns[1:]:
            keep_conv.update(range(turn.start, turn.start + len(turn)))
        first = kept_turns[0]
        if k > 1 or estimate(system + first.messages) <= budget:
            keep_conv.update(range(first.start, first.start + len(first)))
        else:
            keep_conv.update(_cut_last_turn(first.messages, first.start, system, budget, estimate))
    keep_ctx = {positions[j] for j in keep_conv}
    kept = [m for i, m in enumerate(context) if m.role == "system" or i in keep_ctx]
    dropped = [m for i, m in enumerate(context) if m.role != "system" and i not in keep_ctx]
    return kept, dropped


def _cut_last_turn(
    messages: list[Msg], start: int, system: list[Msg], budget: float, estimate: Estimator
) -> set[int]:
    has_request = bool(messages) and messages[0].role == "user"
    head = messages[:1] if has_request else []
    offset = start + len(head)
    units = tool_units(messages[len(head) :])
    first_kept = max(0, len(units) - 1)
    while first_kept > 0 and estimate(system + head + flatten(units[first_kept - 1 :])) <= budget:
        first_kept -= 1
    kept = set(range(start, offset)) if has_request else set()
    skipped = sum(len(u) for u in units[:first_kept])
    kept.update(range(offset + skipped, start + len(messages)))
    return kept
